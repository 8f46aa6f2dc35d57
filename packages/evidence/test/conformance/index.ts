/**
 * The one store conformance suite: every FactLog and ObjectStore behaviour a store backend must
 * have, written once and run unchanged against memory and level (here) and PostgreSQL
 * (`@asp/store-postgres`, whose tests reach it by an alias, `@asp/evidence/conformance`). Test
 * code: never shipped.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  blobDigest,
  type Clock,
  canonicalize,
  type Digest,
  digest,
  encodeTree,
  type FactInput,
  type Store,
  type StoreOptions,
} from "../../src/index.js";
import { describeConditionalAppendConformance } from "./conditional-append.js";

/** Raw access to a closed store's rows, to play the attacker who edits the database. */
export interface RawStoreAccess {
  /** The stored bytes of `key` in `space` (`log` keys are 16-digit seqs), the store closed. */
  get(space: string, key: string): Promise<Uint8Array | undefined>;
  /** Overwrite the bytes of `key` in `space`, the store closed. */
  put(space: string, key: string, bytes: Uint8Array): Promise<void>;
  /** Open the same store again. */
  reopen(): Promise<Store>;
}

/** A store backend under test. */
export interface StoreFixture {
  /** A fresh, empty store. */
  open(options?: StoreOptions): Promise<Store>;
  /** Raw access to a store `open` returned, for backends that persist (not memory). */
  raw?(store: Store): RawStoreAccess;
}

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

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const seqKey = (n: number): string => String(n).padStart(16, "0");

const selection = (scope: string, preset: string): FactInput => ({
  kind: "rollout.selection",
  record: { scope, preset },
  index: [{ name: "scope", value: scope }],
  state: [`rollout.selection/${scope}`],
});

