import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openStore, type Store } from "../src/index.js";
import { fakeClock } from "./helpers/stores.js";
import { dumpSpace, rawSpace, tempDir, withRawLevel } from "./helpers/tmp.js";

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});
const keep = (s: Store): Store => {
  open.push(s);
  return s;
};

describe("FactLog (level)", () => {
  const seqKey = (n: number): string => String(n).padStart(16, "0");

  async function filled(dir: string, n = 5): Promise<void> {
    const store = await openStore(dir, { clock: fakeClock() });
    for (let i = 1; i <= n; i++)
      await store.log.append([{ kind: i % 2 ? "odd" : "even", record: { i }, state: ["last"] }]);
    await store.close();
  }

  describe("when an entry is deleted on disk after the fact", () => {
    it("refuses to open, naming the missing seq, when an entry is deleted", async () => {
      const dir = join(tempDir(), "store");
      await filled(dir);
      await withRawLevel(dir, (db) => rawSpace(db, "log").del(seqKey(4)));
      const error = await openStore(dir).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "ASP_EVIDENCE_STORE_CORRUPT", data: { missing: { from: 4, to: 4 } } });
    });

    it("refuses to open, naming the missing seq, when the tail is truncated below the head", async () => {
      const dir = join(tempDir(), "store");
      await filled(dir);
      await withRawLevel(dir, (db) => rawSpace(db, "log").del(seqKey(5)));
      const error = await openStore(dir).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "ASP_EVIDENCE_STORE_CORRUPT", data: { missing: { from: 5, to: 5 } } });
    });
  });

  describe("when indexes are rebuilt from the log", () => {
    it("produces exactly the rows incremental appends wrote", async () => {
      const dir = join(tempDir(), "store");
      const store = await openStore(dir, { clock: fakeClock() });
      for (let i = 0; i < 60; i++) {
        await store.log.append([
          {
            kind: ["a", "b", "c"][i % 3] as string,
            record: { i },
            index: [{ name: "mod5", value: String(i % 5) }],
            state: [`s${i % 7}`],
          },
          ...(i % 4 === 0 ? [{ kind: "extra", record: { i }, state: [`s${i % 7}`, "extra"] }] : []),
        ]);
      }
      await store.close();
      const spaces = ["idx", "state", "digest"];
      const dump = (): Promise<Array<Array<[string, string]>>> =>
        withRawLevel(dir, (db) => Promise.all(spaces.map((s) => dumpSpace(db, s))));
      const incremental = await dump();
      await withRawLevel(dir, async (db) => {
        await rawSpace(db, "idx").clear();
        await rawSpace(db, "state").put("bogus", new TextEncoder().encode("1"));
      });
      const again = await openStore(dir);
      await again.log.rebuildIndexes();
      await again.close();
      const rebuilt = await dump();
      expect(rebuilt).toEqual(incremental);
      expect(incremental[0]?.length).toBeGreaterThan(100);
    });

    it("refuses to rebuild from a log that does not verify", async () => {
      const dir = join(tempDir(), "store");
      await filled(dir);
      // An edited entry below the anchored head: the store opens (the proof reads keys and the
      // anchored entry), but nothing is rebuilt from a chain that does not verify.
      await withRawLevel(dir, async (db) => {
        const log = rawSpace(db, "log");
        const text = Buffer.from((await log.get(seqKey(2))) as Uint8Array).toString("utf8");
        await log.put(seqKey(2), new TextEncoder().encode(text.replace('"i":2', '"i":22')));
      });
      const store = keep(await openStore(dir));
      await expect(store.log.rebuildIndexes()).rejects.toThrowWithCode("ASP_EVIDENCE_CHAIN_BROKEN");
    });

    it("finishes an interrupted rebuild on the next open", async () => {
      const dir = join(tempDir(), "store");
      await filled(dir);
      await withRawLevel(dir, async (db) => {
        await rawSpace(db, "meta").put("indexes", new TextEncoder().encode('"rebuilding"'));
        await rawSpace(db, "state").clear();
      });
      const store = keep(await openStore(dir));
      expect((await store.log.latest("last"))?.seq).toBe(5);
    });
  });

  describe("when the store is reopened", () => {
    it("continues the same chain", async () => {
      const dir = join(tempDir(), "store");
      await filled(dir, 3);
      const store = keep(await openStore(dir));
      const [e] = await store.log.append([{ kind: "note", record: {} }]);
      expect(e?.seq).toBe(4);
      expect(e?.prev).toBe((await store.log.read(3)).digest);
      expect(await store.log.verify()).toMatchObject({ ok: true, entries: 4 });
    });
  });
});
