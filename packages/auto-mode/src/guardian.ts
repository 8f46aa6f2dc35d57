import {
  GUARDIAN_DECISIONS,
  type GuardianAssessment,
  type GuardianDecision,
  RISK_LEVELS,
  type RiskLevel,
  type RunIdentity,
  type Verifier,
  type VerifierBoundary,
  type VerifierLaunch,
  validate,
} from "@asp/contracts";
import { type Digest, digest } from "@asp/evidence";
import { auditRequestDigest } from "./audit.js";
import { AutoModeError } from "./errors.js";
import { isVerifierBoundary, type VerifierBoundarySource } from "./review.js";

// The Guardian's side of a permission review (issue 27 item 3, ADR 0010), as pure functions: what
// the Guardian is shown, how its answer is read, the deterministic rules Guardian, and the
// permission-review audit with its two digests and the assessment record. The run machine does
// not call these yet: Stages 6 and 7 stay refused as unbuilt until it does (ADR 0010).

/**
 * Everything a Guardian is shown of one `ask` (ADR 0010 §2): the host's canonical action and
 * deterministic policy's reason and version. No field carries the Engine's prose, a tool's
 * output, web content, a skill or an earlier rationale, so no authority can flow from them.
 */
export interface GuardianRequest {
  readonly run: RunIdentity;
  /** The ask decision under review (the id of the step that recorded it). */
  readonly ask_decision_id: string;
  readonly action: {
    readonly tool: string;
    /** The canonical target (a workspace path, a program name). */
    readonly target: string | null;
    readonly action_digest: string;
    /** What kind of effect it is, e.g. `write_file`, `run_command:git` (safe to show a user). */
    readonly action_class: string;
  };
  readonly policy_reason: string;
  readonly policy_version: string;
}

/**
 * The {@link GuardianRequest} of an ask: only the named fields are copied (anything else the
 * caller's objects carry, such as a tool's output, is left behind), each string bounded. Pure.
 */
export function guardianRequestOf(input: {
  readonly run: RunIdentity;
  readonly askDecisionId: string;
  readonly action: { readonly tool: string; readonly target: string | null; readonly action_digest: string };
  readonly policyReason: string;
  readonly policyVersion: string;
}): GuardianRequest {
  const { tool, target, action_digest } = input.action;
  const r = input.run;
  return {
    run: { root_frame_id: r.root_frame_id, branch_id: r.branch_id, turn_id: r.turn_id, execution_id: r.execution_id },
    ask_decision_id: input.askDecisionId,
    action: {
      tool: String(tool).slice(0, 128),
      target: target === null ? null : String(target).slice(0, 4096),
      action_digest: String(action_digest),
      action_class: actionClassOf(tool, target),
    },
    policy_reason: String(input.policyReason).slice(0, 500),
    policy_version: input.policyVersion,
  };
}

/** The action class a user may be shown: the tool, and for a command its program. Pure. */
export function actionClassOf(tool: string, target: string | null): string {
  return tool === "run_command" && target !== null ? `run_command:${target}` : tool;
}

/** A Guardian's answer, once read: a decision with its risk, recoverability and rationale. */
export interface GuardianAnswer {
  readonly decision: GuardianDecision;
  readonly risk: RiskLevel;
  /** A deny the main Agent may answer with a materially safer plan (never for `critical`). */
  readonly recoverable: boolean;
  readonly rationale: string;
}

/**
 * Read a Guardian's raw answer. Anything that is not exactly `{ decision, risk, recoverable,
 * rationale }` with known values is invalid output (the contract: a stopping result), never a
 * guess; an allow at `critical` risk and a recoverable `critical` deny are invalid too. Pure.
 */
export function parseGuardianAnswer(raw: unknown): GuardianAnswer | { readonly invalid: string } {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return { invalid: "not a JSON object" };
  const a = raw as Record<string, unknown>;
  const extra = Object.keys(a).filter((k) => !["decision", "risk", "recoverable", "rationale"].includes(k));
  if (extra.length > 0) return { invalid: `unknown field ${extra[0]}` };
  if (!GUARDIAN_DECISIONS.includes(a.decision as GuardianDecision)) return { invalid: "decision is not allow or deny" };
  if (!RISK_LEVELS.includes(a.risk as RiskLevel)) return { invalid: "risk is not low, medium, high or critical" };
  if (typeof a.recoverable !== "boolean") return { invalid: "recoverable is not a boolean" };
  if (typeof a.rationale !== "string" || a.rationale.length === 0 || a.rationale.length > 10_000)
    return { invalid: "rationale is not a string of 1 to 10,000 characters" };
  if (a.risk === "critical" && (a.decision === "allow" || a.recoverable === true))
    return { invalid: "a critical risk is never allowed and never recoverable" };
  return {
    decision: a.decision as GuardianDecision,
    risk: a.risk as RiskLevel,
    recoverable: a.recoverable,
    rationale: a.rationale,
  };
}

