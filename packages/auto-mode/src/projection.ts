import {
  type AutoAuditCompletedEvent,
  type AutoAuditStartedEvent,
  type AutoRun,
  type AutoRunState,
  type BudgetLedger,
  CANDIDATE_USER_TRUTH,
  type Candidate,
  checkTerminalRecord,
  type EvidenceSnapshot,
  type Finding,
  type ReviewRun,
  type ReviewVerdict,
  type RunIdentity,
  TERMINAL_USER_TRUTH,
  type TerminalReason,
  type TerminalRecord,
} from "@asp/contracts";
import {
  canonicalize,
  type Digest,
  type FactEntry,
  type FrozenSnapshot,
  readSnapshot,
  type Store,
  verifySnapshot,
} from "@asp/evidence";
import { type Assessment, auditRequestDigest, checkAuditCompletion } from "./audit.js";
import {
  AUTO_FACT_KINDS,
  AUTO_STEP_KIND,
  type AutoRecordKind,
  checkEvent,
  checkRecord,
  checkStepRecord,
  type RecordFact,
  readRunFacts,
  type StepRecord,
} from "./durable.js";
import { blocksVerified, findingStatusProblem, isUnresolvedFinding } from "./findings.js";
import { candidateIdOf, findingFingerprint, findingIdOf, runIdOf } from "./identity.js";
import { type MachineFact, type MachineInput, type RunPhase, replayRun } from "./machine.js";
import { isEligibleReviewer } from "./review.js";
import { type ResultReviewStage, type RunStages, resultReviewStage } from "./stages.js";

/** A committed fact as the projection reads it (a fact log entry's seq, kind and record). */
export type ProjectionFact = Pick<FactEntry, "seq" | "kind" | "record">;

/** What {@link projectAutoRun} projects from: the run's facts and the store's hash checks. */
export interface ProjectionInput {
  readonly runId: string;
  readonly facts: ReadonlyArray<ProjectionFact>;
  /**
   * For every snapshot digest the facts name: the frozen snapshot as the object store holds it
   * when it and every ref re-hash, or null when it does not verify.
   */
  readonly snapshots: Readonly<Record<string, Pick<FrozenSnapshot, "refs" | "labels"> | null>>;
  /** For every payload digest the facts name: whether the payload blob re-hashes. */
  readonly payloadsVerified: Readonly<Record<string, boolean>>;
}

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
const same = (a: unknown, b: unknown): boolean => {
  try {
    return canonicalize(a) === canonicalize(b);
  } catch {
    return false;
  }
};

