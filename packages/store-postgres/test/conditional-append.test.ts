import {
  type AutoRunProjection,
  createAutoRunner,
  createScriptedEngine,
  loadAutoRunProjection,
  readRunFacts,
  runIdOf,
  runStateKey,
} from "@asp/auto-mode";
import type { FactEntry, FactLog, Store } from "@asp/evidence";
import { createStageFlags } from "@asp/rollout";
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

// The Auto Mode run machine on PostgreSQL: the compare-and-swaps it relies on (run creation,
// Verified promotion) hold across two connections, as two hosts on one shared store would have.
describe("an Auto Run on a shared PostgreSQL store (two connections)", () => {
  const RUN = { root_frame_id: "frame-pg", branch_id: "b", turn_id: "t", execution_id: "e" };
  const SELECTION = {
    preset: "off",
    result_review_mode: "review_only",
    approvals_reviewer: "user",
    source: "frame",
    normalized: false,
  } as const;
  const flags = createStageFlags(["stage2_auto_run_storage", "stage4_review_completion_gate"]);
  const runnerOn = (store: Store, reviewerActs?: () => Promise<void>) =>
    createAutoRunner({
      store,
      flags,
      engine: createScriptedEngine({
        actor: { actor_id: "agent", session_id: "s-agent", fingerprint: "model-a" },
        steps: [{ kind: "completion", payload: "The answer is 42.", artifacts: [], evidence: [] }],
      }),
      reviewers: [
        {
          identity: { actor_id: "reviewer", session_id: "s-reviewer", fingerprint: "model-b" },
          verifier: {
            verify: async () => {
              await reviewerActs?.();
              return { kind: "review", verdict: "pass", findings: [] };
            },
          },
        },
      ],
    });

  it("AM.states.3: two hosts starting one run identity make one run, Verified, and a third connection projects it", {
    timeout: 60_000,
  }, async () => {
    const url = await migratedDatabase(cluster.pg.url);
    const [a, b, c] = [await openPostgresStore(url), await openPostgresStore(url), await openPostgresStore(url)];
    opened.push(a, b, c);
    const outcomes = await Promise.allSettled([
      runnerOn(a).run({ run: RUN, selection: SELECTION }),
      runnerOn(b).run({ run: RUN, selection: SELECTION }),
    ]);
    const won = outcomes.filter((o) => o.status === "fulfilled");
    expect(won).toHaveLength(1);
    expect(outcomes.find((o) => o.status === "rejected")).toMatchObject({
      reason: { code: "ASP_AUTO_MODE_RUN_EXISTS" },
    });
    expect((won[0] as PromiseFulfilledResult<AutoRunProjection>).value.state).toBe("verified");
    const shown = await loadAutoRunProjection(c, runIdOf(RUN));
    expect(shown).toMatchObject({ state: "verified", problems: [] });
  });

  it("AM.states.3: a newer candidate another host commits while the Reviewer answers is never superseded by Verified", {
    timeout: 60_000,
  }, async () => {
    const url = await migratedDatabase(cluster.pg.url);
    const [a, b] = [await openPostgresStore(url), await openPostgresStore(url)];
    opened.push(a, b);
    const runId = runIdOf(RUN);
    // While the Reviewer answers, the other host appends a newer run record under the run's head.
    const interfere = async (): Promise<void> => {
      const head = await b.log.latest(runStateKey(runId));
      if (head === undefined) throw new Error("the run has no head");
      const record = head.record as { event_id: string; body: Record<string, unknown> };
      await b.log.append([
        {
          kind: head.kind,
          record: { ...record, body: { ...record.body, generation: 2 } },
          state: [runStateKey(runId)],
        },
      ]);
    };
    const p = await runnerOn(a, interfere).run({ run: RUN, selection: SELECTION });
    expect(p.state).not.toBe("verified");
    expect(p.terminal_reason).toBe("safety_boundary");
    const facts = await readRunFacts(a.log, runId);
    expect(
      facts.some(
        (f) =>
          f.kind === "auto.candidate" &&
          (f.record as { body: { review_status: string } }).body.review_status === "verified",
      ),
    ).toBe(false);
  });
});
