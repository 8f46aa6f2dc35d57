import type {
  AttemptOutcome,
  AutoAuditCompletedEvent,
  AutoAuditStartedEvent,
  Finding,
  ReviewRun,
  UnavailableReason,
} from "@asp/contracts";
import { isMaterialSeverity } from "@asp/contracts";
import type { Digest } from "@asp/evidence";
import {
  type Assessment,
  type AuditRequest,
  auditCompletedEvent,
  auditRequestDigest,
  auditStartedEvent,
  checkAuditCompletion,
} from "../audit.js";
import type { AutoEvent } from "../durable.js";
import { blocksVerified, findingStatusProblem } from "../findings.js";
import { findingFingerprint, findingIdOf, reviewRunIdOf } from "../identity.js";
import type { MachineTransition } from "../machine.js";
import {
  type AttemptResult,
  boundaryMark,
  boundarySince,
  isEligibleReviewer,
  runAttempt,
  selectReviewer,
} from "../review.js";
import { ABORTED, type RunContext, type TerminalOutcome } from "../run/context.js";
import type { CandidateSet, Produced } from "./candidate.js";
import { type CommittedEvent, type Problems, type Rec, type RunFacts, same } from "./facts.js";
import type { RunBase } from "./storage.js";

// Stages 3 and 4's module: Reviewer attempts on the committed candidate. Its activity selects an
// eligible Reviewer under the frozen independence policy and runs at most two admitted attempts;
// its proof checks each review run, attempt, assessment and finding as one fact.

/** The rows the review module adds to the run machine. */
export const REVIEW_ROWS: ReadonlyArray<MachineTransition> = [
  {
    module: "review",
    stage: "stage3_scientific_review_shadow",
    from: "candidate",
    on: "auto_audit_started",
    to: "reviewing",
    entry:
      "an eligible Reviewer under the frozen independence policy; the attempt admitted by the ledger (at most two)",
    test: "runner.test.ts: AM.states.8",
  },
  {
    module: "review",
    stage: "stage3_scientific_review_shadow",
    from: "reviewing",
    on: "auto_audit_completed",
    to: "candidate",
    entry: "the attempt's assessment re-hashes and names the same audit request",
    test: "runner.test.ts: AM.states.8",
  },
];

/**
 * Activity: review the candidate under the frozen independence policy and the attempt budget.
 * Returns the outcome the verdict gives, or null when the review already committed the terminal
 * (gate) or recorded nothing (a shadow review without an eligible Reviewer). Under `shadow` the
 * caller commits only an integrity outcome (`safety_boundary`); the verdict gates nothing.
 */