interface Rec<T> {
  readonly seq: number;
  readonly event_id: string;
  readonly body: T;
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
    blocking_finding_ids: [],
    terminal: null,
    label: TERMINAL_USER_TRUTH.safety_boundary,
    steps: [],
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
  const events = new Map<string, { seq: number; event: Record<string, unknown> }>();
  const recs: { [K in AutoRecordKind]: Rec<unknown>[] } = {
    run: [],
    candidate: [],
    snapshot: [],
    review: [],
    finding: [],
    terminal: [],
    ledger: [],
    stages: [],
  };
  const kindOf = new Map<string, AutoRecordKind>(
    Object.entries(AUTO_FACT_KINDS)
      .filter(([k]) => k !== "event")
      .map(([k, v]) => [v, k as AutoRecordKind]),
  );
  const recordEvents = new Map<string, AutoRecordKind[]>();
  const steps: { seq: number; body: StepRecord }[] = [];
  const inputs: MachineFact[] = [];
  for (const fact of [...input.facts].sort((a, b) => a.seq - b.seq)) {
    if (fact.kind === AUTO_STEP_KIND) {
      const body = (fact.record as { body?: unknown } | null)?.body;
      const p = checkStepRecord(body);
      if (p !== null) bad(`seq ${fact.seq}: ${p}`);
      else {
        steps.push({ seq: fact.seq, body: body as StepRecord });
        inputs.push({ seq: fact.seq, input: `step:${(body as StepRecord).phase}` });
      }
      continue;
    }
    if (fact.kind === AUTO_FACT_KINDS.event) {
      const p = checkEvent(fact.record);
      if (p !== null) {
        bad(`seq ${fact.seq}: ${p}`);
        continue;
      }
      inputs.push({ seq: fact.seq, input: (fact.record as { type: MachineInput }).type });
      const ev = fact.record as Record<string, unknown> & { event_id: string };
      if (events.has(ev.event_id)) bad(`event ${ev.event_id} committed twice`);
      events.set(ev.event_id, { seq: fact.seq, event: ev });
      continue;
    }
    const kind = kindOf.get(fact.kind);
    if (kind === undefined) {
      bad(`seq ${fact.seq}: unknown fact kind ${fact.kind}`);
      continue;
    }
    const r = fact.record as Partial<RecordFact> | null;
    if (typeof r?.event_id !== "string") {
      bad(`seq ${fact.seq}: ${kind} record without its event id`);
      continue;
    }
    const p = checkRecord(kind, r.body);
    if (p !== null) {
      bad(`seq ${fact.seq}: ${p}`);
      continue;
    }
    recs[kind].push({ seq: fact.seq, event_id: r.event_id, body: r.body });
    recordEvents.set(r.event_id, [...(recordEvents.get(r.event_id) ?? []), kind]);
  }
  // The committed inputs replayed through the run machine: the same table the runner wrote by.
  const replay = replayRun(inputs);
  for (const v of replay.violations) bad(`run machine: ${v}`);
  // Every record's transition event committed (a record without its audit row is unreconcilable).
  for (const [eventId, kinds] of recordEvents) {
    if (!events.has(eventId)) bad(`records ${kinds.join(",")} have no committed event ${eventId}`);
  }

