import type { AutoRun, BudgetLedger, Candidate, TerminalRecord } from "@asp/contracts";
import { checkTerminalRecord, terminalUserTruth } from "@asp/contracts";
import { type Digest, digestBytes, verifySnapshot } from "@asp/evidence";
import { runStateKey } from "../durable.js";
import { AutoModeError } from "../errors.js";
import { isUnresolvedFinding } from "../findings.js";
import type { MachineTransition } from "../machine.js";
import type { RunContext, TerminalOutcome } from "../run/context.js";
import type { CandidateSet } from "./candidate.js";
import { type Problems, type Rec, type RunFacts, same } from "./facts.js";
import type { ReviewSet } from "./review.js";
import type { RunBase } from "./storage.js";

// The terminal module: how a run ends. The committed reason chooses the row; the phase the run
// left decides which reasons may follow. Its activity delivers and promotes (Stage 4's Verified
// compare-and-swap); its proof checks the terminal against everything committed before it.

/** The rows the terminal module adds to the run machine. */
export const TERMINAL_ROWS: ReadonlyArray<MachineTransition> = [
  {
    module: "terminal",
    stage: "stage2_auto_run_storage",
    from: "started",
    on: "auto_run_terminal",
    to: "terminal",
    entry:
      "a terminal reason outside the five states (agent_failed, user_cancelled, budget_exhausted, loop_detected, safety_boundary), proved by the committed ledger where it names a limit",
    test: "mediation.test.ts: budgets bound a run",
  },
  {
    module: "terminal",
    stage: "stage2_auto_run_storage",
    from: "refused",
    on: "auto_run_terminal",
    to: "terminal",
    entry:
      "the terminal reason the committed refusal named (policy_requires_explicit_setup, safety_boundary, loop_detected, budget_exhausted), or blocked_by_guardian on the Guardian's committed stop (its assessment or failure record; loop_detected only with the denial circuit open)",
    test: "mediation.test.ts: is refused, its audit committed, nothing executed",
  },
  {
    module: "terminal",
    stage: "stage2_auto_run_storage",
    from: "acting",
    on: "auto_run_terminal",
    to: "terminal",
    entry: "safety_boundary only: the admitted action's result could not commit",
    test: "mediation.test.ts: a refusal audit that cannot commit",
  },
  {
    module: "terminal",
    stage: "stage4_review_completion_gate",
    from: "candidate",
    on: "auto_run_terminal",
    to: "terminal",
    entry:
      "verified / completed_with_issues / review_unavailable by the gating review's records, blocked_by_guardian right after a Repair Run the Guardian's committed stop ended, or a reason outside the five states",
    test: "runner.test.ts: AM.states.3",
  },
  {
    module: "terminal",
    stage: "stage4_review_completion_gate",
    from: "reviewing",
    on: "auto_run_terminal",
    to: "terminal",
    entry: "safety_boundary only: an attempt's completion could not commit, or the Reviewer's identity drifted",
    test: "runner.test.ts: AM.states.9",
  },
];

/**
 * Build a terminal record from an outcome, with its exact user truth, checked with
 * `checkTerminalRecord`. Pure.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_RECORD` when the user truth would not check.
 */
export function buildTerminalRecord(
  base: Pick<TerminalRecord, "run" | "counters" | "event_id" | "committed_at">,
  outcome: TerminalOutcome,
): TerminalRecord {
  const fields = {
    state: null,
    terminal_reason: null,
    stop_reason: null,
    unavailable_reason: null,
    candidate_id: null,
    unresolved_finding_ids: [],
    exhausted_limit: null,
    guardian_record_id: null,
  } as Record<string, unknown>;
  if (outcome.kind === "reason") {
    Object.assign(fields, {
      terminal_reason: outcome.reason,
      candidate_id: outcome.candidateId,
      exhausted_limit: outcome.reason === "budget_exhausted" ? (outcome.limit ?? null) : null,
    });
  } else if (outcome.kind === "verified") {
    Object.assign(fields, { state: "verified", candidate_id: outcome.candidate.candidate_id });
  } else if (outcome.kind === "issues") {
    Object.assign(fields, {
      state: "completed_with_issues",
      stop_reason: outcome.stop,
      candidate_id: outcome.candidateId,
      unresolved_finding_ids: outcome.unresolved,
      exhausted_limit: outcome.stop === "budget_exhausted" ? (outcome.limit ?? null) : null,
    });
  } else if (outcome.kind === "guardian") {
    Object.assign(fields, {
      state: "blocked_by_guardian",
      stop_reason: outcome.loop ? "loop_detected" : null,
      candidate_id: outcome.candidateId,
      guardian_record_id: outcome.recordId,
    });
  } else {
    Object.assign(fields, {
      state: "review_unavailable",
      unavailable_reason: outcome.reason,
      candidate_id: outcome.candidateId,
    });
  }
  const record = { ...base, ...fields } as unknown as TerminalRecord;
  const full = { ...record, user_truth: terminalUserTruth(record) } as TerminalRecord;
  const problem = checkTerminalRecord(full);
  if (problem !== null) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_RECORD", "terminal user truth does not check", {
      data: { ...problem },
    });
  }
  return full;
}

