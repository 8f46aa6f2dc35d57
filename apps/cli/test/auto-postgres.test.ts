import {
  type AutoRunProjection,
  createAutoRunner,
  createScriptedEngine,
  loadAutoRunProjection,
  readRunFacts,
  runIdOf,
  runStateKey,
} from "@asp/auto-mode";
import type { Store } from "@asp/evidence";
import { createStageFlags } from "@asp/rollout";
import { migrateStore, openPostgresStore } from "@asp/store-postgres";
import { startPostgres, type ThrowawayPostgres } from "@asp/test-utils";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

// Auto Runs on a shared PostgreSQL store, as two hosts would share one (here: the host composer's
// packages, which apps may depend on; DESIGN §2 keeps store-postgres and auto-mode apart).

let cluster: ThrowawayPostgres;
let url: string;
beforeAll(async () => {
  cluster = await startPostgres({ prefix: "asp-cli-auto-pg-" });
  url = cluster.url;
  await migrateStore(url);
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});
const opened: Store[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
});

// The Auto Mode run machine on PostgreSQL: the compare-and-swaps it relies on (run creation,
// Verified promotion) hold across two connections, as two hosts on one shared store would have.
describe("an Auto Run on a shared PostgreSQL store (two connections)", () => {
  let runs = 0;
  /** A fresh run identity per test: one database serves the file. */
  const nextRun = () => ({ root_frame_id: "frame-pg", branch_id: "b", turn_id: `t${++runs}`, execution_id: "e" });
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
    const RUN = nextRun();
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
    const RUN = nextRun();
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
