import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMemoryStore, type FactInput, openStore, type Store } from "@asp/evidence";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { poolConfig } from "../src/connection.js";
import { migrateStore, openPostgresStore, redactStoreLocation, SCHEMA_VERSION } from "../src/index.js";
import { createDatabase, migratedDatabase, sql, useCluster, withDatabase } from "./helpers.js";

const cluster = useCluster();
const dir = mkdtempSync(join(tmpdir(), "asp-pgstore-"));
const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SECRET = "s3cr3t-Pa55";
const withPassword = (url: string, password: string): string => {
  const u = new URL(url);
  u.password = password;
  return u.toString();
};
const leaks = (error: unknown): boolean => {
  const e = error as { message?: string; stack?: string; cause?: unknown };
  return [JSON.stringify(error), e.message, e.stack, String(e.cause), JSON.stringify(e.cause)].some((t) =>
    String(t).includes(SECRET),
  );
};

describe("openPostgresStore", () => {
  describe("when the database has no store schema yet", () => {
    it("refuses with NOT_MIGRATED (never migrates silently), and opens once migrateStore ran", async () => {
      const url = await createDatabase(cluster.pg.url);
      await expect(openPostgresStore(url)).rejects.toThrowWithCode("ASP_PGSTORE_NOT_MIGRATED");
      expect(await sql(url, "SELECT to_regclass('asp_evidence.kv')::text AS t")).toEqual([{ t: null }]);
      expect(await migrateStore(url)).toEqual({ from: 0, to: SCHEMA_VERSION, applied: [1] });
      expect(await migrateStore(url)).toEqual({ from: SCHEMA_VERSION, to: SCHEMA_VERSION, applied: [] });
      const store = await openPostgresStore(url);
      open.push(store);
      expect(store.id).toMatch(/^[0-9a-f-]{36}$/);
    });

    it("lets concurrent migrators race safely: one applies, the others find it current", async () => {
      const url = await createDatabase(cluster.pg.url);
      const results = await Promise.all([migrateStore(url), migrateStore(url), migrateStore(url)]);
      expect(results.flatMap((r) => r.applied)).toEqual([1]);
      expect(await sql(url, "SELECT count(*)::int AS n FROM asp_evidence.kv WHERE space = 'meta'")).toEqual([{ n: 1 }]);
    });
  });

  describe("when the database's schema is newer than this package", () => {
    it("refuses to open or migrate it with SCHEMA_NEWER, changing nothing", async () => {
      const url = await migratedDatabase(cluster.pg.url);
      await sql(url, "INSERT INTO asp_evidence.schema_migrations (version, name) VALUES (99, 'from the future')");
      await expect(openPostgresStore(url)).rejects.toThrowWithCode("ASP_PGSTORE_SCHEMA_NEWER");
      await expect(migrateStore(url)).rejects.toThrowWithCode("ASP_PGSTORE_SCHEMA_NEWER");
    });
  });

  describe("when the tables hold no evidence store", () => {
    it("refuses with NOT_A_STORE", async () => {
      const url = await migratedDatabase(cluster.pg.url);
      await sql(url, "DELETE FROM asp_evidence.kv WHERE space = 'meta'");
      await expect(openPostgresStore(url)).rejects.toThrowWithCode("ASP_PGSTORE_NOT_A_STORE");
    });
  });

  describe("when credentials are involved", () => {
    it("never echoes the URL's password: not in location, messages, data or causes", async () => {
      const url = await migratedDatabase(cluster.pg.url);
      const store = await openPostgresStore(withPassword(url, SECRET));
      open.push(store);
      expect(store.location).not.toContain(SECRET);
      expect(store.location).toContain("***");
      const missingDb = withPassword(withDatabase(cluster.pg.url, "no_such_db"), SECRET);
      const e1 = await openPostgresStore(missingDb).catch((e: unknown) => e);
      expect(e1).toMatchObject({ code: "ASP_PGSTORE_UNAVAILABLE" });
      expect(leaks(e1)).toBe(false);
      const e2 = await migrateStore(missingDb).catch((e: unknown) => e);
      expect(e2).toMatchObject({ code: "ASP_PGSTORE_UNAVAILABLE" });
      expect(leaks(e2)).toBe(false);
      const refused = withPassword("postgres://asp@127.0.0.1:1/x", SECRET);
      const e3 = await openPostgresStore(refused, { connectTimeoutMs: 2000 }).catch((e: unknown) => e);
      expect(e3).toMatchObject({ code: "ASP_PGSTORE_UNAVAILABLE" });
      expect(leaks(e3)).toBe(false);
      const e4 = await openPostgresStore(`mysql://u:${SECRET}@h/db`).catch((e: unknown) => e);
      expect(e4).toMatchObject({ code: "ASP_PGSTORE_BAD_URL" });
      expect(leaks(e4)).toBe(false);
      expect(redactStoreLocation(withPassword(url, SECRET))).not.toContain(SECRET);
    });

    it("takes the password from passwordFile when the URL has none, and names a missing file by code", () => {
      const file = join(dir, "pw");
      writeFileSync(file, `${SECRET}\n`);
      expect(poolConfig("postgres://asp@db/x", { passwordFile: file }).config.password).toBe(SECRET);
      expect(poolConfig(withPassword("postgres://asp@db/x", "inline"), { passwordFile: file }).config.password).toBe(
        "inline",
      );
      expect(() => poolConfig("postgres://asp@db/x", { passwordFile: join(dir, "missing") })).toThrowWithCode(
        "ASP_PGSTORE_CREDENTIALS",
      );
    });
  });

  describe("when a writer holds a key for its whole evaluation", () => {
    it("makes a second holder of that key wait and fail with STORE_LOCKED, while other keys go on", async () => {
      const url = await migratedDatabase(cluster.pg.url);
      const first = await openPostgresStore(url, { hold: { keys: ["ths.trustedBase:/repo/a"] } });
      open.push(first);
      const waits: number[] = [];
      const error = await openPostgresStore(url, {
        hold: { keys: ["ths.trustedBase:/repo/a"], waitMs: 1500, onWait: (p) => waits.push(p.waitedMs) },
      }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "ASP_EVIDENCE_STORE_LOCKED", data: { key: "ths.trustedBase:/repo/a" } });
      expect(waits.length).toBeGreaterThan(0);
      open.push(await openPostgresStore(url, { hold: { keys: ["ths.trustedBase:/repo/b"], waitMs: 0 } }));
      await first.close();
      open.push(await openPostgresStore(url, { hold: { keys: ["ths.trustedBase:/repo/a"], waitMs: 5000 } }));
    });
  });

  describe("when opened read-only", () => {
    it("refuses appends and puts with READ_ONLY", async () => {
      const url = await migratedDatabase(cluster.pg.url);
      const store = await openPostgresStore(url, { readOnly: true });
      open.push(store);
      await expect(store.log.append([{ kind: "note", record: {} }])).rejects.toThrowWithCode("ASP_EVIDENCE_READ_ONLY");
      await expect(store.objects.putBlob(new Uint8Array([1]))).rejects.toThrowWithCode("ASP_EVIDENCE_READ_ONLY");
    });
  });

  describe("when the same facts go into level, memory and PostgreSQL", () => {
    it("writes the same chain: equal digests at every seq, so a receipt verifies the same in any store", async () => {
      const facts: FactInput[][] = [
        [
          {
            kind: "ths.receipt",
            record: { decision: "allow", n: 1 },
            index: [{ name: "repo", value: "r" }],
            state: ["s"],
          },
        ],
        [
          { kind: "note", record: { é: [1, 2.5, null] } },
          { kind: "ths.receipt", record: { decision: "deny" }, state: ["s"] },
        ],
      ];
      // One fixed time: stores read their clock a different number of times while opening.
      const clock = { now: () => new Date(Date.UTC(2026, 0, 1)) };
      const stores = [
        await openStore(join(dir, "level"), { clock }),
        await createMemoryStore({ clock }),
        await openPostgresStore(await migratedDatabase(cluster.pg.url), { clock }),
      ];
      open.push(...stores);
      const chains = [];
      for (const s of stores) {
        for (const batch of facts) await s.log.append(batch);
        chains.push((await s.log.list()).map((e) => `${e.seq} ${e.prev} ${e.digest}`));
      }
      expect(chains[2]).toEqual(chains[0]);
      expect(chains[1]).toEqual(chains[0]);
    });
  });
});