/**
 * Activity: deliver the reviewed candidate and check it may become Verified: its snapshot
 * re-hashes, the delivered bytes are the reviewed payload, and (as late as possible) the run still
 * points at the exact reviewed candidate and generation. The terminal's own append is the
 * compare-and-swap on the run's head.
 */
export async function deliver(ctx: RunContext, candidate: Candidate): Promise<TerminalOutcome> {
  const store = ctx.options.store;
  const boundary: TerminalOutcome = { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id };
  const check = await verifySnapshot(store, candidate.snapshot_digest as Digest).catch(() => null);
  if (check === null || !check.ok) return boundary;
  let payload: Uint8Array;
  try {
    payload = await store.objects.readBlob(candidate.payload_digest as Digest);
  } catch {
    return boundary;
  }
  let delivered: Uint8Array;
  try {
    delivered = ctx.options.deliver === undefined ? payload : await ctx.options.deliver(candidate, payload);
  } catch {
    // The bytes may have reached the user before the failure: the truthful row is outcome_unknown.
    return { kind: "reason", reason: "outcome_unknown", candidateId: candidate.candidate_id };
  }
  if (digestBytes(delivered) !== candidate.payload_digest) return boundary;
  const latest = await store.log.latest(runStateKey(ctx.runId));
  const body = (latest?.record as { body?: AutoRun } | undefined)?.body;
  if (body?.candidate_id !== candidate.candidate_id || body.generation !== ctx.record.generation) return boundary;
  return { kind: "verified", candidate };
}

/**
 * Activity: commit a Verified terminal with the promoted candidate, as a compare-and-swap on the
 * run's head; when another writer moved the run on, the reviewed candidate is not Verified: the
 * safety boundary.
 */
export async function promote(ctx: RunContext, candidate: Candidate): Promise<void> {
  const promoted: Candidate = { ...candidate, review_status: "verified" };
  try {
    await ctx.terminal({ kind: "verified", candidate }, [{ kind: "candidate", record: promoted }]);
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ASP_EVIDENCE_CONDITION_FAILED") throw error;
    // The run moved on under another writer: the reviewed candidate is not Verified.
    await ctx.terminal(
      { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id },
      [],
      "unconditional",
    );
  }
}

/** The committed terminal, if any. */
export interface TerminalFact {
  readonly rec: Rec<TerminalRecord> | undefined;
  readonly terminal: TerminalRecord | null;
}

/**
 * Prove the terminal: at most one, last, with its event, counters and exact user truth; a review
 * terminal only under a gating review and only as the review records show it; Verified only with
 * its promotion; and a reason outside the five states only when the committed refusal or ledger
 * proves it, from the phase the run left.
 */
