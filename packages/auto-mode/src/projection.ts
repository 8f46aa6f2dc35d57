import {
  type AutoRun,
  type AutoRunState,
  type BudgetLedger,
  CANDIDATE_USER_TRUTH,
  type Candidate,
  type Finding,
  type RepairRun,
  type ReviewRun,
  type ReviewVerdict,
  type RunIdentity,
  TERMINAL_USER_TRUTH,
  type TerminalReason,
  type TerminalRecord,
} from "@asp/contracts";
import { type Digest, type FrozenSnapshot, readSnapshot, type Store, verifySnapshot } from "@asp/evidence";
import { AUTO_FACT_KINDS, readRunFacts, type StepRecord } from "./durable.js";
import { blocksVerified } from "./findings.js";
import { type RunPhase, replayRun } from "./machine.js";
import { proveSteps } from "./modules/actions.js";
import { proveCandidates } from "./modules/candidate.js";
import { proveLedger } from "./modules/engine.js";
import { type ProjectionInput, readFacts } from "./modules/facts.js";
import { type GuardianDecisionView, proveGuardian } from "./modules/guardian.js";
import { type FindingStatusView, findingStatuses, proveRepairs, proveRepairTerminal } from "./modules/repair.js";
import { proveReviews } from "./modules/review.js";
import { proveStorage } from "./modules/storage.js";
import { proveTerminal } from "./modules/terminal.js";
import type { ResultReviewStage } from "./stages.js";

export type { ProjectionFact, ProjectionInput } from "./modules/facts.js";
export type { GuardianDecisionView } from "./modules/guardian.js";

/** The one projection of an Auto Run (CLI, reopen, server): what may be shown, from durable records only. */
export interface AutoRunProjection {
  readonly runId: string;
  readonly run: RunIdentity | null;
  /** The selection the run persisted when it started (Stage 2), never re-resolved; null when failed closed. */
  readonly selection: AutoRun["selection"] | null;
  /** How the run treats result review (its frozen stages); null when failed closed. */
  readonly result_review: ResultReviewStage | null;
  /**
   * The Stage 3 shadow judgment (null unless `result_review` is `shadow` and a Reviewer was
   * selected): recorded, shown, and gating nothing. `final` is false while the review is
   * still running, or when the run stopped before its last attempt completed.
   */
  readonly shadow: ShadowJudgment | null;
  /** One of the five states, or null (no candidate yet, or a terminal reason outside them). */
  readonly state: AutoRunState | null;
  readonly terminal_reason: TerminalReason | null;
  readonly user_truth: string;
  /** The latest candidate, with its review status as the durable records prove it. */
  readonly candidate: (Candidate & { readonly review_status: "candidate" | "verified" | "unverified" }) | null;
  readonly review_runs: ReadonlyArray<ReviewRun>;
  readonly findings: ReadonlyArray<Finding>;
  /** The Repair Runs (Stage 5), in round order, as last committed. */
  readonly repair_runs: ReadonlyArray<RepairRun>;
  /**
   * Every finding's status with the durable record that causes it: a review records findings
   * `open`; `claimed`, `resolved` and `unaddressed` are derived from the Repair Runs and the
   * independent re-review, never read from a row's own claim.
   */
  readonly finding_statuses: ReadonlyArray<FindingStatusView>;
  /** The latest candidate's findings that block Verified: material and open, claimed or unaddressed. */
  readonly blocking_finding_ids: ReadonlyArray<string>;
  readonly terminal: TerminalRecord | null;
  /**
   * The user truth with what the record names beside it: the exhausted counter
   * (`Paused · Budget exhausted · wall_time_s`), `Loop detected` for a loop stop, the policy refusal.
   */
  readonly label: string;
  /** The run's mediated steps (turns, admitted / executed / refused actions), in commit order. */
  readonly steps: ReadonlyArray<StepRecord>;
  /**
   * Who resolved `ask` decisions in this run (`off`, Stage 6 `shadow`, Stage 7 `enforce`); null
   * when failed closed.
   */
  readonly guardian: "off" | "shadow" | "enforce" | null;
  /** The Guardian's decisions (Stages 6 and 7), each proved against the step recording its ask. */
  readonly guardian_decisions: ReadonlyArray<GuardianDecisionView>;
  /** The budget ledger as last committed (null when failed closed or none). */
  readonly ledger: BudgetLedger | null;
  /** The run machine's phase the committed facts prove ({@link replayRun}); null when failed closed. */
  readonly phase: RunPhase | null;
  /** Why the projection failed closed to the safety boundary (empty when it did not). */
  readonly problems: ReadonlyArray<string>;
}

