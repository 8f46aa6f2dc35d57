import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { canonicalize, digest, type FactInput, openStore, type Store } from "../src/index.js";
import { BACKENDS, fakeClock } from "./helpers/stores.js";
import { dumpSpace, rawSpace, tempDir, withRawLevel } from "./helpers/tmp.js";

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});
const keep = (s: Store): Store => {
  open.push(s);
  return s;
};

const selection = (scope: string, preset: string): FactInput => ({
  kind: "rollout.selection",
  record: { scope, preset },
  index: [{ name: "scope", value: scope }],
  state: [`rollout.selection/${scope}`],
});

describe.each(BACKENDS)("FactLog (%s)", (_name, make) => {
  const fresh = async (): Promise<Store> => keep(await make({ clock: fakeClock() }));

  describe("when entries are appended", () => {
    it("assigns gapless seqs and chains each entry to the previous digest", async () => {
      const { log } = await fresh();
      const [a, b] = await log.append([selection("p1", "review_only"), selection("p2", "off")]);
      const [c] = await log.append([{ kind: "note", record: { n: 3 } }]);
      expect([a?.seq, b?.seq, c?.seq]).toEqual([1, 2, 3]);
      expect(a?.prev).toBeNull();
      expect(b?.prev).toBe(a?.digest);
      expect(c?.prev).toBe(b?.digest);
      expect(await log.head()).toEqual({ seq: 3, digest: c?.digest });
      // Time comes from the injected clock: one tick per append batch.
      expect(a?.at).toBe(b?.at);
      expect(Date.parse(c?.at ?? "") - Date.parse(a?.at ?? "")).toBe(1000);
    });

    it("digests every field of the entry body, canonically", async () => {
      const { log } = await fresh();
      const [e] = await log.append([
        { kind: "note", record: { b: 1, a: 2 }, index: [{ name: "x", value: "y" }], state: ["k"] },
      ]);
      expect(e?.digest).toBe(
        digest({
          v: 1,
          seq: 1,
          kind: "note",
          record: { a: 2, b: 1 },
          at: e?.at,
          index: [["x", "y"]],
          state: ["k"],
          prev: null,
        }),
      );
    });

    it("reads them back by seq, by digest, by kind, by index key and as latest state", async () => {
      const { log } = await fresh();
      await log.append([selection("p1", "review_only"), selection("p2", "off")]);
      const [third] = await log.append([selection("p1", "auto_fix")]);
      expect((await log.read(2)).record).toEqual({ scope: "p2", preset: "off" });
      expect((await log.readByDigest(third?.digest ?? "sha256:")).seq).toBe(3);
      expect((await log.latest("rollout.selection/p1"))?.record).toEqual({ scope: "p1", preset: "auto_fix" });
      expect(await log.latest("rollout.selection/none")).toBeUndefined();
      expect((await log.list({ kind: "rollout.selection" })).map((e) => e.seq)).toEqual([1, 2, 3]);
      expect((await log.list({ index: { name: "scope", value: "p1" } })).map((e) => e.seq)).toEqual([1, 3]);
      expect((await log.list({ kind: "rollout.selection", reverse: true, limit: 2 })).map((e) => e.seq)).toEqual([
        3, 2,
      ]);
      expect((await log.list({ afterSeq: 1 })).map((e) => e.seq)).toEqual([2, 3]);
      expect((await log.list({ kind: "rollout.selection", afterSeq: 3, reverse: true })).map((e) => e.seq)).toEqual(
        [1, 2].reverse(),
      );
      expect(await log.list({ kind: "unknown" })).toEqual([]);
    });

    it("keeps the record canonical: what comes back equals what went in as JSON", async () => {
      const { log } = await fresh();
      const record = { z: [1, 2.5, "é"], a: { nested: true, n: null } };
      const [e] = await log.append([{ kind: "note", record }]);
      expect(canonicalize((await log.read(e?.seq ?? 0)).record)).toBe(canonicalize(record));
    });

    it("serializes concurrent appends into one chain", async () => {
      const { log } = await fresh();
      await Promise.all(Array.from({ length: 20 }, (_, i) => log.append([{ kind: "note", record: { i } }])));
      expect(await log.verify()).toMatchObject({ ok: true, entries: 20 });
    });
  });

  describe("when a batch holds a bad entry", () => {
    it.each([
      ["an empty kind", { kind: "", record: {} }, "ASP_EVIDENCE_BAD_OBJECT"],
      ["a kind with spaces", { kind: "a b", record: {} }, "ASP_EVIDENCE_BAD_OBJECT"],
      ["a record with NaN", { kind: "note", record: { x: Number.NaN } }, "ASP_EVIDENCE_NON_CANONICAL_VALUE"],
      ["a record with undefined", { kind: "note", record: { x: undefined } }, "ASP_EVIDENCE_NON_CANONICAL_VALUE"],
      [
        "an index value with NUL",
        { kind: "note", record: {}, index: [{ name: "a", value: "\0" }] },
        "ASP_EVIDENCE_BAD_OBJECT",
      ],
      ["an empty state key", { kind: "note", record: {}, state: [""] }, "ASP_EVIDENCE_BAD_OBJECT"],
      ["a duplicate state key", { kind: "note", record: {}, state: ["a", "a"] }, "ASP_EVIDENCE_BAD_OBJECT"],
      ["a state key with a lone surrogate", { kind: "note", record: {}, state: ["\ud800"] }, "ASP_EVIDENCE_BAD_OBJECT"],
    ])("rejects %s and writes nothing of the batch", async (_why, bad, code) => {
      const { log } = await fresh();
      await log.append([{ kind: "note", record: { first: true } }]);
      await expect(log.append([{ kind: "note", record: { ok: true } }, bad as FactInput])).rejects.toThrowWithCode(
        code,
      );
      expect(await log.head()).toMatchObject({ seq: 1 });
      expect(await log.list()).toHaveLength(1);
      expect((await log.append([{ kind: "note", record: {} }]))[0]?.seq).toBe(2);
    });
  });

  describe("when asked for what is not there", () => {
    it("fails with NOT_FOUND", async () => {
      const { log } = await fresh();
      await expect(log.read(1)).rejects.toThrowWithCode("ASP_EVIDENCE_NOT_FOUND");
      await expect(log.readByDigest(digest("x"))).rejects.toThrowWithCode("ASP_EVIDENCE_NOT_FOUND");
      await expect(log.read(0)).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
      expect(await log.verify()).toMatchObject({ ok: true, entries: 0, head: null });
    });
  });

  describe("when the store is closed", () => {
    it("fails with STORE_CLOSED", async () => {
      const store = await make();
      await store.close();
      await expect(store.log.append([{ kind: "note", record: {} }])).rejects.toThrowWithCode(
        "ASP_EVIDENCE_STORE_CLOSED",
      );
      await expect(store.objects.putBlob(new Uint8Array([1]))).rejects.toThrowWithCode("ASP_EVIDENCE_STORE_CLOSED");
    });
  });
});

