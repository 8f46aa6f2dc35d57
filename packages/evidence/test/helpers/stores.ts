import { join } from "node:path";
import { createMemoryStore, openStore, type Store, type StoreOptions } from "../../src/index.js";
import { tempDir } from "./tmp.js";

export { fakeClock } from "../conformance/index.js";

/** Both store implementations, for tests that must hold for each. */
export const BACKENDS: ReadonlyArray<readonly [string, (options?: StoreOptions) => Promise<Store>]> = [
  ["level", (options) => openStore(join(tempDir(), "store"), options)],
  ["memory", (options) => createMemoryStore(options)],
];
