/**
 * Conditional append (`append(entries, { expect })`), part of the one store conformance suite:
 * registered by `describeStoreConformance`, so memory, level and PostgreSQL run it unchanged.
 * Test code: never shipped.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { AppendCondition, FactEntry, FactInput, FactLog, Store, StoreOptions } from "../../src/index.js";

/** A fact naming state key `key` (and a `tag` index row, to see index rows move or not). */
const under = (key: string, n: number): FactInput => ({
  kind: "cond.note",
  record: { key, n },
  index: [{ name: "tag", value: key }],
  state: [key],
});

/** Everything a reader can see of the log: head, every entry, kind and index rows, the latest of each key. */
async function view(log: FactLog, keys: readonly string[]): Promise<unknown> {
  return {
    head: await log.head(),
    all: (await log.list()).map((e) => e.digest),
    byKind: (await log.list({ kind: "cond.note" })).map((e) => e.seq),
    byIndex: await Promise.all(keys.map(async (k) => (await log.list({ index: { name: "tag", value: k } })).length)),
    latest: await Promise.all(keys.map((k) => log.latestSeq(k))),
  };
}

/** The error an append rejected with (fails the test when it resolved). */
async function refusal(p: Promise<FactEntry[]>): Promise<{ code: string; data: Record<string, unknown> }> {
  const outcome = await p.then(
    (entries) => ({ entries }),
    (error: unknown) => ({ error }),
  );
  if (!("error" in outcome)) throw new Error(`expected a refusal, got seqs ${outcome.entries.map((e) => e.seq)}`);
  return outcome.error as { code: string; data: Record<string, unknown> };
}

