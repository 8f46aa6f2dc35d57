import { join } from "node:path";
import { createMemoryStore, openStore, type Store } from "../src/index.js";
import { describeStoreConformance, type RawStoreAccess } from "./conformance/index.js";
import { rawSpace, tempDir, withRawLevel } from "./helpers/tmp.js";

describeStoreConformance("memory", { open: (options) => createMemoryStore(options) });

describeStoreConformance("level", {
  open: (options) => openStore(join(tempDir(), "store"), options),
  raw: (store: Store): RawStoreAccess => ({
    get: (space, key) => withRawLevel(store.location, async (db) => rawSpace(db, space).get(key)),
    put: (space, key, bytes) => withRawLevel(store.location, (db) => rawSpace(db, space).put(key, bytes)),
    reopen: () => openStore(store.location),
  }),
});