/** Register the whole conformance suite for one backend. */
export function describeStoreConformance(name: string, fixture: StoreFixture): void {
  const open: Store[] = [];
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close();
  });
  const keep = (s: Store): Store => {
    open.push(s);
    return s;
  };
  const fresh = async (options: StoreOptions = { clock: fakeClock() }): Promise<Store> =>
    keep(await fixture.open(options));

  describe(`FactLog (${name})`, () => {
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

      it("rebuilds its indexes from the log to the same answers", async () => {
        const { log } = await fresh();
        for (let i = 0; i < 6; i++)
          await log.append([
            {
              kind: i % 2 ? "odd" : "even",
              record: { i },
              index: [{ name: "m", value: String(i % 3) }],
              state: ["last"],
            },
          ]);
        await log.rebuildIndexes();
        expect((await log.list({ kind: "odd" })).map((e) => e.seq)).toEqual([2, 4, 6]);
        expect((await log.list({ index: { name: "m", value: "0" } })).map((e) => e.seq)).toEqual([1, 4]);
        expect((await log.latest("last"))?.seq).toBe(6);
        expect(await log.verify()).toMatchObject({ ok: true, entries: 6 });
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
        [
          "a state key with a lone surrogate",
          { kind: "note", record: {}, state: ["\ud800"] },
          "ASP_EVIDENCE_BAD_OBJECT",
        ],
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
        const store = await fixture.open();
        await store.close();
        await expect(store.log.append([{ kind: "note", record: {} }])).rejects.toThrowWithCode(
          "ASP_EVIDENCE_STORE_CLOSED",
        );
        await expect(store.objects.putBlob(new Uint8Array([1]))).rejects.toThrowWithCode("ASP_EVIDENCE_STORE_CLOSED");
      });
    });

    describe.runIf(fixture.raw !== undefined)("when a record is edited in the database after the fact", () => {
      async function filled(): Promise<RawStoreAccess> {
        const store = await fixture.open({ clock: fakeClock() });
        for (let i = 1; i <= 5; i++)
          await store.log.append([{ kind: i % 2 ? "odd" : "even", record: { i }, state: ["last"] }]);
        const raw = fixture.raw?.(store) as RawStoreAccess;
        await store.close();
        return raw;
      }
      const text = (b: Uint8Array | undefined): string => new TextDecoder().decode(b);

      it("verify() fails naming its seq, and reads of it fail closed", async () => {
        const raw = await filled();
        await raw.put("log", seqKey(3), enc(text(await raw.get("log", seqKey(3))).replace('"i":3', '"i":33')));
        const store = keep(await raw.reopen());
        expect(await store.log.verify()).toMatchObject({ ok: false, seq: 3 });
        await expect(store.log.read(3)).rejects.toThrowWithCode("ASP_EVIDENCE_CHAIN_BROKEN");
        await expect(store.log.list({ kind: "odd" })).rejects.toThrowWithCode("ASP_EVIDENCE_CHAIN_BROKEN");
        expect((await store.log.read(2)).seq).toBe(2);
      });

      it("catches an edit that also recomputes the entry's own digest, through the link from the next entry", async () => {
        const raw = await filled();
        const v = JSON.parse(text(await raw.get("log", seqKey(2))));
        v.record = { i: 22 };
        const { digest: _old, ...body } = v;
        v.digest = digest(body);
        await raw.put("log", seqKey(2), enc(canonicalize(v)));
        const store = keep(await raw.reopen());
        expect(await store.log.verify()).toMatchObject({ ok: false, seq: 3 });
        await expect(store.log.read(2)).rejects.toThrowWithCode("ASP_EVIDENCE_CHAIN_BROKEN");
      });
    });
  });

  describeConditionalAppendConformance(name, (options) => fixture.open(options ?? { clock: fakeClock() }));

  describe(`ObjectStore (${name})`, () => {
    describe("when blobs and trees are put", () => {
      it("reads them back verified, by their content id", async () => {
        const { objects } = await fresh();
        const d = await objects.putBlob(enc("hello"));
        expect(d).toBe(blobDigest(enc("hello")));
        expect(new TextDecoder().decode(await objects.readBlob(d))).toBe("hello");
        const t = await objects.putTree([{ name: "hello.txt", mode: "100644", digest: d }]);
        expect((await objects.readTree(t)).entries).toEqual([{ name: "hello.txt", mode: "100644", digest: d }]);
        expect(await objects.has("tree", t)).toBe(true);
        expect(await objects.has("blob", t)).toBe(false);
      });

      it("deduplicates: the same content is written once", async () => {
        const { objects } = await fresh();
        const bytes = enc("same");
        const d = blobDigest(bytes);
        expect(
          await objects.putMany([
            { kind: "blob", digest: d, bytes },
            { kind: "blob", digest: d, bytes },
          ]),
        ).toBe(1);
        expect(await objects.putMany([{ kind: "blob", digest: d, bytes }])).toBe(0);
        expect(await objects.putBlob(bytes)).toBe(d);
      });
    });

    describe("when asked for what is not there", () => {
      it("fails with NOT_FOUND, and with BAD_DIGEST for a malformed id", async () => {
        const { objects } = await fresh();
        await expect(objects.readBlob(blobDigest(enc("nope")))).rejects.toThrowWithCode("ASP_EVIDENCE_NOT_FOUND");
        await expect(objects.readTree(blobDigest(enc("nope")))).rejects.toThrowWithCode("ASP_EVIDENCE_NOT_FOUND");
        await expect(objects.readBlob("sha256:xyz" as Digest)).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_DIGEST");
      });
    });

    describe("when an object's bytes do not match the id it is put under", () => {
      it("refuses the whole batch with an integrity error", async () => {
        const { objects } = await fresh();
        const good = enc("good");
        await expect(
          objects.putMany([
            { kind: "blob", digest: blobDigest(good), bytes: good },
            { kind: "blob", digest: blobDigest(enc("other")), bytes: enc("lie") },
          ]),
        ).rejects.toThrowWithCode("ASP_EVIDENCE_INTEGRITY");
        expect(await objects.has("blob", blobDigest(good))).toBe(false);
      });
    });

    describe.runIf(fixture.raw !== undefined)("when a stored object is corrupted in the database", () => {
      it("never returns it: readBlob and readTree fail with a typed integrity error", async () => {
        const store = await fixture.open();
        const d = await store.objects.putBlob(enc("original"));
        const tree = encodeTree([{ name: "f", mode: "100644", digest: d }]);
        const t = await store.objects.putTree(tree.entries);
        await store.log.append([{ kind: "sync", record: {} }]);
        const raw = fixture.raw?.(store) as RawStoreAccess;
        await store.close();
        await raw.put("blob", d, enc("tampered"));
        await raw.put("tree", t, enc(new TextDecoder().decode(tree.bytes).replace('"f"', '"g"')));
        const again = keep(await raw.reopen());
        const blobError = await again.objects.readBlob(d).catch((e: unknown) => e);
        expect(blobError).toMatchObject({ code: "ASP_EVIDENCE_INTEGRITY", category: "integrity" });
        await expect(again.objects.readTree(t)).rejects.toThrowWithCode("ASP_EVIDENCE_INTEGRITY");
      });
    });
  });
}