export async function reviewCandidate(ctx: RunContext, produced: Produced): Promise<TerminalOutcome | null> {
  const { candidate, snapshot, payload } = produced;
  const reviewRunId = reviewRunIdOf(ctx.run, candidate.candidate_id, 1);
  const auditId = `audit:${reviewRunId.slice(7)}`;
  const independence = ctx.record.independence;
  const selected = selectReviewer(ctx.options.reviewers, {
    policy: independence.policy,
    producer: ctx.producer,
    excluded: independence.excluded_actors ?? [],
  });
  const frozen = selected === null ? null : { ...selected.identity };
  const request: AuditRequest = {
    audit_id: auditId,
    subject_kind: "result_review",
    subject_entity_kind: "candidate_evidence_snapshot",
    subject_id: candidate.candidate_id,
    run: ctx.run,
    review_run_id: reviewRunId,
    candidate_payload_digest: candidate.payload_digest,
    snapshot_digest: candidate.snapshot_digest,
    reviewer:
      frozen === null
        ? null
        : { actor_id: frozen.actor_id, session_id: frozen.session_id, fingerprint: frozen.fingerprint },
  };
  let rr: ReviewRun = {
    review_run_id: reviewRunId,
    run: ctx.run,
    candidate_id: candidate.candidate_id,
    candidate_payload_digest: candidate.payload_digest,
    snapshot_digest: candidate.snapshot_digest,
    selection: selected === null ? "reviewer_independence_unavailable" : "selected",
    selected_at: ctx.now(),
    reviewer:
      frozen === null
        ? null
        : {
            actor_id: frozen.actor_id,
            session_id: frozen.session_id,
            fingerprint: frozen.fingerprint,
            ...(frozen.model === undefined ? {} : { model: frozen.model }),
            ...(selected?.launch === undefined ? {} : { launch: { ...selected.launch } }),
          },
    attempts: [],
    verdict: null,
    finding_ids: [],
    audit_id: auditId,
    audit_request_digest: auditRequestDigest(request),
    assessment_digest: null,
  };
  const unavailable = (reason: UnavailableReason): TerminalOutcome => ({
    kind: "unavailable",
    candidateId: candidate.candidate_id,
    reason,
  });
  const boundary: TerminalOutcome = { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id };
  const gating = ctx.stages.result_review === "gate";
  if (selected === null || frozen === null) {
    // Shadow: no Reviewer could be provisioned, so there is no judgment to record, and no
    // event of the seven names a selection that admitted no inference without ending the run.
    if (!gating) return null;
    // Pre-inference: no Reviewer satisfies the frozen policy; no call is made.
    // The selection record and the terminal commit together; nothing is left to decide.
    await ctx.terminal(unavailable("reviewer_independence_unavailable"), [{ kind: "review", record: rr }]);
    return null;
  }
  const maxAttempts = Math.min(2, ctx.record.budgets.max_review_rounds);
  let findings: Finding[] = [];
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    // Wall time and the token budget bound the review too (outside the review terminals).
    const gate = ctx.admitNext(candidate.candidate_id);
    if (gate !== null) return gate;
    const admitted = ctx.meter.admitReviewAttempt(candidate.candidate_id);
    if (!admitted.admitted) break;
    if (!same(selected.identity, frozen)) return boundary;
    const startedAt = ctx.now();
    const mark = boundaryMark(selected.boundary);
    await ctx.commit(auditStartedEvent(ctx.nextEventId(), startedAt, request, attempt) as unknown as AutoEvent, [
      { kind: "review", record: rr },
    ]);
    // The run's deadline bounds the attempt too: an aborted attempt is recorded as timed out,
    // and the run then ends on the spent budget.
    const raced = await ctx.orAbort(
      runAttempt(
        selected,
        snapshot,
        { candidate_id: candidate.candidate_id, payload: new TextDecoder().decode(payload), snapshot },
        ctx.options.attemptTimeoutMs ?? 60_000,
      ),
    );
    const aborted = raced === ABORTED;
    const result: AttemptResult = raced === ABORTED ? { outcome: "timeout", missing_coverage: [] } : raced;
    // A reply under a drifted identity binding is an integrity failure, never a verdict.
    if (!same(selected.identity, frozen)) return boundary;
    // Review is one of the later turns the extra-token budget bounds (ADR 0009): what the answer
    // cost is spent now, committed with the attempt's completion, and checked before a retry (a
    // spent budget then ends the run budget_exhausted; after the last attempt the review terminal
    // the attempts give stands).
    ctx.meter.recordTurnTokens(result.tokens ?? 0, "extra");
    const completedAt = ctx.now();
    findings = result.outcome === "verdict" ? findingsOf(reviewRunId, result) : [];
    const outcome: AttemptOutcome = result.outcome;
    const missing = result.outcome === "verdict" ? [] : [...result.missing_coverage];
    const final = result.outcome === "verdict" || attempt === maxAttempts;
    const assessment: Assessment = {
      audit_request_digest: rr.audit_request_digest as Digest,
      subject_kind: "result_review",
      subject_entity_kind: "candidate_evidence_snapshot",
      subject_id: candidate.candidate_id,
      attempt,
      verdict: result.outcome === "verdict" ? result.verdict.verdict : null,
      decision: null,
      findings: findings.map((f) => ({
        finding_id: f.finding_id,
        fingerprint: f.fingerprint as Digest,
        severity: f.severity,
        category: f.category,
        claim: f.claim,
        evidence_refs: f.evidence_refs,
      })),
      risk: null,
      authorization: null,
      outcome,
      rationale: result.outcome === "verdict" ? result.verdict.rationale : null,
      failure: result.outcome === "verdict" ? null : { outcome, missing_coverage: missing },
      bookkeeping: { durable: true, retry: attempt > 1, final, gating },
    };
    const completed = auditCompletedEvent(ctx.nextEventId(), completedAt, request, assessment);
    const fenced = boundarySince(selected.boundary, mark);
    rr = {
      ...rr,
      attempts: [
        ...rr.attempts,
        {
          attempt,
          outcome,
          started_at: startedAt,
          completed_at: completedAt,
          ...(outcome === "evidence_incomplete" ? { missing_coverage: missing } : {}),
          ...(fenced === undefined ? {} : { boundary: fenced }),
        },
      ],
      verdict: assessment.verdict,
      finding_ids: findings.map((f) => f.finding_id),
      assessment_digest: assessment.verdict === null ? null : completed.assessment_digest,
    };
    await ctx.commit(completed as unknown as AutoEvent, [
      { kind: "review", record: rr },
      ...findings.map((f) => ({ kind: "finding" as const, record: f })),
    ]);
    if (result.outcome === "verdict") break;
    if (aborted) {
      const gate = ctx.admitNext(candidate.candidate_id);
      if (gate !== null) return gate;
    }
  }
  const last = rr.attempts[rr.attempts.length - 1];
  if (rr.verdict === null || last === undefined) {
    return unavailable(last?.outcome === "evidence_incomplete" ? "evidence_incomplete" : "no_admissible_verdict");
  }
  if (rr.verdict === "issues") {
    return {
      kind: "issues",
      candidateId: candidate.candidate_id,
      stop: "review_only",
      unresolved: findings.map((f) => f.finding_id),
      findings,
    };
  }
  // A pass beside an open material finding is contradictory: the safety boundary.
  if (findings.some(blocksVerified)) return boundary;
  return { kind: "verified", candidate };
}

