import {
  type AttemptOutcome,
  type AutoAuditCompletedEvent,
  type AutoAuditStartedEvent,
  isValidSubjectPairing,
  type ReviewVerdict,
  type RunIdentity,
} from "@asp/contracts";
import { type Digest, digest } from "@asp/evidence";
import { AutoModeError } from "./errors.js";
import type { PermissionAssessment, PermissionAuditRequest } from "./guardian.js";

/**
 * The immutable request of one result-review audit and its subject bindings: what
 * `audit_request_digest` covers and nothing else (never the result).
 */
export interface AuditRequest {
  readonly audit_id: string;
  readonly subject_kind: "result_review";
  readonly subject_entity_kind: "candidate_evidence_snapshot";
  /** The reviewed candidate. */
  readonly subject_id: string;
  readonly run: RunIdentity;
  readonly review_run_id: string;
  readonly candidate_payload_digest: string;
  readonly snapshot_digest: string;
  /** The frozen Reviewer (null for a pre-inference independence failure). */
  readonly reviewer: { readonly actor_id: string; readonly session_id: string; readonly fingerprint: string } | null;
}

/** One finding as an assessment carries it (content plus its per-run identity). */
export interface AssessmentFinding {
  readonly finding_id: string;
  readonly fingerprint: string;
  readonly severity: string;
  readonly category: string;
  readonly claim: string;
  readonly evidence_refs: ReadonlyArray<string>;
}

/**
 * The canonical assessment of one completed audit attempt: the contract's field list (request
 * digest, subject fields, attempt, verdict/decision, findings, risk, authorization, outcome,
 * rationale, failure, and completion bookkeeping such as durability and retry state).
 */
export interface Assessment {
  readonly audit_request_digest: string;
  readonly subject_kind: "result_review";
  readonly subject_entity_kind: "candidate_evidence_snapshot";
  readonly subject_id: string;
  readonly attempt: number;
  readonly verdict: ReviewVerdict | null;
  /** Permission decisions only; always null for a result review. */
  readonly decision: null;
  readonly findings: ReadonlyArray<AssessmentFinding>;
  /** Permission risk only; always null for a result review. */
  readonly risk: null;
  /** Permission authorization only; always null for a result review. */
  readonly authorization: null;
  readonly outcome: AttemptOutcome;
  readonly rationale: string | null;
  /** Why the attempt gave no admissible verdict (null on a verdict). */
  readonly failure: { readonly outcome: AttemptOutcome; readonly missing_coverage: ReadonlyArray<string> } | null;
  /**
   * Completion bookkeeping: durable, whether this attempt is the retry, whether it is the run's
   * last attempt, and whether the review gates completion (`false`: a Stage 3 shadow review).
   */
  readonly bookkeeping: {
    readonly durable: true;
    readonly retry: boolean;
    readonly final: boolean;
    readonly gating: boolean;
  };
}

/**
 * `audit_request_digest`: the canonical digest of the audit request and its subject bindings only.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_RECORD` for a subject pairing the contract does not allow.
 */
export function auditRequestDigest(request: AuditRequest | PermissionAuditRequest): Digest {
  if (!isValidSubjectPairing(request.subject_kind, request.subject_entity_kind)) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_RECORD", "not one of the two valid subject pairings", {
      data: { subject_kind: request.subject_kind, subject_entity_kind: request.subject_entity_kind },
    });
  }
  return digest({ type: "auto-audit-request", ...request });
}

/** `assessment_digest`: the canonical digest of an {@link Assessment} (a different meaning from the request digest). */
export function assessmentDigest(assessment: Assessment | PermissionAssessment): Digest {
  return digest({ type: "auto-audit-assessment", ...assessment });
}

/**
 * Check a completion event: its assessment re-hashes to `assessment_digest`, and it is bound to the
 * event's own request digest, subject fields and attempt. Fails closed.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_DIGEST_MISMATCH` when the assessment does not re-hash or
 *   names another request, subject or attempt.
 */
export function checkAuditCompletion(event: AutoAuditCompletedEvent): Assessment {
  const assessment = event.assessment as Assessment;
  let actual: string;
  try {
    actual = assessmentDigest(assessment);
  } catch (cause) {
    throw new AutoModeError("ASP_AUTO_MODE_DIGEST_MISMATCH", "the assessment has no canonical form", {
      category: "integrity",
      cause,
      data: { audit_id: event.audit_id },
    });
  }
  const bound =
    typeof assessment === "object" &&
    assessment !== null &&
    assessment.audit_request_digest === event.audit_request_digest &&
    assessment.subject_kind === event.subject_kind &&
    assessment.subject_entity_kind === event.subject_entity_kind &&
    assessment.subject_id === event.subject_id &&
    assessment.attempt === event.attempt;
  if (actual !== event.assessment_digest || !bound) {
    throw new AutoModeError(
      "ASP_AUTO_MODE_DIGEST_MISMATCH",
      "the completion's assessment does not re-hash to its assessment_digest or names another request",
      { category: "integrity", data: { audit_id: event.audit_id, attempt: event.attempt } },
    );
  }
  return assessment;
}

// The fields both audit events carry, identically (the contract: same audit id, subject fields
// and request digest on start and completion).
function auditFields(
  eventId: string,
  committedAt: string,
  request: AuditRequest | PermissionAuditRequest,
  attempt: number,
) {
  return {
    event_id: eventId,
    run: request.run,
    committed_at: committedAt,
    audit_id: request.audit_id,
    subject_kind: request.subject_kind,
    subject_entity_kind: request.subject_entity_kind,
    subject_id: request.subject_id,
    attempt,
    audit_request_digest: auditRequestDigest(request),
  };
}

/** Build an `auto_audit_started` event for one attempt of a request, result or permission review (pure). */
export function auditStartedEvent(
  eventId: string,
  committedAt: string,
  request: AuditRequest | PermissionAuditRequest,
  attempt: number,
): AutoAuditStartedEvent {
  return { type: "auto_audit_started", ...auditFields(eventId, committedAt, request, attempt) };
}

/** Build the matching `auto_audit_completed` event carrying the assessment and its digest (pure). */
export function auditCompletedEvent(
  eventId: string,
  committedAt: string,
  request: AuditRequest | PermissionAuditRequest,
  assessment: Assessment | PermissionAssessment,
): AutoAuditCompletedEvent {
  return {
    type: "auto_audit_completed",
    ...auditFields(eventId, committedAt, request, assessment.attempt),
    assessment,
    assessment_digest: assessmentDigest(assessment),
  };
}
