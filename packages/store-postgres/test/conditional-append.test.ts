import type { FactEntry, FactLog, Store } from "@asp/evidence";
import { afterEach, describe, expect, it } from "vitest";
import { openPostgresStore } from "../src/index.js";
import { migratedDatabase, useCluster } from "./helpers.js";

// Two writers on two connections (two pools, as two hosts would have) race on one state key K.
// A promoter reads K's head, and if it is a candidate appends a Verified for it only if K still
// has that head; a producer appends newer candidates under K. Whatever the interleaving, a
// Verified entry directly follows (under K) the candidate it names: a newer candidate committed
// between the promoter's check and its append is never superseded by Verified.

const cluster = useCluster();
const K = "run/r1";
const opened: Store[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
});

/** Two handles on one new store. */
async function twoWriters(): Promise<[FactLog, FactLog]> {
  const url = await migratedDatabase(cluster.pg.url);
  const a = await openPostgresStore(url);
  const b = await openPostgresStore(url);
  opened.push(a, b);
  return [a.log, b.log];
}

const candidate = (n: number) => ({ kind: "run.candidate", record: { n }, state: [K] });
const verified = (of: number) => ({ kind: "run.verified", record: { of }, state: [K] });

type Outcome = { committed: FactEntry[] } | { refused: { code: string; data: Record<string, unknown> } } | "skipped";

/** Read K's head; promote it when it is a candidate, on that head only. */
async function promote(log: FactLog): Promise<Outcome> {
  const head = await log.latest(K);
  if (head === undefined || head.kind !== "run.candidate") return "skipped";
  return log.append([verified(head.seq)], { expect: [{ key: K, seq: head.seq }] }).then(
    (committed) => ({ committed }),
    (refused: { code: string; data: Record<string, unknown> }) => ({ refused }),
  );
}

/** Every Verified entry directly follows, under K, the candidate it names. */
async function assertNeverSuperseded(log: FactLog): Promise<number> {
  const underK = (await log.list()).filter((e) => e.state.includes(K));
  let count = 0;
  underK.forEach((e, i) => {
    if (e.kind !== "run.verified") return;
    count++;
    const before = underK[i - 1] as FactEntry;
    expect(before.kind, `verified seq ${e.seq}`).toBe("run.candidate");
    expect((e.record as { of: number }).of, `verified seq ${e.seq}`).toBe(before.seq);
  });
  return count;
}

describe("conditional append races (postgres, two connections)", () => {
  describe("when the other writer commits between the check and the append", () => {
    it("20 rounds: the promoter's append on the head it read is refused, naming the newer head, and writes nothing", {
      timeout: 60_000,
    }, async () => {
      const [a, b] = await twoWriters();
      await b.append([candidate(0)]);
      for (let round = 1; round <= 20; round++) {
        const seen = await a.latestSeq(K);
        const [newer] = await b.append([candidate(round)]);
        const head = await b.head();
        const error = await a
          .append([verified(seen ?? 0)], { expect: [{ key: K, seq: seen }] })
          .catch((e: unknown) => e);
        expect(error).toMatchObject({
          code: "ASP_EVIDENCE_CONDITION_FAILED",
          data: { key: K, expected: seen, actual: newer?.seq },
        });
        expect(await b.head()).toEqual(head);
      }
      expect(await assertNeverSuperseded(a)).toBe(0);
      expect(await a.verify()).toMatchObject({ ok: true, entries: 21 });
    });
  });

  describe("when promoters and a producer run at once on two connections", () => {
    it("20 rounds: a Verified never supersedes a newer candidate; every refusal names a newer head", {
      timeout: 120_000,
    }, async () => {
      const [a, b] = await twoWriters();
      await b.append([candidate(0)]);
      const tally = { committed: 0, refused: 0, skipped: 0 };
      for (let round = 1; round <= 20; round++) {
        const outcomes = await Promise.all([promote(a), b.append([candidate(round)]), promote(b)]);
        for (const o of [outcomes[0], outcomes[2]]) {
          if (o === "skipped") tally.skipped++;
          else if ("committed" in o) tally.committed++;
          else {
            tally.refused++;
            expect(o.refused).toMatchObject({ code: "ASP_EVIDENCE_CONDITION_FAILED", data: { key: K } });
            expect(o.refused.data.actual as number).toBeGreaterThan(o.refused.data.expected as number);
          }
        }
      }
      // Every acknowledged promotion is in the log, and each follows the candidate it names.
      expect(await assertNeverSuperseded(a)).toBe(tally.committed);
      expect(tally.committed + tally.refused + tally.skipped).toBe(40);
      expect(await a.verify()).toMatchObject({ ok: true, entries: 21 + tally.committed });
    });

    it("20 rounds: two promoters of one head on two connections, exactly one commits", {
      timeout: 60_000,
    }, async () => {
      const [a, b] = await twoWriters();
      for (let round = 1; round <= 20; round++) {
        const [c] = await a.append([candidate(round)]);
        const seq = c?.seq ?? 0;
        const outcomes = await Promise.allSettled(
          [a, b].map((log) => log.append([verified(seq)], { expect: [{ key: K, seq }] })),
        );
        expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
        expect(outcomes.find((o) => o.status === "rejected")).toMatchObject({
          reason: { code: "ASP_EVIDENCE_CONDITION_FAILED", data: { expected: seq, actual: seq + 1 } },
        });
      }
      expect(await assertNeverSuperseded(b)).toBe(20);
      expect(await b.verify()).toMatchObject({ ok: true, entries: 40 });
    });
  });
});