/** The findings of a verdict, content-addressed; two with the same content in one run are one. */
function findingsOf(reviewRunId: string, result: Extract<AttemptResult, { outcome: "verdict" }>): Finding[] {
  const findings = result.verdict.findings.map((f) => {
    const fingerprint = findingFingerprint(f);
    return {
      finding_id: findingIdOf(reviewRunId, fingerprint),
      review_run_id: reviewRunId,
      fingerprint,
      severity: f.severity,
      material: isMaterialSeverity(f.severity),
      category: f.category,
      claim: f.claim,
      evidence_refs: [...f.evidence_refs],
      status: "open",
    } satisfies Finding;
  });
  return [...new Map(findings.map((f) => [f.finding_id, f])).values()];
}

/** What the review proof establishes: each review run's latest version and every finding. */
export interface ReviewSet {
  readonly reviewById: ReadonlyMap<string, Rec<ReviewRun>>;
  readonly findingById: ReadonlyMap<string, Finding>;
  /** The review runs of one candidate. */
  reviewsOf(candidateId: string): ReviewRun[];
  /** The findings of one candidate's reviews that block Verified. */
  blocking(candidateId: string): Finding[];
}

/**
 * Prove the review facts: audit events in causal order; each review run bound to its candidate,
 * request digest, an eligible Reviewer and its attempts' re-hashing assessments; findings that
 * re-derive and cite only the snapshot's refs; no pass beside an open material finding.
 */