export function proveTerminal(
  facts: RunFacts,
  base: RunBase,
  cands: CandidateSet,
  reviews: ReviewSet,
  bad: Problems,
): TerminalFact {
  const { recs, events, ordered } = facts;
  const { latestRun, runs, review } = base;
  for (const { seq, ev } of ordered) {
    if (ev.type === "auto_run_terminal" && seq !== ordered[ordered.length - 1]?.seq) bad("an event after the terminal");
  }
  const terminals = recs.terminal as ReadonlyArray<Rec<TerminalRecord>>;
  if (terminals.length > 1) bad("more than one terminal record");
  const rec = terminals[0];
  const terminal = rec?.body ?? null;
  // Only a gating review (Stage 4) may enter a review terminal: a shadow judgment gates nothing,
  // and with result review off there is no review at all.
  if (
    terminal?.state !== null &&
    terminal?.state !== undefined &&
    terminal.state !== "blocked_by_guardian" &&
    review !== "gate"
  )
    bad(`a ${terminal.state} terminal while result review is ${review}`);
  if (terminal?.state === "blocked_by_guardian" && base.guardian !== "enforce")
    bad("blocked_by_guardian while no Guardian resolves this run's asks");
  if (rec === undefined || terminal === null) {
    if (latestRun.state !== null && latestRun.state !== "candidate")
      bad("the run claims a terminal state without its terminal record");
    if (latestRun.terminal_reason !== null) bad("the run claims a terminal reason without its terminal record");
    if (cands.promotions.length > 0) bad("a promoted candidate without a verified terminal");
    return { rec, terminal };
  }
  const ev = events.get(rec.event_id)?.event;
  if (ev?.type !== "auto_run_terminal" || !same(ev.terminal, terminal))
    bad("the terminal record has no matching auto_run_terminal event");
  if (terminal.event_id !== rec.event_id) bad("the terminal record names another event");
  const ledger = recs.ledger.find((l) => l.event_id === rec.event_id)?.body as BudgetLedger | undefined;
  if (ledger === undefined || !same(ledger.consumed, terminal.counters)) {
    bad("the terminal's counters are not the budget ledger committed with it");
  }
  const check = checkTerminalRecord(terminal);
  if (check !== null) bad(`terminal user truth ${check.actual} is not ${check.expected}`);
  if (latestRun.state !== terminal.state || latestRun.terminal_reason !== terminal.terminal_reason)
    bad("the run record disagrees with its terminal");
  if (runs[runs.length - 1]?.event_id !== rec.event_id) bad("a transition committed after the terminal");
  if (terminal.candidate_id !== null && !cands.candidates.has(terminal.candidate_id))
    bad("the terminal names a candidate that never committed");
  proveReviewTerminal(terminal, rec, base, cands, reviews, bad);
  proveTerminalRow(facts, terminal, bad);
  if (terminal.state === null) proveReason(facts, terminal, ledger, bad);
  return { rec, terminal };
}

/** The five-state terminals: each only as the gating review's records show it. */
function proveReviewTerminal(
  terminal: TerminalRecord,
  rec: Rec<TerminalRecord>,
  base: RunBase,
  cands: CandidateSet,
  reviews: ReviewSet,
  bad: Problems,
): void {
  const { latestRun } = base;
  const { reviewsOf, blocking, findingById } = reviews;
  if (terminal.state === "verified") {
    const passes = reviewsOf(terminal.candidate_id).filter((r) => r.verdict === "pass" && r.selection === "selected");
    if (terminal.candidate_id !== latestRun.candidate_id) bad("verified names a candidate that is not the latest");
    if (passes.length === 0) bad("verified without a durable pass bound to the candidate");
    if (blocking(terminal.candidate_id).length > 0) bad("verified with an open material finding");
    const promo = cands.promotions.find((p) => p.event_id === rec.event_id);
    if (promo === undefined || promo.body.review_status !== "verified")
      bad("verified without the compare-and-swap promotion of the reviewed candidate");
  } else if (cands.promotions.length > 0) {
    bad("a promoted candidate without a verified terminal");
  }
  if (terminal.state === "completed_with_issues") {
    const issues = reviewsOf(terminal.candidate_id).filter((r) => r.verdict === "issues");
    const open = issues
      .flatMap((r) => r.finding_ids)
      .filter((id) => {
        const f = findingById.get(id);
        return f !== undefined && isUnresolvedFinding(f);
      });
    if (terminal.candidate_id !== latestRun.candidate_id)
      bad("completed_with_issues names a candidate that is not the latest");
    if (issues.length === 0) bad("completed_with_issues without a durable issues verdict");
    if (!same([...open].sort(), [...terminal.unresolved_finding_ids].sort()))
      bad("the unresolved findings differ from the review's");
  }
  if (terminal.state === "review_unavailable") {
    const rr = reviewsOf(terminal.candidate_id);
    const last = rr[rr.length - 1];
    const lastAttempt = last?.attempts[last.attempts.length - 1];
    const ok =
      last !== undefined &&
      last.verdict === null &&
      (terminal.unavailable_reason === "reviewer_independence_unavailable"
        ? last.selection === "reviewer_independence_unavailable"
        : last.selection === "selected" &&
          lastAttempt !== undefined &&
          last.attempts.every((a) => a.outcome !== "verdict") &&
          (terminal.unavailable_reason === "evidence_incomplete") === (lastAttempt.outcome === "evidence_incomplete"));
    if (!ok) bad(`review_unavailable(${terminal.unavailable_reason}) is not what the review records show`);
    if (terminal.candidate_id !== latestRun.candidate_id)
      bad("review_unavailable names a candidate that is not the latest");
  }
}