describe("FactLog (level)", () => {
  const seqKey = (n: number): string => String(n).padStart(16, "0");

  async function filled(dir: string, n = 5): Promise<void> {
    const store = await openStore(dir, { clock: fakeClock() });
    for (let i = 1; i <= n; i++)
      await store.log.append([{ kind: i % 2 ? "odd" : "even", record: { i }, state: ["last"] }]);
    await store.close();
  }

  describe("when a record is edited on disk after the fact", () => {
    it("verify() fails naming its seq, and reads of it fail closed", async () => {
      const dir = join(tempDir(), "store");
      await filled(dir);
      await withRawLevel(dir, async (db) => {
        const log = rawSpace(db, "log");
        const text = Buffer.from((await log.get(seqKey(3))) as Uint8Array).toString("utf8");
        await log.put(seqKey(3), new TextEncoder().encode(text.replace('"i":3', '"i":33')));
      });
      const store = keep(await openStore(dir));
      expect(await store.log.verify()).toMatchObject({ ok: false, seq: 3 });
      await expect(store.log.read(3)).rejects.toThrowWithCode("ASP_EVIDENCE_CHAIN_BROKEN");
      await expect(store.log.list({ kind: "odd" })).rejects.toThrowWithCode("ASP_EVIDENCE_CHAIN_BROKEN");
      expect((await store.log.read(2)).seq).toBe(2);
    });

    it("catches an edit that also recomputes the entry's own digest, through the link from the next entry", async () => {
      const dir = join(tempDir(), "store");
      await filled(dir);
      await withRawLevel(dir, async (db) => {
        const log = rawSpace(db, "log");
        const v = JSON.parse(Buffer.from((await log.get(seqKey(2))) as Uint8Array).toString("utf8"));
        v.record = { i: 22 };
        const { digest: _old, ...body } = v;
        v.digest = digest(body);
        await log.put(seqKey(2), new TextEncoder().encode(canonicalize(v)));
      });
      const store = keep(await openStore(dir));
      expect(await store.log.verify()).toMatchObject({ ok: false, seq: 3 });
      await expect(store.log.read(2)).rejects.toThrowWithCode("ASP_EVIDENCE_CHAIN_BROKEN");
    });

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