export function proveReviews(facts: RunFacts, base: RunBase, cands: CandidateSet, bad: Problems): ReviewSet {
  const { recs, events, ordered } = facts;
  const { first, run, review } = base;
  const seqOf = (pred: (e: Record<string, unknown>) => boolean): number | undefined =>
    ordered.find((o) => pred(o.ev))?.seq;
  // A candidate is ready before it is audited; each attempt starts before it completes, and
  // completes before the next starts.
  for (const { seq, ev } of ordered) {
    if (ev.type !== "auto_audit_started" && ev.type !== "auto_audit_completed") continue;
    // Permission reviews (the Guardian's) are proved with the step that records their ask.
    if (ev.subject_kind === "permission_review") continue;
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
  // Review runs: latest version of each, with its audit events and findings as one fact.
  const reviewById = new Map<string, Rec<ReviewRun>>();
  for (const r of recs.review as ReadonlyArray<Rec<ReviewRun>>) {
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
  for (const f of recs.finding as ReadonlyArray<Rec<Finding>>) {
    if (findingById.has(f.body.finding_id)) bad(`finding ${f.body.finding_id} committed twice`);
    const status = findingStatusProblem(f.body);
    if (status !== null) bad(status);
    findingById.set(f.body.finding_id, f.body);
  }
  for (const { body: rr } of reviewById.values()) {
    const cand = cands.candidates.get(rr.candidate_id)?.body;
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
      // The run's producer (the first candidate's) under the frozen fingerprint; a repaired
      // candidate's own producer, its Repair actor, is excluded too.
      const runProducer =
        [...cands.candidates.values()].find((c) => c.body.parent_candidate_id === null)?.body.producer ?? cand.producer;
      const independence = {
        policy: first.independence.policy,
        producer: { ...runProducer, fingerprint: first.independence.producer_fingerprint },
        // Runs recorded before exclusions were frozen carry none.
        excluded: [
          ...(first.independence.excluded_actors ?? []),
          ...(cand.parent_candidate_id === null ? [] : [cand.producer]),
        ],
      };
      if (!isEligibleReviewer(rr.reviewer, independence))
        bad(`review run ${rr.review_run_id} is a self-review or breaks the frozen independence policy`);
    }
    const lastAssessment = proveAttempts(rr, events, review, bad);
    if (rr.verdict !== null) {
      const last = rr.attempts[rr.attempts.length - 1];
      if (last?.outcome !== "verdict" || lastAssessment === null || lastAssessment.verdict !== rr.verdict) {
        bad(`review run ${rr.review_run_id} verdict is not its last assessment's`);
      } else {
        const named = lastAssessment.findings.map((f) => f.finding_id).sort();
        if (!same(named, [...rr.finding_ids].sort()))
          bad(`review run ${rr.review_run_id} findings differ from its assessment`);
        if (rr.assessment_digest === null || lastDigest(rr, events) !== rr.assessment_digest)
          bad(`review run ${rr.review_run_id} assessment digest mismatch`);
      }
    } else if (rr.finding_ids.length > 0) bad(`review run ${rr.review_run_id} has findings without a verdict`);
    const names = new Set((cands.snapshots.get(rr.candidate_id)?.refs ?? []).map((r) => r.name));
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
  const reviewsOf = (id: string): ReviewRun[] =>
    [...reviewById.values()].map((r) => r.body).filter((r) => r.candidate_id === id);
  const blocking = (id: string): Finding[] =>
    reviewsOf(id)
      .flatMap((r) => r.finding_ids)
      .map((f) => findingById.get(f))
      .filter((f): f is Finding => f !== undefined && blocksVerified(f));
  // A pass coexisting with a blocking material finding for the same candidate is contradictory.
  for (const c of cands.candidates.keys()) {
    if (reviewsOf(c).some((r) => r.verdict === "pass") && blocking(c).length > 0)
      bad(`candidate ${c}: a durable pass coexists with an open material finding`);
  }
  return { reviewById, findingById, reviewsOf, blocking };
}

/** Each attempt: started and completed events bound to the same request; assessments re-hash. */
function proveAttempts(
  rr: ReviewRun,
  events: ReadonlyMap<string, CommittedEvent>,
  review: RunBase["review"],
  bad: Problems,
): Assessment | null {
  let lastAssessment: Assessment | null = null;
  const evs = [...events.values()].map((e) => e.event);
  for (const a of rr.attempts) {
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
      bad(`attempt ${a.attempt} is marked ${lastAssessment.bookkeeping?.gating ? "gating" : "shadow"} under ${review}`);
    if (a.outcome === "evidence_incomplete" && (a.missing_coverage ?? []).length === 0)
      bad("evidence_incomplete without the missing coverage");
  }
  return lastAssessment;
}

/** The assessment digest of a review run's last completed attempt. */
function lastDigest(rr: ReviewRun, events: ReadonlyMap<string, CommittedEvent>): string | undefined {
  const last = rr.attempts[rr.attempts.length - 1];
  for (const { event } of events.values()) {
    if (event.type === "auto_audit_completed" && event.audit_id === rr.audit_id && event.attempt === last?.attempt) {
      return event.assessment_digest as string;
    }
  }
  return undefined;
}
