import type { Store } from "@asp/evidence";
import { describeStoreConformance, type RawStoreAccess } from "@asp/evidence/conformance";
import { openPostgresStore } from "../src/index.js";
import { migratedDatabase, sql, useCluster } from "./helpers.js";

const cluster = useCluster();
const urls = new WeakMap<Store, string>();

// The same suite the level and memory stores pass (packages/evidence/test/conformance), unchanged.
describeStoreConformance("postgres", {
  async open(options) {
    const url = await migratedDatabase(cluster.pg.url);
    const store = await openPostgresStore(url, options);
    urls.set(store, url);
    return store;
  },
  raw(store): RawStoreAccess {
    const url = urls.get(store) as string;
    const key = (k: string): Buffer => Buffer.from(k, "utf8");
    return {
      async get(space, k) {
        const rows = await sql<{ value: Buffer }>(
          url,
          "SELECT value FROM asp_evidence.kv WHERE space = $1 AND key = $2",
          [space, key(k)],
        );
        return rows[0] === undefined ? undefined : new Uint8Array(rows[0].value);
      },
      async put(space, k, bytes) {
        await sql(url, "UPDATE asp_evidence.kv SET value = $3 WHERE space = $1 AND key = $2", [
          space,
          key(k),
          Buffer.from(bytes),
        ]);
      },
      reopen: () => openPostgresStore(url),
    };
  },
});