/** Register the conditional-append cases for one backend. */
export function describeConditionalAppendConformance(
  name: string,
  open: (options?: StoreOptions) => Promise<Store>,
): void {
  const opened: Store[] = [];
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close();
  });
  const fresh = async (): Promise<FactLog> => {
    const s = await open();
    opened.push(s);
    return s.log;
  };

  describe(`FactLog conditional append (${name})`, () => {
    describe("when every condition holds", () => {
      it("commits, and latestSeq reads back the new head of the key", async () => {
        const log = await fresh();
        expect(await log.latestSeq("run/a")).toBeNull();
        const [first] = await log.append([under("run/a", 1)], { expect: [{ key: "run/a", seq: null }] });
        expect(first?.seq).toBe(1);
        expect(await log.latestSeq("run/a")).toBe(1);
        await log.append([{ kind: "other", record: {} }]);
        const [second] = await log.append([under("run/a", 2)], { expect: [{ key: "run/a", seq: 1 }] });
        expect(second?.seq).toBe(3);
        expect(await log.latestSeq("run/a")).toBe(3);
        expect((await log.latest("run/a"))?.record).toEqual({ key: "run/a", n: 2 });
        expect(await log.verify()).toMatchObject({ ok: true, entries: 3 });
      });

      it("an unconditional append still commits as before (no expect, or an empty one)", async () => {
        const log = await fresh();
        await log.append([under("k", 1)]);
        await log.append([under("k", 2)], {});
        await log.append([under("k", 3)], { expect: [] });
        expect(await log.latestSeq("k")).toBe(3);
      });

      it("an empty batch with conditions asserts them and writes nothing", async () => {
        const log = await fresh();
        await log.append([under("k", 1)]);
        expect(await log.append([], { expect: [{ key: "k", seq: 1 }] })).toEqual([]);
        expect((await refusal(log.append([], { expect: [{ key: "k", seq: null }] }))).code).toBe(
          "ASP_EVIDENCE_CONDITION_FAILED",
        );
        expect(await log.head()).toMatchObject({ seq: 1 });
      });
    });

    describe("when the expected seq is stale", () => {
      it("refuses with CONDITION_FAILED naming key, expected and actual, and writes nothing: head, entries, index and state rows unchanged", async () => {
        const log = await fresh();
        await log.append([under("run/a", 1)]);
        await log.append([under("run/a", 2)]);
        const before = await view(log, ["run/a", "run/b"]);
        const error = await refusal(
          log.append([under("run/a", 3), under("run/b", 1)], { expect: [{ key: "run/a", seq: 1 }] }),
        );
        expect(error).toMatchObject({
          code: "ASP_EVIDENCE_CONDITION_FAILED",
          category: "internal",
          data: { key: "run/a", expected: 1, actual: 2 },
        });
        expect(await view(log, ["run/a", "run/b"])).toEqual(before);
        expect(await log.verify()).toMatchObject({ ok: true, entries: 2 });
        // The handle is not poisoned: the next append (conditional or not) commits at the next seq.
        const [next] = await log.append([under("run/a", 4)], { expect: [{ key: "run/a", seq: 2 }] });
        expect(next?.seq).toBe(3);
      });

      it("refuses a seq expected for a key no entry ever named (actual null)", async () => {
        const log = await fresh();
        await log.append([under("other", 1)]);
        const error = await refusal(log.append([under("fresh", 1)], { expect: [{ key: "fresh", seq: 1 }] }));
        expect(error).toMatchObject({
          code: "ASP_EVIDENCE_CONDITION_FAILED",
          data: { key: "fresh", expected: 1, actual: null },
        });
        expect(await log.latestSeq("fresh")).toBeNull();
      });
    });

    describe("when the expectation is null (no entry ever named the key)", () => {
      it("commits on a fresh key", async () => {
        const log = await fresh();
        await log.append([under("other", 1)]);
        const [e] = await log.append([under("fresh", 1)], { expect: [{ key: "fresh", seq: null }] });
        expect(e?.seq).toBe(2);
      });

      it("refuses on a key already used, with its seq as actual", async () => {
        const log = await fresh();
        await log.append([under("used", 1)]);
        await log.append([under("other", 1)]);
        const before = await view(log, ["used", "other"]);
        const error = await refusal(log.append([under("used", 2)], { expect: [{ key: "used", seq: null }] }));
        expect(error).toMatchObject({
          code: "ASP_EVIDENCE_CONDITION_FAILED",
          data: { key: "used", expected: null, actual: 1 },
        });
        expect(await view(log, ["used", "other"])).toEqual(before);
      });
    });

    describe("when a call has two conditions", () => {
      it("commits when both hold", async () => {
        const log = await fresh();
        await log.append([under("a", 1)]);
        await log.append([under("b", 1)]);
        const entries = await log.append([under("a", 2), under("b", 2)], {
          expect: [
            { key: "a", seq: 1 },
            { key: "b", seq: 2 },
          ],
        });
        expect(entries.map((e) => e.seq)).toEqual([3, 4]);
      });

      it.each([
        ["the first", { key: "a", seq: 2 }, { key: "b", seq: 2 }, "a"],
        ["the second", { key: "a", seq: 1 }, { key: "b", seq: null }, "b"],
      ] as const)("refuses when %s fails, names it, and writes nothing", async (_which, c1, c2, failing) => {
        const log = await fresh();
        await log.append([under("a", 1)]);
        await log.append([under("b", 1)]);
        const before = await view(log, ["a", "b"]);
        const error = await refusal(log.append([under("a", 2), under("b", 2)], { expect: [c1, c2] }));
        expect(error).toMatchObject({ code: "ASP_EVIDENCE_CONDITION_FAILED", data: { key: failing } });
        expect(await view(log, ["a", "b"])).toEqual(before);
      });
    });

    describe("when conditional calls are committed together (one group commit)", () => {
      it("each call is judged after the calls before it: a failing call fails alone, a later one sees the earlier one's state rows", async () => {
        const log = await fresh();
        await log.append([under("k", 0)]);
        // A batch in flight, so the calls below queue and go into the next batch together.
        const inFlight = log.append([{ kind: "other", record: {} }]);
        const calls = [
          log.append([under("k", 1)]), // seq 3, unconditional
          log.append([under("k", 2)], { expect: [{ key: "k", seq: 1 }] }), // stale: 3 wrote k
          log.append([under("k", 3)], { expect: [{ key: "k", seq: 3 }] }), // sees 3's state row: seq 4
          log.append([under("j", 1)], { expect: [{ key: "j", seq: null }] }), // fresh key: seq 5
          log.append([under("j", 2)], { expect: [{ key: "j", seq: null }] }), // 5 named j: refused
          log.append([under("k", 4)]), // seq 6, unconditional
        ];
        const outcomes = await Promise.allSettled([inFlight, ...calls]);
        const seqs = outcomes.map((o) =>
          o.status === "fulfilled" ? o.value.map((e) => e.seq) : (o.reason as { data: unknown }).data,
        );
        expect(seqs).toEqual([
          [2],
          [3],
          { key: "k", expected: 1, actual: 3 },
          [4],
          [5],
          { key: "j", expected: null, actual: 5 },
          [6],
        ]);
        expect(await log.latestSeq("k")).toBe(6);
        expect(await log.latestSeq("j")).toBe(5);
        expect(await log.verify()).toMatchObject({ ok: true, entries: 6 });
      });

      it("of N calls expecting the same head, exactly one commits; every other sees the winner", async () => {
        const log = await fresh();
        const [base] = await log.append([under("k", 0)]);
        const outcomes = await Promise.allSettled(
          Array.from({ length: 12 }, (_, i) =>
            log.append([under("k", i + 1)], { expect: [{ key: "k", seq: base?.seq ?? 0 }] }),
          ),
        );
        const won = outcomes.flatMap((o) => (o.status === "fulfilled" ? o.value : []));
        expect(won).toHaveLength(1);
        const lost = outcomes.flatMap((o) => (o.status === "rejected" ? [o.reason] : []));
        expect(lost).toHaveLength(11);
        for (const e of lost)
          expect(e).toMatchObject({ code: "ASP_EVIDENCE_CONDITION_FAILED", data: { actual: won[0]?.seq } });
        expect(await log.head()).toMatchObject({ seq: 2 });
      });
    });

    describe("when a condition is malformed", () => {
      it.each([
        ["a seq of 0", [{ key: "k", seq: 0 }]],
        ["a negative seq", [{ key: "k", seq: -1 }]],
        ["a fractional seq", [{ key: "k", seq: 1.5 }]],
        ["a string seq", [{ key: "k", seq: "1" }]],
        ["an empty key", [{ key: "", seq: null }]],
        ["a key with NUL", [{ key: "a\0b", seq: null }]],
        [
          "the same key twice",
          [
            { key: "k", seq: 1 },
            { key: "k", seq: 1 },
          ],
        ],
        ["expect that is not an array", { key: "k", seq: 1 }],
      ])("rejects %s with BAD_OBJECT and writes nothing", async (_why, expectValue) => {
        const log = await fresh();
        await log.append([under("k", 1)]);
        await expect(
          log.append([under("k", 2)], { expect: expectValue as unknown as AppendCondition[] }),
        ).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
        expect(await log.head()).toMatchObject({ seq: 1 });
      });
    });
  });
}