/** A Stage 3 shadow review as the projection shows it: its verdict, gating nothing. */
export interface ShadowJudgment {
  readonly review_run_id: string;
  /** The shadow verdict, or null when no attempt gave an admissible one. */
  readonly verdict: ReviewVerdict | null;
  /** The last attempt's outcome (null before any attempt completed). */
  readonly outcome: ReviewRun["attempts"][number]["outcome"] | null;
  /** Whether the review's last attempt completed (a verdict, or the last budgeted attempt). */
  readonly final: boolean;
  readonly finding_ids: ReadonlyArray<string>;
}
function failClosed(input: ProjectionInput, run: RunIdentity | null, problems: string[]): AutoRunProjection {
  return {
    runId: input.runId,
    run,
    selection: null,
    result_review: null,
    shadow: null,
    state: null,
    terminal_reason: "safety_boundary",
    user_truth: TERMINAL_USER_TRUTH.safety_boundary,
    candidate: null,
    review_runs: [],
    findings: [],
    repair_runs: [],
    finding_statuses: [],
    blocking_finding_ids: [],
    terminal: null,
    label: TERMINAL_USER_TRUTH.safety_boundary,
    steps: [],
    guardian: null,
    guardian_decisions: [],
    ledger: null,
    phase: null,
    problems,
  };
}

/**
 * Project an Auto Run from its durable records (pure; refreshing never promotes anything). The
 * records and their events are reconciled as one fact: every record has its transition's event;
 * every candidate its snapshot, payload and `candidate_ready`; every review run its audit events,
 * re-hashing assessments and the findings they name; the terminal its event and its entry
 * conditions. Anything missing, mismatched, unverifiable or contradictory (a pass beside an open
 * material finding, a self-review, a drifted Reviewer binding) projects the safety boundary,
 * never Verified or Unavailable.
 */
export function projectAutoRun(input: ProjectionInput): AutoRunProjection {
  const problems: string[] = [];
  const bad = (p: string): void => {
    problems.push(p);
  };
  // The committed facts, each checked, replayed through the run machine; then each stage module
  // proves its own facts, in the order the run commits them.
  const facts = readFacts(input, replayRun, bad);
  const base = proveStorage(facts, bad);
  if (base === null) return failClosed(input, null, [...problems, "no auto_run record"]);
  const cands = proveCandidates(facts, base, bad);
  const reviews = proveReviews(facts, base, cands, bad);
  const { rec: terminalRec, terminal } = proveTerminal(facts, base, cands, reviews, bad);
  const repairs = proveRepairs(facts, base, cands, reviews, bad);
  proveRepairTerminal(facts, base, reviews, repairs, terminalRec, bad);
  proveSteps(facts, base, terminalRec?.seq, bad);
  const guardianDecisions = proveGuardian(facts, base, bad);
  proveLedger(facts, base, bad);
  const { run, first } = base;
  const review = base.review;
  const latest = cands.latest;
  const { reviewById, findingById } = reviews;
  const steps = facts.steps;
  const recs = facts.recs;
  const replay = facts.replay;

  if (problems.length > 0) return failClosed(input, run, problems);
  const reviewRuns = [...reviewById.values()].map((r) => r.body);
  const status = terminal?.state === "verified" ? "verified" : terminal === null ? "candidate" : "unverified";
  const ofLatest = reviewRuns.filter((r) => r.candidate_id === latest?.body.candidate_id);
  const shadowRun = review === "shadow" ? ofLatest[ofLatest.length - 1] : undefined;
  const lastAttempt = shadowRun?.attempts[shadowRun.attempts.length - 1];
  return {
    runId: input.runId,
    run,
    selection: first.selection,
    result_review: review,
    shadow:
      shadowRun === undefined
        ? null
        : {
            review_run_id: shadowRun.review_run_id,
            verdict: shadowRun.verdict,
            outcome: lastAttempt?.outcome ?? null,
            final:
              lastAttempt !== undefined &&
              (lastAttempt.outcome === "verdict" ||
                lastAttempt.attempt >= Math.min(2, first.budgets.max_review_rounds)),
            finding_ids: [...shadowRun.finding_ids],
          },
    state: terminal === null ? (latest === undefined ? null : "candidate") : terminal.state,
    terminal_reason: terminal?.terminal_reason ?? null,
    user_truth:
      terminal === null
        ? latest === undefined
          ? "Started · no candidate"
          : CANDIDATE_USER_TRUTH
        : terminal.user_truth,
    candidate: latest === undefined ? null : { ...latest.body, review_status: status },
    review_runs: reviewRuns,
    findings: [...findingById.values()],
    repair_runs: repairs.repairs,
    finding_statuses: findingStatuses(reviews, repairs),
    blocking_finding_ids: ofLatest
      .flatMap((r) => r.finding_ids)
      .filter((id) => {
        const f = findingById.get(id);
        return f !== undefined && blocksVerified(f);
      }),
    terminal,
    label: labelOf(
      terminal,
      steps[steps.length - 1]?.body,
      latest === undefined ? "Started · no candidate" : CANDIDATE_USER_TRUTH,
    ),
    steps: steps.map((st) => st.body),
    guardian: base.guardian,
    guardian_decisions: guardianDecisions,
    ledger: (recs.ledger[recs.ledger.length - 1]?.body as BudgetLedger | undefined) ?? null,
    phase: replay.phase,
    problems: [],
  };
}