/** One rule of the deterministic rules Guardian: the first that matches decides. */
export interface GuardianRule {
  /** The action class it applies to (`write_file`, `run_command:git`, ...). */
  readonly actionClass: string;
  /** Canonical targets it applies to: exact, or a folder prefix ending in `/`. Absent: any. */
  readonly targets?: ReadonlyArray<string>;
  readonly decision: GuardianDecision;
  readonly risk: RiskLevel;
  readonly recoverable?: boolean;
  readonly rationale: string;
}

/** A Guardian: who it is (frozen into each assessment) and how it answers one request. */
export interface Guardian {
  readonly identity: { readonly prompt_version: string; readonly model_version: string };
  /**
   * How the Guardian's process was launched (a verifier plugin under the host's sandbox, ADR
   * 0011), frozen into every assessment and failure record. Absent: one the host runs itself.
   */
  readonly launch?: VerifierLaunch;
  /** What its sandbox boundary records (`@asp/ths` `LaunchedVerifier`): each ask's new entries are frozen into its record. */
  readonly boundary?: VerifierBoundarySource;
  assess(request: GuardianRequest, signal: AbortSignal): Promise<unknown>;
}

/**
 * The deterministic rules Guardian: ordered rules over the action class and canonical target,
 * the first match decides, and anything no rule names is denied (high risk, recoverable: the
 * Agent may try a plan the rules allow). It reads nothing but the request's action.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION` for a rule that allows at critical risk,
 *   names no action class, or has a target that is not canonical.
 * @example
 * ```ts
 * const guardian = createRulesGuardian({ version: "rules-1", rules: [
 *   { actionClass: "write_file", targets: ["docs/"], decision: "allow", risk: "low", rationale: "docs are safe to edit" },
 * ] });
 * ```
 */
export function createRulesGuardian(options: {
  readonly rules: ReadonlyArray<GuardianRule>;
  readonly version: string;
}): Guardian {
  const rules = options.rules.map((r, i) => {
    const bad = (why: string): never => {
      throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", `guardian rule ${i} ${why}`, {
        data: { key: `rules[${i}]` },
      });
    };
    if (typeof r.actionClass !== "string" || r.actionClass === "") bad("names no action class");
    if (r.decision === "allow" && r.risk === "critical") bad("allows at critical risk");
    for (const t of r.targets ?? []) {
      if (
        t === "" ||
        t.startsWith("/") ||
        t.split("/").some((s, k, all) => s === ".." || (s === "" && k < all.length - 1))
      )
        bad(`has a target that is not canonical: ${JSON.stringify(t)}`);
    }
    return { ...r, recoverable: r.decision === "deny" && r.risk !== "critical" && (r.recoverable ?? true) };
  });
  const matches = (rule: GuardianRule, target: string | null): boolean =>
    rule.targets === undefined ||
    (target !== null && rule.targets.some((t) => (t.endsWith("/") ? target.startsWith(t) : target === t)));
  return {
    identity: { prompt_version: `rules:${options.version}`, model_version: "deterministic" },
    async assess(request) {
      const rule = rules.find(
        (r) => r.actionClass === request.action.action_class && matches(r, request.action.target),
      );
      if (rule === undefined) {
        return {
          decision: "deny",
          risk: "high",
          recoverable: true,
          rationale: `no Guardian rule allows ${request.action.action_class}${request.action.target === null ? "" : ` on ${request.action.target}`}`,
        };
      }
      return { decision: rule.decision, risk: rule.risk, recoverable: rule.recoverable, rationale: rule.rationale };
    },
  };
}

/**
 * A Guardian over a verifier port with capability `guardian` (the OpenAI-compatible verifier in
 * the Guardian role): the request goes as the port's `subject` (data, never instructions) with the
 * action digest and class beside it, and the answer is read like any Guardian's
 * ({@link parseGuardianAnswer}): a reply that is not a Guardian answer is invalid output.
 */