/** The terminal's row: which phase it left decides which terminals may follow. */
function proveTerminalRow(facts: RunFacts, terminal: TerminalRecord, bad: Problems): void {
  const left = facts.replay.trace.find((m) => m.on === "auto_run_terminal")?.from;
  if (left === undefined) return;
  const refusal = facts.steps[facts.steps.length - 1]?.body;
  if (left === "started" && terminal.state !== null) bad(`a ${terminal.state} terminal without a candidate`);
  if ((left === "acting" || left === "reviewing") && terminal.terminal_reason !== "safety_boundary")
    bad(`a ${terminal.terminal_reason ?? terminal.state} terminal while ${left}`);
  if (terminal.state === "blocked_by_guardian") {
    // Only from the Guardian's committed stop: its record, and the denial circuit for a loop. A
    // stop of a Repair Agent's ask is its Repair Run's last act: the run completes (rolled back,
    // no candidate) and the terminal follows it.
    const g = refusal?.guardian ?? null;
    const loop = refusal?.refusal?.code === "guardian_denial_circuit";
    const stopSeq = facts.steps[facts.steps.length - 1]?.seq ?? Number.POSITIVE_INFINITY;
    const after = facts.replay.trace.filter((m) => m.seq > stopSeq);
    // The Repair Run the stop ended: completed `rejected`, no candidate, and the terminal names
    // the candidate it was repairing.
    const completed = facts.ordered.find((e) => e.seq === after[0]?.seq)?.ev;
    const repaired = facts.recs.repair
      .map((r) => r.body as { repair_run_id?: unknown; from_candidate_id?: unknown })
      .find((r) => r.repair_run_id === completed?.repair_run_id);
    const fromRepair =
      left === "candidate" &&
      facts.replay.trace.find((m) => m.seq === stopSeq)?.from === "repairing" &&
      after.length === 2 &&
      after[0]?.on === "repair_completed" &&
      after[1]?.on === "auto_run_terminal" &&
      completed?.outcome === "rejected" &&
      completed.to_candidate_id === null &&
      repaired !== undefined &&
      terminal.candidate_id === repaired.from_candidate_id;
    if (
      (left !== "refused" && !fromRepair) ||
      refusal?.phase !== "refused" ||
      refusal.refusal?.terminal !== null ||
      g === null
    )
      bad("blocked_by_guardian without the Guardian's committed stop");
    else if (terminal.guardian_record_id !== g.record_id) bad("blocked_by_guardian names another Guardian record");
    if ((terminal.stop_reason === "loop_detected") !== loop)
      bad("blocked_by_guardian's stop reason is not what the committed refusal shows");
    if (loop && refusal?.ledger.circuits.guardian_denial !== "open")
      bad("blocked_by_guardian(loop_detected) without an open denial circuit");
    return;
  }
  if (left === "refused") {
    const expected = refusal?.phase === "max_turns" ? "budget_exhausted" : refusal?.refusal?.terminal;
    if (terminal.terminal_reason !== expected && terminal.terminal_reason !== "safety_boundary")
      bad(`the terminal ${String(terminal.terminal_reason)} is not what the committed refusal named`);
  }
}

/** A terminal outside the five states is accepted only when the committed records prove it. */
function proveReason(facts: RunFacts, terminal: TerminalRecord, ledger: BudgetLedger | undefined, bad: Problems): void {
  const steps = facts.steps;
  const lastStep = steps[steps.length - 1]?.body;
  const reason = terminal.terminal_reason;
  if (reason === "budget_exhausted") {
    const limit = terminal.exhausted_limit as string;
    const proved =
      ledger !== undefined &&
      (limit === "engine_turns"
        ? steps.some((st) => st.body.phase === "max_turns")
        : limit === "wall_time_s"
          ? Date.parse(terminal.committed_at) - Date.parse(ledger.started_at) >= ledger.limits.wall_time_s * 1000
          : limit === "extra_token_multiplier"
            ? ledger.initial_turn_tokens !== null &&
              ledger.consumed.extra_tokens > 0 &&
              ledger.consumed.extra_tokens >=
                Math.floor(ledger.limits.extra_token_multiplier * ledger.initial_turn_tokens)
            : limit === "max_extra_cells"
              ? ledger.consumed.extra_cells >= ledger.limits.max_extra_cells
              : false);
    if (!proved) bad(`budget_exhausted(${limit}) is not what the committed ledger proves`);
  }
  if (reason === "loop_detected" && ledger?.circuits.no_progress !== "open") {
    bad("loop_detected without an open no-progress circuit in the committed ledger");
  }
  if (
    reason === "policy_requires_explicit_setup" &&
    (lastStep?.phase !== "refused" || lastStep.refusal?.terminal !== "policy_requires_explicit_setup")
  ) {
    bad("policy_requires_explicit_setup without its committed refusal audit");
  }
}