  // Causal order: started first; a candidate is ready before it is audited; each attempt starts
  // before it completes, and completes before the next starts; the terminal is last.
  const ordered = [...events.values()].sort((a, b) => a.seq - b.seq).map((e) => ({ seq: e.seq, ev: e.event }));
  const seqOf = (pred: (e: Record<string, unknown>) => boolean): number | undefined =>
    ordered.find((o) => pred(o.ev))?.seq;
  if (ordered[0] !== undefined && ordered[0].ev.type !== "auto_run_started")
    bad("the first event is not auto_run_started");
  for (const { seq, ev } of ordered) {
    if (ev.type === "auto_audit_started" || ev.type === "auto_audit_completed") {
      const ready = seqOf((e) => e.type === "candidate_ready" && e.candidate_id === ev.subject_id);
      if (ready === undefined || ready > seq) bad(`audit ${String(ev.audit_id)} before its candidate was ready`);
      const attempt = ev.attempt as number;
      const prior =
        ev.type === "auto_audit_completed"
          ? seqOf((e) => e.type === "auto_audit_started" && e.audit_id === ev.audit_id && e.attempt === attempt)
          : attempt > 1
            ? seqOf((e) => e.type === "auto_audit_completed" && e.audit_id === ev.audit_id && e.attempt === attempt - 1)
            : -1;
      if (prior === undefined || prior > seq) bad(`audit ${String(ev.audit_id)} attempt ${attempt} out of order`);
    }
    if (ev.type === "auto_run_terminal" && seq !== ordered[ordered.length - 1]?.seq) bad("an event after the terminal");
  }
  const runs = recs.run as Rec<AutoRun>[];
  const first = runs[0]?.body ?? null;
  const run = first?.run ?? null;
  if (first === null || run === null) return failClosed(input, null, [...problems, "no auto_run record"]);
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
  const stageRecs = recs.stages as Rec<RunStages>[];
  const stages = stageRecs[0]?.body;
  let review: ResultReviewStage = "off";
  if (stageRecs.length !== 1 || stages === undefined) bad("the run's stages are not committed exactly once");
  else {
    if (stageRecs[0]?.event_id !== runs[0]?.event_id) bad("the stages did not commit with auto_run_started");
    if (!same(stages.run, run)) bad("the stages record is another run's");
    if (!stages.flags.stage2_auto_run_storage) bad("an Auto Run committed without stage2_auto_run_storage");
    review = resultReviewStage(first.selection, stages.flags);
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

  // Candidates: immutable, each with its snapshot, verified payload and candidate_ready.
  const candidates = new Map<string, Rec<Candidate>>();
  const promotions: Rec<Candidate>[] = [];
  const snapshots = new Map<string, EvidenceSnapshot>();
  for (const s of recs.snapshot as Rec<EvidenceSnapshot>[]) snapshots.set(s.body.candidate_id, s.body);
  for (const c of recs.candidate as Rec<Candidate>[]) {
    const prior = candidates.get(c.body.candidate_id);
    if (prior !== undefined) {
      promotions.push(c);
      if (!same({ ...c.body, review_status: "candidate" }, prior.body)) bad(`candidate ${c.body.candidate_id} mutated`);
      continue;
    }
    candidates.set(c.body.candidate_id, c);
    const ready = events.get(c.event_id)?.event;
    const snap = snapshots.get(c.body.candidate_id);
    if (ready?.type !== "candidate_ready" || ready.candidate_id !== c.body.candidate_id) {
      bad(`candidate ${c.body.candidate_id} did not commit with its candidate_ready`);
    } else if (ready.snapshot_digest !== c.body.snapshot_digest) bad("candidate_ready names another snapshot");
    if (c.body.review_status !== "candidate")
      bad(`candidate ${c.body.candidate_id} committed as ${c.body.review_status}`);
    if (snap === undefined || snap.digest !== c.body.snapshot_digest) {
      bad(`candidate ${c.body.candidate_id} has no matching Evidence Snapshot`);
    } else if (
      !recs.snapshot.some((s) => s.event_id === c.event_id && (s.body as EvidenceSnapshot).digest === snap.digest)
    ) {
      bad(`snapshot of ${c.body.candidate_id} not committed in the candidate transition`);
    }
    const frozen = input.snapshots[c.body.snapshot_digest];
    if (frozen === undefined || frozen === null) bad(`snapshot ${c.body.snapshot_digest} does not verify`);
    else if (snap !== undefined && (!same(snap.refs, frozen.refs) || !same(snap.labels, frozen.labels))) {
      bad(`the snapshot record of ${c.body.candidate_id} differs from the frozen snapshot`);
    }
    if (input.payloadsVerified[c.body.payload_digest] !== true) bad(`payload ${c.body.payload_digest} does not verify`);
    if (!same(c.body.producer, { ...c.body.producer, fingerprint: first.independence.producer_fingerprint })) {
      bad(`candidate ${c.body.candidate_id} producer fingerprint drifted from the frozen one`);
    }
  }
  for (const c of candidates.values()) {
    const gen = runs.find((r) => r.event_id === c.event_id)?.body.generation;
    if (
      gen === undefined ||
      candidateIdOf(run, gen, c.body.payload_digest, c.body.snapshot_digest) !== c.body.candidate_id
    ) {
      bad(`candidate ${c.body.candidate_id} id does not re-derive`);
    }
  }
  const latest = latestRun.candidate_id === null ? undefined : candidates.get(latestRun.candidate_id);
  if (latestRun.candidate_id !== null && latest === undefined)
    bad("the run points at a candidate that never committed");

  // Review runs: latest version of each, with its audit events and findings as one fact.
  const reviewById = new Map<string, Rec<ReviewRun>>();
  for (const r of recs.review as Rec<ReviewRun>[]) {
    const prior = reviewById.get(r.body.review_run_id);
    if (prior !== undefined) {
      const keep = [
        "candidate_id",
        "candidate_payload_digest",
        "snapshot_digest",
        "selection",
        "reviewer",
        "audit_id",
        "audit_request_digest",
      ] as const;
      if (keep.some((k) => !same(prior.body[k], r.body[k]))) bad(`review run ${r.body.review_run_id} identity drifted`);
      if (!same(prior.body.attempts, r.body.attempts.slice(0, prior.body.attempts.length)))
        bad("review attempts rewritten");
    }
    reviewById.set(r.body.review_run_id, r);
  }
  if (review === "off" && reviewById.size > 0) bad("a review run while result review is off");
  const findingById = new Map<string, Finding>();
  for (const f of recs.finding as Rec<Finding>[]) {
    if (findingById.has(f.body.finding_id)) bad(`finding ${f.body.finding_id} committed twice`);
    const status = findingStatusProblem(f.body);
    if (status !== null) bad(status);
    findingById.set(f.body.finding_id, f.body);
  }
  for (const { body: rr } of reviewById.values()) {
    const cand = candidates.get(rr.candidate_id)?.body;
    if (cand === undefined) {
      bad(`review run ${rr.review_run_id} of an unknown candidate`);
      continue;
    }
    if (cand.payload_digest !== rr.candidate_payload_digest || cand.snapshot_digest !== rr.snapshot_digest) {
      bad(`review run ${rr.review_run_id} is bound to other candidate or snapshot hashes`);
    }
    const request = {
      audit_id: rr.audit_id,
      subject_kind: "result_review" as const,
      subject_entity_kind: "candidate_evidence_snapshot" as const,
      subject_id: rr.candidate_id,
      run,
      review_run_id: rr.review_run_id,
      candidate_payload_digest: rr.candidate_payload_digest,
      snapshot_digest: rr.snapshot_digest,
      reviewer:
        rr.reviewer === null
          ? null
          : {
              actor_id: rr.reviewer.actor_id,
              session_id: rr.reviewer.session_id,
              fingerprint: rr.reviewer.fingerprint,
            },
    };
    if (auditRequestDigest(request) !== rr.audit_request_digest)
      bad(`review run ${rr.review_run_id} request digest does not re-hash`);
    if (rr.reviewer !== null) {
      const independence = {
        policy: first.independence.policy,
        producer: { ...cand.producer, fingerprint: first.independence.producer_fingerprint },
        // Runs recorded before exclusions were frozen carry none.
        excluded: first.independence.excluded_actors ?? [],
      };
      if (!isEligibleReviewer(rr.reviewer, independence))
        bad(`review run ${rr.review_run_id} is a self-review or breaks the frozen independence policy`);
    }
    // Each attempt: started and completed events bound to the same request; assessments re-hash.
    let lastAssessment: Assessment | null = null;
    for (const a of rr.attempts) {
      const evs = [...events.values()].map((e) => e.event);
      const st = evs.find(
        (e) => e.type === "auto_audit_started" && e.audit_id === rr.audit_id && e.attempt === a.attempt,
      ) as AutoAuditStartedEvent | undefined;
      const done = evs.find(
        (e) => e.type === "auto_audit_completed" && e.audit_id === rr.audit_id && e.attempt === a.attempt,
      ) as AutoAuditCompletedEvent | undefined;
      if (st === undefined || done === undefined) {
        bad(`review run ${rr.review_run_id} attempt ${a.attempt} lacks its audit events`);
        continue;
      }
      if (
        st.audit_request_digest !== rr.audit_request_digest ||
        done.audit_request_digest !== rr.audit_request_digest ||
        st.subject_id !== rr.candidate_id ||
        done.subject_id !== rr.candidate_id
      ) {
        bad(`review run ${rr.review_run_id} attempt ${a.attempt} audit events name another request`);
        continue;
      }
      try {
        lastAssessment = checkAuditCompletion(done);
      } catch {
        bad(`review run ${rr.review_run_id} attempt ${a.attempt} assessment does not re-hash`);
        continue;
      }
      if (lastAssessment.outcome !== a.outcome) bad(`attempt ${a.attempt} outcome differs from its assessment`);
      if (lastAssessment.bookkeeping?.gating !== (review === "gate"))
        bad(
          `attempt ${a.attempt} is marked ${lastAssessment.bookkeeping?.gating ? "gating" : "shadow"} under ${review}`,
        );
      if (a.outcome === "evidence_incomplete" && (a.missing_coverage ?? []).length === 0)
        bad("evidence_incomplete without the missing coverage");
    }
    if (rr.verdict !== null) {
      const last = rr.attempts[rr.attempts.length - 1];
      if (last?.outcome !== "verdict" || lastAssessment === null || lastAssessment.verdict !== rr.verdict) {
        bad(`review run ${rr.review_run_id} verdict is not its last assessment's`);
      } else {
        const named = lastAssessment.findings.map((f) => f.finding_id).sort();
        if (!same(named, [...rr.finding_ids].sort()))
          bad(`review run ${rr.review_run_id} findings differ from its assessment`);
        if (rr.assessment_digest === null || done(rr, events) !== rr.assessment_digest)
          bad(`review run ${rr.review_run_id} assessment digest mismatch`);
      }
    } else if (rr.finding_ids.length > 0) bad(`review run ${rr.review_run_id} has findings without a verdict`);
    const names = new Set((snapshots.get(rr.candidate_id)?.refs ?? []).map((r) => r.name));
    for (const id of rr.finding_ids) {
      const f = findingById.get(id);
      if (f === undefined || f.review_run_id !== rr.review_run_id) {
        bad(`review run ${rr.review_run_id} names finding ${id} that is not its own`);
        continue;
      }
      if (findingFingerprint(f) !== f.fingerprint || findingIdOf(rr.review_run_id, f.fingerprint) !== f.finding_id) {
        bad(`finding ${id} fingerprint or id does not re-derive`);
      }
      if (!f.evidence_refs.every((r) => names.has(r))) bad(`finding ${id} cites a ref the snapshot does not hold`);
    }
    if (
      rr.verdict === "pass" &&
      rr.finding_ids.some((id) => {
        const f = findingById.get(id);
        return f !== undefined && blocksVerified(f);
      })
    ) {
      bad(`review run ${rr.review_run_id}: a pass coexists with an open material finding`);
    }
  }
  for (const f of findingById.values()) {
    if (!reviewById.get(f.review_run_id)?.body.finding_ids.includes(f.finding_id))
      bad(`finding ${f.finding_id} belongs to no review`);
  }

  // Terminal: at most one, with its event and its entry conditions.
  const terminals = recs.terminal as Rec<TerminalRecord>[];
  if (terminals.length > 1) bad("more than one terminal record");
  const terminalRec = terminals[0];
  const terminal = terminalRec?.body ?? null;
  // Only a gating review (Stage 4) may enter a review terminal: a shadow judgment gates nothing,
  // and with result review off there is no review at all.
  if (terminal?.state !== null && terminal?.state !== undefined && review !== "gate")
    bad(`a ${terminal.state} terminal while result review is ${review}`);
  if (terminalRec !== undefined && terminal !== null) {
    const ev = events.get(terminalRec.event_id)?.event;
    if (ev?.type !== "auto_run_terminal" || !same(ev.terminal, terminal))
      bad("the terminal record has no matching auto_run_terminal event");
    if (terminal.event_id !== terminalRec.event_id) bad("the terminal record names another event");
    const ledger = recs.ledger.find((l) => l.event_id === terminalRec.event_id)?.body as
      | { consumed?: unknown }
      | undefined;
    if (ledger === undefined || !same(ledger.consumed, terminal.counters)) {
      bad("the terminal's counters are not the budget ledger committed with it");
    }
    const check = checkTerminalRecord(terminal);
    if (check !== null) bad(`terminal user truth ${check.actual} is not ${check.expected}`);
    if (latestRun.state !== terminal.state || latestRun.terminal_reason !== terminal.terminal_reason)
      bad("the run record disagrees with its terminal");
    if (runs[runs.length - 1]?.event_id !== terminalRec.event_id) bad("a transition committed after the terminal");
    const cand = terminal.candidate_id === null ? undefined : candidates.get(terminal.candidate_id);
    if (terminal.candidate_id !== null && cand === undefined)
      bad("the terminal names a candidate that never committed");
    const reviewsOf = (id: string) => [...reviewById.values()].map((r) => r.body).filter((r) => r.candidate_id === id);
    const blocking = (id: string) =>
      reviewsOf(id)
        .flatMap((r) => r.finding_ids)
        .map((f) => findingById.get(f))
        .filter((f): f is Finding => f !== undefined && blocksVerified(f));
    if (terminal.state === "verified") {
      const passes = reviewsOf(terminal.candidate_id).filter((r) => r.verdict === "pass" && r.selection === "selected");
      if (terminal.candidate_id !== latestRun.candidate_id) bad("verified names a candidate that is not the latest");
      if (passes.length === 0) bad("verified without a durable pass bound to the candidate");
      if (blocking(terminal.candidate_id).length > 0) bad("verified with an open material finding");
      const promo = promotions.find((p) => p.event_id === terminalRec.event_id);
      if (promo === undefined || promo.body.review_status !== "verified")
        bad("verified without the compare-and-swap promotion of the reviewed candidate");
    } else if (promotions.length > 0) {
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
            (terminal.unavailable_reason === "evidence_incomplete") ===
              (lastAttempt.outcome === "evidence_incomplete"));
      if (!ok) bad(`review_unavailable(${terminal.unavailable_reason}) is not what the review records show`);
      if (terminal.candidate_id !== latestRun.candidate_id)
        bad("review_unavailable names a candidate that is not the latest");
    }
  } else {
    if (latestRun.state !== null && latestRun.state !== "candidate")
      bad("the run claims a terminal state without its terminal record");
    if (latestRun.terminal_reason !== null) bad("the run claims a terminal reason without its terminal record");
    if (promotions.length > 0) bad("a promoted candidate without a verified terminal");
  }
  // A pass coexisting with a blocking material finding for the same candidate is contradictory.
  for (const c of candidates.keys()) {
    const rr = [...reviewById.values()].map((r) => r.body).filter((r) => r.candidate_id === c);
    const hasPass = rr.some((r) => r.verdict === "pass");
    const open = rr
      .flatMap((r) => r.finding_ids)
      .map((f) => findingById.get(f))
      .some((f) => f !== undefined && blocksVerified(f));
    if (hasPass && open) bad(`candidate ${c}: a durable pass coexists with an open material finding`);
  }