/** The user truth with what its record names: the exhausted counter, a loop, the refusal. Pure. */
function labelOf(terminal: TerminalRecord | null, lastStep: StepRecord | undefined, truthNow: string): string {
  if (terminal === null) return truthNow;
  const truth = terminal.user_truth;
  if (terminal.terminal_reason === "budget_exhausted") return `${truth} · ${String(terminal.exhausted_limit)}`;
  if (terminal.state === "blocked_by_guardian") {
    // The safe reason category and the unexecuted action class, never the refused side effect.
    const a = lastStep?.action;
    const why = terminal.stop_reason === "loop_detected" ? "Loop detected" : (lastStep?.refusal?.code ?? "");
    return `${truth} · ${why}${a === null || a === undefined ? "" : ` · not run: ${a.tool === "run_command" && a.target !== null ? `run_command:${a.target}` : a.tool}`}`;
  }
  if (terminal.stop_reason === "loop_detected") return `${truth} · Loop detected`;
  if (terminal.stop_reason === "budget_exhausted")
    return `${truth} · budget exhausted: ${String(terminal.exhausted_limit)}`;
  if (
    terminal.terminal_reason === "policy_requires_explicit_setup" &&
    lastStep?.refusal !== null &&
    lastStep !== undefined
  ) {
    const a = lastStep.action;
    return `${truth} · ${lastStep.refusal?.code ?? ""}${a === null ? "" : ` ${a.tool}${a.target === null ? "" : ` ${a.target}`}`}`;
  }
  return truth;
}

/**
 * Read what {@link projectAutoRun} projects from a store: the run's facts (each verified by the fact
 * log), and for every snapshot and payload they name whether it re-hashes. A recorded history (a
 * committed fixture) is exactly this input. Never writes.
 *
 * @throws EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN` when the log does not verify.
 */
export async function projectionInputOf(
  store: Pick<Store, "log" | "objects">,
  runId: string,
): Promise<ProjectionInput> {
  const facts = await readRunFacts(store.log, runId);
  const snapshots: Record<string, FrozenSnapshot | null> = {};
  const payloadsVerified: Record<string, boolean> = {};
  for (const f of facts) {
    if (f.kind === AUTO_FACT_KINDS.repair) {
      // A Repair Run's checkpoint is a frozen snapshot: verified like a candidate's.
      const c = (f.record as { body?: { checkpoint?: { digest?: unknown } } }).body?.checkpoint?.digest;
      if (typeof c === "string" && !(c in snapshots)) {
        try {
          snapshots[c] = (await verifySnapshot(store, c as Digest)).ok ? await readSnapshot(store, c as Digest) : null;
        } catch {
          snapshots[c] = null;
        }
      }
      continue;
    }
    if (f.kind !== AUTO_FACT_KINDS.candidate) continue;
    const body = (f.record as { body?: { snapshot_digest?: unknown; payload_digest?: unknown } }).body;
    const s = body?.snapshot_digest;
    const p = body?.payload_digest;
    if (typeof s === "string" && !(s in snapshots)) {
      try {
        snapshots[s] = (await verifySnapshot(store, s as Digest)).ok ? await readSnapshot(store, s as Digest) : null;
      } catch {
        snapshots[s] = null;
      }
    }
    if (typeof p === "string" && !(p in payloadsVerified)) {
      try {
        await store.objects.readBlob(p as Digest);
        payloadsVerified[p] = true;
      } catch {
        payloadsVerified[p] = false;
      }
    }
  }
  return { runId, facts, snapshots, payloadsVerified };
}

/**
 * Load and project an Auto Run from a store ({@link projectionInputOf}, then {@link projectAutoRun}).
 * A log that does not verify, or a store that cannot be read, projects the safety boundary. Never
 * writes.
 */
export async function loadAutoRunProjection(
  store: Pick<Store, "log" | "objects">,
  runId: string,
): Promise<AutoRunProjection> {
  let input: ProjectionInput;
  try {
    input = await projectionInputOf(store, runId);
  } catch (error) {
    const code = (error as { code?: string }).code ?? "unknown";
    return failClosed({ runId, facts: [], snapshots: {}, payloadsVerified: {} }, null, [
      `the fact log does not verify: ${code}`,
    ]);
  }
  return projectAutoRun(input);
}