export function guardianFromVerifier(
  verifier: Pick<Verifier, "verify">,
  identity: Guardian["identity"],
  launch?: VerifierLaunch,
  boundary?: VerifierBoundarySource,
): Guardian {
  return {
    identity: { prompt_version: identity.prompt_version, model_version: identity.model_version },
    ...(launch === undefined ? {} : { launch: { ...launch } }),
    ...(boundary === undefined ? {} : { boundary }),
    async assess(request, signal) {
      const reply = await verifier.verify({
        kind: "guardian",
        actionDigest: request.action.action_digest,
        actionClass: request.action.action_class,
        subject: request,
        signal,
      });
      if (reply?.kind !== "guardian") return reply;
      const { decision, risk, recoverable, rationale } = reply;
      return { decision, risk, recoverable, rationale };
    },
  };
}

/**
 * The immutable request of one permission-review audit and its subject bindings: what its
 * `audit_request_digest` covers (the ask decision, the exact action digest, the policy, prompt and
 * model versions), never the answer.
 */
export interface PermissionAuditRequest {
  readonly audit_id: string;
  readonly subject_kind: "permission_review";
  readonly subject_entity_kind: "approval_action";
  /** The ask decision under review. */
  readonly subject_id: string;
  readonly run: RunIdentity;
  readonly action_digest: string;
  readonly action_class: string;
  readonly policy_version: string;
  readonly prompt_version: string;
  readonly model_version: string;
}

/** The permission-review audit request of a Guardian request under this Guardian's identity. Pure. */
export function permissionAuditRequest(
  auditId: string,
  request: GuardianRequest,
  identity: Guardian["identity"],
): PermissionAuditRequest {
  return {
    audit_id: auditId,
    subject_kind: "permission_review",
    subject_entity_kind: "approval_action",
    subject_id: request.ask_decision_id,
    run: request.run,
    action_digest: request.action.action_digest,
    action_class: request.action.action_class,
    policy_version: request.policy_version,
    prompt_version: identity.prompt_version,
    model_version: identity.model_version,
  };
}

/** `audit_request_digest` of a permission review: the request and its subject bindings only. Pure. */
export function permissionRequestDigest(request: PermissionAuditRequest): Digest {
  return auditRequestDigest(request);
}

/**
 * The assessment a permission-review `auto_audit_completed` carries (attempt 1: a Guardian is
 * asked once per ask decision): the request digest, the subject, and either the answer with its
 * capability or the failure. `assessment_digest` is the canonical digest of exactly this (the same
 * rule as a result review's, `assessmentDigest`), so the completion re-hashes.
 */
export interface PermissionAssessment {
  readonly audit_request_digest: string;
  readonly subject_kind: "permission_review";
  readonly subject_entity_kind: "approval_action";
  readonly subject_id: string;
  readonly attempt: 1;
  readonly decision: GuardianDecision | null;
  readonly risk: RiskLevel | null;
  readonly recoverable: boolean;
  readonly rationale: string | null;
  readonly capability: GuardianAssessment["capability"];
  readonly failure: { readonly outcome: GuardianFailureOutcome; readonly detail: string } | null;
}

/** The {@link PermissionAssessment} of an answer (with its capability) or of a failure. Pure. */
export function permissionAssessment(
  audit: PermissionAuditRequest,
  requestDigest: string,
  result:
    | { readonly answer: GuardianAnswer; readonly capability: GuardianAssessment["capability"] }
    | { readonly failure: { readonly outcome: GuardianFailureOutcome; readonly detail: string } },
): PermissionAssessment {
  const subject = {
    audit_request_digest: requestDigest,
    subject_kind: "permission_review" as const,
    subject_entity_kind: "approval_action" as const,
    subject_id: audit.subject_id,
    attempt: 1 as const,
  };
  if ("failure" in result) {
    return {
      ...subject,
      decision: null,
      risk: null,
      recoverable: false,
      rationale: null,
      capability: null,
      failure: { outcome: result.failure.outcome, detail: result.failure.detail },
    };
  }
  const { answer, capability } = result;
  return {
    ...subject,
    decision: answer.decision,
    risk: answer.risk,
    recoverable: answer.recoverable,
    rationale: answer.rationale,
    capability,
    failure: null,
  };
}