  // Mediated steps: this run's, numbered in commit order, each ledger under the run's frozen
  // limits, none after the terminal; an action ran only after its allowed admission committed.
  const terminalSeq = terminalRec?.seq;
  const admitted = new Map<number, StepRecord["action"]>();
  const ordinals = new Set<number>();
  let lastAdmitted: number | null = null;
  steps.forEach((st, i) => {
    const b = st.body;
    if (!same(b.run, run)) bad(`step ${b.ordinal} of another run`);
    if (b.ordinal !== i + 1) bad(`step ${b.ordinal} out of order`);
    if (!same(b.ledger.limits, first.budgets)) bad(`step ${b.ordinal}: ledger under other limits`);
    if (terminalSeq !== undefined && st.seq > terminalSeq) bad(`step ${b.ordinal} committed after the terminal`);
    const a = b.action;
    if (b.phase === "admitted" && a !== null) {
      if (a.classification?.outcome !== "allow") bad(`step ${b.ordinal}: admitted an action policy did not allow`);
      admitted.set(a.action_ordinal, a);
    }
    if (b.phase === "executed" && a !== null) {
      if (!same(admitted.get(a.action_ordinal), a)) bad(`step ${b.ordinal}: a result for an action never admitted`);
      admitted.delete(a.action_ordinal);
    }
    if (b.phase === "refused" && a !== null && admitted.has(a.action_ordinal)) {
      if (!same(admitted.get(a.action_ordinal), a))
        bad(`step ${b.ordinal}: refuses another action than the admitted one`);
      admitted.delete(a.action_ordinal);
    }
    if (a !== null && b.phase !== "executed" && !(b.phase === "refused" && a.action_ordinal === lastAdmitted)) {
      if (ordinals.has(a.action_ordinal)) bad(`step ${b.ordinal}: action ordinal ${a.action_ordinal} reused`);
      ordinals.add(a.action_ordinal);
    }
    if (b.phase === "admitted" && a !== null) lastAdmitted = a.action_ordinal;
  });
  // The ledger only moves forward: one start, circuits that never close, spent amounts that never
  // shrink, in commit order across transitions and steps.
  const ledgers = [
    ...recs.ledger.map((l) => ({ seq: l.seq, body: l.body as BudgetLedger })),
    ...steps.map((st) => ({ seq: st.seq, body: st.body.ledger })),
  ].sort((x, y) => x.seq - y.seq);
  const startedEvent = [...events.values()].find((e) => e.event.type === "auto_run_started")?.event;
  const origin = ledgers[0]?.body.started_at;
  if (
    origin !== undefined &&
    (Date.parse(origin) < Date.parse(first.created_at) - 1_000 ||
      (startedEvent !== undefined && Date.parse(origin) > Date.parse(String(startedEvent.committed_at))))
  ) {
    bad("the ledger's start is not the run's");
  }
  for (let i = 1; i < ledgers.length; i++) {
    const prev = (ledgers[i - 1] as { body: BudgetLedger }).body;
    const cur = (ledgers[i] as { body: BudgetLedger }).body;
    const shrank = (["extra_tokens", "extra_cells", "repair_rounds"] as const).some(
      (c) => cur.consumed[c] < prev.consumed[c],
    );
    if (
      cur.started_at !== prev.started_at ||
      (prev.circuits.no_progress === "open" && cur.circuits.no_progress !== "open") ||
      (prev.circuits.guardian_denial === "open" && cur.circuits.guardian_denial !== "open") ||
      (cur.initial_turn_tokens ?? 0) < (prev.initial_turn_tokens ?? 0) ||
      shrank
    ) {
      bad(`seq ${(ledgers[i] as { seq: number }).seq}: the budget ledger moved backwards`);
    }
  }
  // The terminal's row: which phase it left decides which terminals may follow.
  const left = replay.trace.find((m) => m.on === "auto_run_terminal")?.from;
  if (terminal !== null && left !== undefined) {
    const refusal = steps[steps.length - 1]?.body;
    if (left === "started" && terminal.state !== null) bad(`a ${terminal.state} terminal without a candidate`);
    if ((left === "acting" || left === "reviewing") && terminal.terminal_reason !== "safety_boundary")
      bad(`a ${terminal.terminal_reason ?? terminal.state} terminal while ${left}`);
    if (left === "refused") {
      const expected = refusal?.phase === "max_turns" ? "budget_exhausted" : refusal?.refusal?.terminal;
      if (terminal.terminal_reason !== expected && terminal.terminal_reason !== "safety_boundary")
        bad(`the terminal ${String(terminal.terminal_reason)} is not what the committed refusal named`);
    }
  }
  // A terminal outside the five states is accepted only when the committed records prove it.
  if (terminal !== null && terminalRec !== undefined && terminal.state === null) {
    const ledger = recs.ledger.find((l) => l.event_id === terminalRec.event_id)?.body as BudgetLedger | undefined;
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

function done(rr: ReviewRun, events: ReadonlyMap<string, { event: Record<string, unknown> }>): string | undefined {
  const last = rr.attempts[rr.attempts.length - 1];
  for (const { event } of events.values()) {
    if (event.type === "auto_audit_completed" && event.audit_id === rr.audit_id && event.attempt === last?.attempt) {
      return event.assessment_digest as string;
    }
  }
  return undefined;
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
