import type { AutoRun, RunIdentity } from "@asp/contracts";
import type { AutoRecordKind } from "../durable.js";
import { runIdOf } from "../identity.js";
import type { MachineTransition } from "../machine.js";
import {
  type GuardianMode,
  guardianMode,
  type ResultReviewStage,
  type RunStages,
  resultReviewStage,
} from "../stages.js";
import { type Problems, type Rec, type RunFacts, same } from "./facts.js";

// Stage 2's module: the run itself. Its row starts a run; its proof checks the run record, the
// frozen selection, budgets, independence and stages, and the ledger committed with every transition.

/** The rows Stage 2's storage module adds to the run machine. */
export const STORAGE_ROWS: ReadonlyArray<MachineTransition> = [
  {
    module: "storage",
    stage: "stage2_auto_run_storage",
    from: "absent",
    on: "auto_run_started",
    to: "started",
    entry:
      "no run with this identity exists (a compare-and-swap on the run's head); the selection, budgets, independence and stages freeze with it",
    test: "mediation.test.ts: two writers starting one run identity",
  },
];

/** What the storage proof establishes for every later module: the run, as it froze. */
export interface RunBase {
  /** The first run record: the frozen selection, budgets and independence policy. */
  readonly first: AutoRun;
  readonly run: RunIdentity;
  readonly runs: ReadonlyArray<Rec<AutoRun>>;
  /** The latest run record. */
  readonly latestRun: AutoRun;
  /** How the run treats result review, by its frozen stages. */
  readonly review: ResultReviewStage;
  /** Who resolves an `ask` in this run, by its frozen stages and selection (ADR 0010). */
  readonly guardian: GuardianMode;
}

/**
 * Prove the run's storage facts: started first by `auto_run_started`, one identity on every record
 * and event, nothing frozen drifted, the stages committed once with the start, and the run's ledger
 * with every transition. Null when there is no run record at all (the projection fails closed).
 */
export function proveStorage(facts: RunFacts, bad: Problems): RunBase | null {
  const { recs, events, ordered, input } = facts;
  if (ordered[0] !== undefined && ordered[0].ev.type !== "auto_run_started")
    bad("the first event is not auto_run_started");
  const runs = recs.run as ReadonlyArray<Rec<AutoRun>>;
  const first = runs[0]?.body ?? null;
  const run = first?.run ?? null;
  if (first === null || run === null) return null;
  if (runIdOf(run) !== input.runId) bad("the run record is not this run's identity");
  for (const kind of Object.keys(recs) as AutoRecordKind[]) {
    for (const r of recs[kind]) {
      const rr = (r.body as { run?: RunIdentity }).run;
      if (rr !== undefined && !same(rr, run)) bad(`seq ${r.seq}: ${kind} record of another run`);
    }
  }
  for (const { event } of events.values()) {
    if (!same(event.run, run)) bad(`event ${String(event.event_id)} of another run`);
  }
  const started = events.get(runs[0]?.event_id ?? "");
  if (started?.event.type !== "auto_run_started") bad("the run was not started by auto_run_started");
  for (const r of runs.slice(1)) {
    const b = r.body;
    if (
      !same(b.selection, first.selection) ||
      !same(b.budgets, first.budgets) ||
      !same(b.independence, first.independence)
    ) {
      bad(`seq ${r.seq}: the frozen selection, budgets or independence policy drifted`);
    }
  }
  // The stages the run runs under: committed once, with auto_run_started, and re-deriving from the
  // persisted selection. Every later row is judged by them (a disabled stage projects no claim).
  const stageRecs = recs.stages as ReadonlyArray<Rec<RunStages>>;
  const stages = stageRecs[0]?.body;
  let review: ResultReviewStage = "off";
  let guardian: GuardianMode = "off";
  if (stageRecs.length !== 1 || stages === undefined) bad("the run's stages are not committed exactly once");
  else {
    if (stageRecs[0]?.event_id !== runs[0]?.event_id) bad("the stages did not commit with auto_run_started");
    if (!same(stages.run, run)) bad("the stages record is another run's");
    if (!stages.flags.stage2_auto_run_storage) bad("an Auto Run committed without stage2_auto_run_storage");
    review = resultReviewStage(first.selection, stages.flags);
    guardian = guardianMode(stages, first.selection);
    if (stages.result_review !== review)
      bad(`the stages say ${stages.result_review}, the selection and flags ${review}`);
  }
  // The budget ledger is persisted with every transition, under the run's frozen limits.
  for (const r of runs) {
    const ledger = recs.ledger.find((l) => l.event_id === r.event_id)?.body as { limits?: unknown } | undefined;
    if (ledger === undefined || !same(ledger.limits, first.budgets))
      bad(`seq ${r.seq}: transition without the run's budget ledger`);
  }
  const latestRun = (runs[runs.length - 1] as Rec<AutoRun>).body;
  return { first, run, runs, latestRun, review, guardian };
}