/**
 * Build the durable {@link GuardianAssessment} of one answer, its `assessment_digest` over the
 * {@link PermissionAssessment} (request digest, subject, decision, risk, recoverability, rationale
 * and capability: a different meaning from the request digest). An allow carries a one-shot capability bound to the exact
 * action digest, the run's generation and an expiry only when `enforce` (Stage 7 with
 * auto_review); shadow advice (Stage 6) and every deny carry none.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_RECORD` when the record does not check against the
 *   contracts' schema.
 */
export function guardianAssessment(input: {
  readonly assessmentId: string;
  readonly audit: PermissionAuditRequest;
  readonly answer: GuardianAnswer;
  readonly enforce: boolean;
  readonly generation: number;
  readonly decidedAt: string;
  readonly capabilityExpiresAt: string;
  /** How the Guardian was launched: recorded, outside both digests (evidence of assurance). */
  readonly launch?: VerifierLaunch;
  /** What its boundary refused while it answered: recorded, outside both digests. */
  readonly boundary?: VerifierBoundary;
}): GuardianAssessment {
  const { audit, answer } = input;
  const requestDigest = permissionRequestDigest(audit);
  const capability =
    input.enforce && answer.decision === "allow"
      ? {
          capability_id: digest({ type: "auto-capability", assessment_id: input.assessmentId }).slice(7, 39),
          action_digest: audit.action_digest,
          max_uses: 1 as const,
          generation: input.generation,
          expires_at: input.capabilityExpiresAt,
        }
      : null;
  const assessmentDigest = digest({
    type: "auto-audit-assessment",
    ...permissionAssessment(audit, requestDigest, { answer, capability }),
  });
  const record: GuardianAssessment = {
    assessment_id: input.assessmentId,
    run: audit.run,
    ask_decision_id: audit.subject_id,
    action_digest: audit.action_digest,
    action_class: audit.action_class,
    decision: answer.decision,
    risk: answer.risk,
    recoverable: answer.recoverable,
    rationale: answer.rationale,
    policy_version: audit.policy_version,
    prompt_version: audit.prompt_version,
    model_version: audit.model_version,
    ...(input.launch === undefined ? {} : { launch: input.launch }),
    ...(input.boundary === undefined ? {} : { boundary: input.boundary }),
    audit_id: audit.audit_id,
    audit_request_digest: requestDigest,
    assessment_digest: assessmentDigest,
    capability,
    decided_at: input.decidedAt,
  };
  const checked = validate("guardian-assessment", record);
  if (!checked.ok) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_RECORD", "the Guardian assessment does not check", {
      data: { errors: checked.errors.map((e) => `${e.pointer} ${e.message}`).slice(0, 5) },
    });
  }
  return record;
}

/**
 * Check a committed assessment: both digests re-derive from its own fields (a rationale, a risk or
 * a capability changed after commit no longer re-hashes), and a capability is one-shot and bound
 * to the assessed action. Null when it holds, else the problem. Pure.
 */
export function checkGuardianAssessment(a: GuardianAssessment): string | null {
  const audit = auditRequestOf(a);
  if (permissionRequestDigest(audit) !== a.audit_request_digest) return "its audit_request_digest does not re-derive";
  let again: GuardianAssessment;
  try {
    again = guardianAssessment({
      assessmentId: a.assessment_id,
      audit,
      answer: { decision: a.decision, risk: a.risk, recoverable: a.recoverable, rationale: a.rationale },
      enforce: a.capability !== null,
      generation: a.capability?.generation ?? 0,
      decidedAt: a.decided_at,
      capabilityExpiresAt: a.capability?.expires_at ?? a.decided_at,
    });
  } catch {
    return "it does not check against the contracts' schema";
  }
  const answer = parseGuardianAnswer({
    decision: a.decision,
    risk: a.risk,
    recoverable: a.recoverable,
    rationale: a.rationale,
  });
  if ("invalid" in answer) return "its answer is not one a Guardian may give";
  if (again.assessment_digest !== a.assessment_digest) return "its assessment does not re-hash to assessment_digest";
  if (a.capability !== null && a.capability.capability_id !== again.capability?.capability_id)
    return "its capability id does not re-derive";
  if (a.capability !== null && a.capability.action_digest !== a.action_digest)
    return "its capability is bound to another action";
  return null;
}

