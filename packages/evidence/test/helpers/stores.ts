import { join } from "node:path";
import { type Clock, createMemoryStore, openStore, type Store, type StoreOptions } from "../../src/index.js";
import { tempDir } from "./tmp.js";

/** A fake clock: each call is one second later, starting at a fixed time. */
export function fakeClock(start = Date.UTC(2026, 0, 1)): Clock {
  let t = start;
  return {
    now: () => {
      const d = new Date(t);
      t += 1000;
      return d;
    },
  };
}

/** Both store implementations, for tests that must hold for each. */
export const BACKENDS: ReadonlyArray<readonly [string, (options?: StoreOptions) => Promise<Store>]> = [
  ["level", (options) => openStore(join(tempDir(), "store"), options)],
  ["memory", (options) => createMemoryStore(options)],
];