/**
 * Why a Guardian gave no answer: it did not answer within `guardian_timeout_s`; its answer was not
 * one a Guardian may give; or the call failed (a thrown error, a lost session).
 */
export type GuardianFailureOutcome = "timeout" | "invalid_output" | "guardian_failed";

/**
 * The durable Guardian-failure record (fact kind `auto.guardian_failure`): the contract's
 * alternative to an assessment for `blocked_by_guardian`, bound like one to the ask decision, the
 * exact action digest and the versions. Never an allow.
 */
export interface GuardianFailure {
  readonly failure_id: string;
  readonly run: RunIdentity;
  readonly ask_decision_id: string;
  readonly action_digest: string;
  readonly action_class: string;
  readonly outcome: GuardianFailureOutcome;
  /** What went wrong, bounded (never the Guardian's raw output). */
  readonly detail: string;
  readonly policy_version: string;
  readonly prompt_version: string;
  readonly model_version: string;
  /** How the Guardian was launched (as on an assessment), outside both digests. */
  readonly launch?: VerifierLaunch;
  /** What its boundary refused while it was asked (as on an assessment), outside both digests. */
  readonly boundary?: VerifierBoundary;
  readonly audit_id: string;
  readonly audit_request_digest: string;
  readonly assessment_digest: string;
  readonly decided_at: string;
}

const FAILURE_OUTCOMES: ReadonlyArray<GuardianFailureOutcome> = ["timeout", "invalid_output", "guardian_failed"];

/** Build the {@link GuardianFailure} of an ask the Guardian did not answer. Pure. */
export function guardianFailure(input: {
  readonly failureId: string;
  readonly audit: PermissionAuditRequest;
  readonly outcome: GuardianFailureOutcome;
  readonly detail: string;
  readonly decidedAt: string;
  readonly launch?: VerifierLaunch;
  readonly boundary?: VerifierBoundary;
}): GuardianFailure {
  const { audit } = input;
  const requestDigest = permissionRequestDigest(audit);
  const detail = String(input.detail).slice(0, 500);
  return {
    failure_id: input.failureId,
    run: audit.run,
    ask_decision_id: audit.subject_id,
    action_digest: audit.action_digest,
    action_class: audit.action_class,
    outcome: input.outcome,
    detail,
    policy_version: audit.policy_version,
    prompt_version: audit.prompt_version,
    model_version: audit.model_version,
    ...(input.launch === undefined ? {} : { launch: input.launch }),
    ...(input.boundary === undefined ? {} : { boundary: input.boundary }),
    audit_id: audit.audit_id,
    audit_request_digest: requestDigest,
    assessment_digest: digest({
      type: "auto-audit-assessment",
      ...permissionAssessment(audit, requestDigest, { failure: { outcome: input.outcome, detail } }),
    }),
    decided_at: input.decidedAt,
  };
}

/** The permission-review audit request a committed assessment or failure record names. Pure. */
export function auditRequestOf(r: GuardianAssessment | GuardianFailure): PermissionAuditRequest {
  return {
    audit_id: r.audit_id,
    subject_kind: "permission_review",
    subject_entity_kind: "approval_action",
    subject_id: r.ask_decision_id,
    run: r.run,
    action_digest: r.action_digest,
    action_class: r.action_class,
    policy_version: r.policy_version,
    prompt_version: r.prompt_version,
    model_version: r.model_version,
  };
}

/**
 * The {@link PermissionAssessment} a committed record re-derives to (what its
 * `auto_audit_completed` must carry). Pure.
 */
export function permissionAssessmentOf(r: GuardianAssessment | GuardianFailure): PermissionAssessment {
  const audit = auditRequestOf(r);
  return "failure_id" in r
    ? permissionAssessment(audit, r.audit_request_digest, { failure: { outcome: r.outcome, detail: r.detail } })
    : permissionAssessment(audit, r.audit_request_digest, {
        answer: { decision: r.decision, risk: r.risk, recoverable: r.recoverable, rationale: r.rationale },
        capability: r.capability,
      });
}

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

/** Whether `v` is a {@link VerifierLaunch} (the contracts' closed shape). Pure. */
export function isVerifierLaunch(v: unknown): v is VerifierLaunch {
  if (typeof v !== "object" || v === null) return false;
  const l = v as Record<string, unknown>;
  const allowed = ["mode", "mechanism", "sandbox", "direct_write", "reason"];
  if (Object.keys(l).some((k) => !allowed.includes(k))) return false;
  if (typeof l.mode !== "string" || l.mode === "" || l.mode.length > 64) return false;
  if (typeof l.mechanism !== "string" || l.mechanism.length > 500) return false;
  if (typeof l.direct_write !== "boolean") return false;
  if (l.reason !== undefined && (typeof l.reason !== "string" || l.reason.length > 500)) return false;
  if (l.sandbox === null) return true;
  const s = l.sandbox as Record<string, unknown> | undefined;
  return (
    typeof s === "object" &&
    s !== null &&
    Object.keys(s).sort().join(",") === "digest,id" &&
    typeof s.id === "string" &&
    s.id !== "" &&
    DIGEST_RE.test(String(s.digest))
  );
}

/**
 * The contracts' {@link VerifierLaunch} of an out-of-process verifier's launch as
 * `@asp/ths` `launchVerifier` reports it (`directWrite` becomes `direct_write`). Pure.
 */
export function verifierLaunchOf(launch: {
  readonly mode: string;
  readonly mechanism: string;
  readonly sandbox: { readonly id: string; readonly digest: string } | null;
  readonly directWrite: boolean;
  readonly reason?: string;
}): VerifierLaunch {
  return {
    mode: launch.mode.slice(0, 64),
    mechanism: launch.mechanism.slice(0, 500),
    sandbox: launch.sandbox === null ? null : { id: launch.sandbox.id, digest: launch.sandbox.digest },
    direct_write: launch.directWrite,
    ...(launch.reason === undefined ? {} : { reason: launch.reason.slice(0, 500) }),
  };
}

/**
 * Check a {@link GuardianFailure} record: its closed shape, and both digests re-derive from its
 * own fields. Null when it holds, else the problem. Pure.
 */
export function checkGuardianFailure(record: unknown): string | null {
  const r = record as Partial<GuardianFailure> | null;
  if (typeof r !== "object" || r === null) return "guardian_failure: not an object";
  const keys = Object.keys(r)
    .filter((k) => k !== "launch" && k !== "boundary")
    .sort()
    .join(",");
  if (r.launch !== undefined && !isVerifierLaunch(r.launch)) return "guardian_failure: bad launch";
  if (r.boundary !== undefined && !isVerifierBoundary(r.boundary)) return "guardian_failure: bad boundary";
  const want =
    "action_class,action_digest,ask_decision_id,assessment_digest,audit_id,audit_request_digest,decided_at,detail,failure_id,model_version,outcome,policy_version,prompt_version,run";
  if (keys !== want) return `guardian_failure: fields ${keys}`;
  for (const k of [
    "failure_id",
    "ask_decision_id",
    "action_class",
    "policy_version",
    "prompt_version",
    "model_version",
    "audit_id",
  ] as const) {
    if (typeof r[k] !== "string" || r[k] === "" || (r[k] as string).length > 256) return `guardian_failure: bad ${k}`;
  }
  for (const k of ["action_digest", "audit_request_digest", "assessment_digest"] as const) {
    if (!DIGEST_RE.test(String(r[k]))) return `guardian_failure: bad ${k}`;
  }
  if (!FAILURE_OUTCOMES.includes(r.outcome as GuardianFailureOutcome)) return "guardian_failure: unknown outcome";
  if (typeof r.detail !== "string" || r.detail.length > 500) return "guardian_failure: bad detail";
  if (typeof r.decided_at !== "string" || Number.isNaN(Date.parse(r.decided_at)))
    return "guardian_failure: bad decided_at";
  if (typeof r.run !== "object" || r.run === null) return "guardian_failure: bad run";
  let again: GuardianFailure;
  try {
    again = guardianFailure({
      failureId: r.failure_id as string,
      audit: auditRequestOf(r as GuardianFailure),
      outcome: r.outcome as GuardianFailureOutcome,
      detail: r.detail,
      decidedAt: r.decided_at,
    });
  } catch {
    return "guardian_failure: it has no canonical form";
  }
  if (again.audit_request_digest !== r.audit_request_digest)
    return "guardian_failure: audit_request_digest does not re-derive";
  if (again.assessment_digest !== r.assessment_digest) return "guardian_failure: assessment_digest does not re-derive";
  return null;
}
