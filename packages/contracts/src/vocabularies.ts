/**
 * Every closed vocabulary of the two contracts, as `const` arrays with the union types
 * derived from them. Schemas build their enums from these arrays, so a value added here is
 * added everywhere at once.
 */

// ---------------------------------------------------------------- host obligations

/** Where a decision is asked for (host §1, §2). `gate` is a hard block; `interactive` may warn-allow. */
export const CALL_SITES = ["interactive", "gate", "sweep"] as const;
export type CallSite = (typeof CALL_SITES)[number];

/** The host's decision. Only the host computes it (host §1). */
export const DECISIONS = ["allow", "deny", "indeterminate"] as const;
export type Decision = (typeof DECISIONS)[number];

/** Provider lifecycle states the supervisor tracks (host §2 "Provider supervision", DESIGN §6). */
export const PROVIDER_STATES = [
  "launched",
  "initializing",
  "initialized",
  "active",
  "cancelled",
  "shutting_down",
  "exited",
  "crashed",
  "timed_out",
  "incompatible",
  "malformed",
  "unavailable",
  "quarantined",
  "degraded",
] as const;
export type ProviderState = (typeof PROVIDER_STATES)[number];

/** Capability families; legacy sense/judge/act are aliases only ({@link LEGACY_FAMILY_ALIASES}). */
export const CAPABILITY_FAMILIES = ["inspect", "check", "edit"] as const;
export type CapabilityFamily = (typeof CAPABILITY_FAMILIES)[number];

/** Legacy labels accepted on input and mapped to the canonical family. */
export const LEGACY_FAMILY_ALIASES: Readonly<Record<string, CapabilityFamily>> = Object.freeze({
  sense: "inspect",
  judge: "check",
  act: "edit",
});

/** Typed failure classes: the rows of the fail-policy table (DESIGN §4). */
export const FAIL_CLASSES = [
  "crashed",
  "timed_out",
  "malformed",
  "stale",
  "unsupported",
  "errored",
  "cancelled",
  "incomplete",
  "quarantined",
  "incompatible",
  "missing",
  "unavailable",
  "missing_authority",
  "insufficient_assurance",
  "policy_self_authorization",
  "direct_write_risk",
  "integrity_unverified",
  "worktree_changed",
  "host_incompatible",
] as const;
export type FailClass = (typeof FAIL_CLASSES)[number];

/** `timed_out` -> `timed-out`: a fail class spelled as a degradation reason. */
export type Kebab<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}-${Kebab<Tail>}` : S;

/**
 * Degradation reasons of `coverage.degraded[]` (assurance.schema.json). One per fail class,
 * spelled as the host obligations spell them (`policy-self-authorization`, `direct-write-risk`).
 */
export const DEGRADATION_REASONS = Object.freeze(
  FAIL_CLASSES.map((c) => c.replaceAll("_", "-")),
) as unknown as ReadonlyArray<Kebab<FailClass>>;
export type DegradationReason = Kebab<FailClass>;

/** The degradation reason that reports a given fail class. */
export function degradationReasonOf(failClass: FailClass): DegradationReason {
  return failClass.replaceAll("_", "-") as DegradationReason;
}

/** What the fail-policy table may say for a (fail class, call-site) cell (host §2). */
export const FAIL_POLICY_OUTCOMES = ["open", "indeterminate", "deny"] as const;
export type FailPolicyOutcome = (typeof FAIL_POLICY_OUTCOMES)[number];

/** Provider-reported assessment status. `unsupported` (capability gap) and `error` (tried and failed) stay distinct. */
export const ASSESSMENT_STATUSES = ["complete", "incomplete", "unsupported", "error"] as const;
export type AssessmentStatus = (typeof ASSESSMENT_STATUSES)[number];

/**
 * How one provider run ended, as host health and metrics count it (host §2, §8): `complete`
 * (a valid, fresh, complete answer that misses nothing, the only successful run), `partial`
 * (status `complete` with a non-empty `coverage.missing`), `incomplete`, `unsupported` (a
 * capability gap) and `error` (it tried and failed) as the provider reported them, and `failed`
 * when there was no valid fresh answer at all (crash, timeout, malformed, stale, quarantined ...).
 */
export const PROVIDER_RUN_OUTCOMES = ["complete", "partial", "incomplete", "unsupported", "error", "failed"] as const;
export type ProviderRunOutcome = (typeof PROVIDER_RUN_OUTCOMES)[number];

/** Self-reported diagnostic severity (the host may cap it: effective severity). */
export const SEVERITIES = ["error", "warning", "info", "hint"] as const;
export type Severity = (typeof SEVERITIES)[number];

/** Host-assigned finding disposition in a decision envelope. */
export const DISPOSITIONS = ["gating", "advisory"] as const;
export type Disposition = (typeof DISPOSITIONS)[number];

/** Assurance modes, weakest first (host §3). */
export const ASSURANCE_MODES = ["advisory", "gated", "mediated-write", "isolated"] as const;
export type AssuranceMode = (typeof ASSURANCE_MODES)[number];

/** Transaction guarantees, weakest first (host §6). */
export const TRANSACTION_GUARANTEES = [
  "none",
  "rollback_attempted",
  "text_only_transactional",
  "workspace_transactional",
  "staged_snapshot",
] as const;
export type TransactionGuarantee = (typeof TRANSACTION_GUARANTEES)[number];

/** The five independent authority axes tracked per provider (host §1). */
export const AUTHORITY_AXES = ["identity", "integrity", "conformance", "isolation", "authorityGrant"] as const;
export type AuthorityAxis = (typeof AUTHORITY_AXES)[number];

/** State of one authority axis as evidence. */
export const AXIS_STATES = ["verified", "unverified", "failed", "not_applicable"] as const;
export type AxisState = (typeof AXIS_STATES)[number];

/**
 * Plugin kinds (DESIGN §1): a provider (a subprocess speaking the wire protocol), and three kinds
 * the host runs in-process: a verifier (Reviewer, Guardian), a sandbox (an assurance mechanism)
 * and an engine (an Auto Mode agent Engine, which only proposes actions; the host runs them).
 */
export const PLUGIN_KINDS = ["provider", "verifier", "sandbox", "engine"] as const;
export type PluginKind = (typeof PLUGIN_KINDS)[number];

/** Capabilities a plugin may declare and a policy may grant. */
export const PLUGIN_CAPABILITIES = [
  "check",
  "inspect",
  "edit",
  "review",
  "guardian",
  "sandbox:content_api",
  "sandbox:staged_snapshot",
  "sandbox:bubblewrap",
  // An agent Engine (kind `engine`): the one capability an engine plugin declares and is granted.
  "engine",
] as const;
export type PluginCapability = (typeof PLUGIN_CAPABILITIES)[number];

/** Structured edit operations an EditPlan may contain (host §6). Anything else is refused. */
export const EDIT_OPERATIONS = ["replace", "multi_replace", "search_replace", "create", "rename", "delete"] as const;
export type EditOperationKind = (typeof EDIT_OPERATIONS)[number];

/** Per-path change kinds of a changeset diff. */
export const CHANGE_KINDS = ["added", "modified", "deleted", "mode_changed"] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

/** Deterministic permission rule outcomes for Auto Mode actions. */
export const PERMISSION_OUTCOMES = ["allow", "ask", "deny"] as const;
export type PermissionOutcome = (typeof PERMISSION_OUTCOMES)[number];

/** Outcomes of a dogfood comparison row (host §9). */
export const APPLY_OUTCOMES = [
  "no_write",
  "rollback_attempted",
  "text_only_transactional",
  "workspace_transactional",
  "staged_snapshot",
] as const;
export type ApplyOutcome = (typeof APPLY_OUTCOMES)[number];

// ---------------------------------------------------------------- Auto Mode contract

/** `result_review_mode` ("Product modes"). */
export const RESULT_REVIEW_MODES = ["off", "review_only", "auto_fix"] as const;
export type ResultReviewMode = (typeof RESULT_REVIEW_MODES)[number];

/** `approvals_reviewer` ("Product modes"). */
export const APPROVALS_REVIEWERS = ["user", "auto_review"] as const;
export type ApprovalsReviewer = (typeof APPROVALS_REVIEWERS)[number];

/**
 * Auto Mode preset as configuration may spell it; `on` and `autonomous` are the same preset
 * ("Product modes": "off, on/autonomous"). What a run stores is {@link STORED_AUTO_MODE_PRESETS}.
 */
export const AUTO_MODE_PRESETS = ["off", "on", "autonomous"] as const;
export type AutoModePreset = (typeof AUTO_MODE_PRESETS)[number];

/** The preset as a run stores it: `autonomous` is normalized to `on` before it is persisted (ADR 0005). */
export const STORED_AUTO_MODE_PRESETS = ["off", "on"] as const;
export type StoredAutoModePreset = (typeof STORED_AUTO_MODE_PRESETS)[number];

/** Where a resolved selection came from ("Scope and precedence"), highest precedence first. */
export const SELECTION_SOURCES = [
  "imported_quarantine",
  "frame",
  "project",
  "deployment",
  "legacy_review_auto",
  "built_in",
] as const;
export type SelectionSource = (typeof SELECTION_SOURCES)[number];

/** The five Auto Mode states: one non-terminal phase and four terminals. */
export const AUTO_RUN_STATES = [
  "candidate",
  "verified",
  "completed_with_issues",
  "review_unavailable",
  "blocked_by_guardian",
] as const;
export type AutoRunState = (typeof AUTO_RUN_STATES)[number];

/** Terminal states among {@link AUTO_RUN_STATES}. */
export const AUTO_RUN_TERMINAL_STATES = [
  "verified",
  "completed_with_issues",
  "review_unavailable",
  "blocked_by_guardian",
] as const;
export type AutoRunTerminalState = (typeof AUTO_RUN_TERMINAL_STATES)[number];

/**
 * Durable terminal reasons outside the five states (the contract's table), plus the existing
 * cancellation and ordinary agent failure the contract says "keep their existing meanings"
 * (kept and justified in ADR 0005: a cancelled run needs a committed fact so it is never resumed).
 */
export const TERMINAL_REASONS = [
  "policy_requires_explicit_setup",
  "budget_exhausted",
  "safe_rollback_unavailable",
  "outcome_unknown",
  "loop_detected",
  "safety_boundary",
  "user_cancelled",
  "agent_failed",
] as const;
export type TerminalReason = (typeof TERMINAL_REASONS)[number];

/**
 * `stop_reason` carried by a five-state terminal: `completed_with_issues` (all three) and
 * `blocked_by_guardian` (only `loop_detected`). `review_only` is the contract's "review_only
 * forbids repair" entry condition named as a reason (ADR 0005). Why the Guardian stopped a run is
 * in its durable assessment or failure record, which the terminal references; it is not a stop
 * reason.
 */
export const STOP_REASONS = ["review_only", "budget_exhausted", "loop_detected"] as const;
export type StopReason = (typeof STOP_REASONS)[number];

/**
 * `reason` of a review_unavailable terminal. The contract names the first two; the third is its
 * "no admissible verdict exists after the bounded attempts" (timeout, provider/session failure,
 * parse/schema failure), one reason because the attempts may fail differently: each attempt
 * records its own {@link ATTEMPT_OUTCOMES} value (ADR 0005).
 */
export const UNAVAILABLE_REASONS = [
  "reviewer_independence_unavailable",
  "evidence_incomplete",
  "no_admissible_verdict",
] as const;
export type UnavailableReason = (typeof UNAVAILABLE_REASONS)[number];

/**
 * How a review run's Reviewer was selected: a Reviewer satisfying the frozen independence policy,
 * or none (the pre-inference `reviewer_independence_unavailable`: no inference call is made).
 */
export const REVIEWER_SELECTIONS = ["selected", "reviewer_independence_unavailable"] as const;
export type ReviewerSelection = (typeof REVIEWER_SELECTIONS)[number];

/**
 * The fingerprint rule of an Auto Run's frozen Reviewer independence policy. By default the
 * Reviewer's fingerprint (model and configuration identity) differs from the producer's; actor
 * and session independence is absolute and has no setting.
 */
export const INDEPENDENCE_POLICIES = ["distinct_fingerprint", "same_fingerprint_allowed"] as const;
export type IndependencePolicy = (typeof INDEPENDENCE_POLICIES)[number];

/** What an Evidence Snapshot ref points at (the kinds `@asp/evidence` freezes). */
export const EVIDENCE_REF_KINDS = ["blob", "tree", "record"] as const;
export type EvidenceRefKind = (typeof EVIDENCE_REF_KINDS)[number];

/** Audit subject control plane ("Canonical API and event names"). */
export const SUBJECT_KINDS = ["result_review", "permission_review"] as const;
export type SubjectKind = (typeof SUBJECT_KINDS)[number];

/** Audit subject entity. */
export const SUBJECT_ENTITY_KINDS = ["candidate_evidence_snapshot", "approval_action"] as const;
export type SubjectEntityKind = (typeof SUBJECT_ENTITY_KINDS)[number];

/** The only two valid (subject_kind, subject_entity_kind) pairings. */
export const SUBJECT_PAIRINGS = [
  ["result_review", "candidate_evidence_snapshot"],
  ["permission_review", "approval_action"],
] as const satisfies ReadonlyArray<readonly [SubjectKind, SubjectEntityKind]>;

/** True only for one of the two valid {@link SUBJECT_PAIRINGS}. */
export function isValidSubjectPairing(kind: string, entity: string): boolean {
  return SUBJECT_PAIRINGS.some(([k, e]) => k === kind && e === entity);
}

/** The seven Auto Mode event types; there are no aliases. */
export const AUTO_EVENT_TYPES = [
  "auto_run_started",
  "candidate_ready",
  "auto_audit_started",
  "auto_audit_completed",
  "repair_started",
  "repair_completed",
  "auto_run_terminal",
] as const;
export type AutoEventType = (typeof AUTO_EVENT_TYPES)[number];

/** Reviewer verdicts. */
export const REVIEW_VERDICTS = ["pass", "issues"] as const;
export type ReviewVerdict = (typeof REVIEW_VERDICTS)[number];

/** Finding severities; `critical` and `major` are material. */
export const FINDING_SEVERITIES = ["critical", "major", "minor", "info"] as const;
export type FindingSeverity = (typeof FINDING_SEVERITIES)[number];

/** Finding lifecycle; open, claimed and unaddressed block Verified. */
export const FINDING_STATUSES = ["open", "claimed", "unaddressed", "resolved"] as const;
export type FindingStatus = (typeof FINDING_STATUSES)[number];

/** Guardian decisions on an `ask` action. */
export const GUARDIAN_DECISIONS = ["allow", "deny"] as const;
export type GuardianDecision = (typeof GUARDIAN_DECISIONS)[number];

/** Guardian risk levels; `critical` is non-recoverable. */
export const RISK_LEVELS = ["low", "medium", "high", "critical"] as const;
export type RiskLevel = (typeof RISK_LEVELS)[number];

/** Review/audit attempt outcomes. */
export const ATTEMPT_OUTCOMES = [
  "verdict",
  "timeout",
  "provider_failed",
  "unparseable",
  "evidence_incomplete",
] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** Repair run outcomes. A repair row alone never proves success. */
export const REPAIR_OUTCOMES = ["applied", "rejected", "no_change", "failed"] as const;
export type RepairOutcome = (typeof REPAIR_OUTCOMES)[number];

/** The twelve rollout stage flags (spec/stages.md), each independent and default off. */
export const STAGE_FLAGS = [
  "stage1_trusted_delivery",
  "stage2_auto_run_storage",
  "stage3_scientific_review_shadow",
  "stage4_review_completion_gate",
  "stage5_auto_repair",
  "stage6_guardian_shadow",
  "stage7_guardian_enforcement",
  "stage8_loop_circuits",
  "stage9_safe_repair_checkpoint",
  "stage10_effect_reconciliation",
  "stage11_portable_runs",
  "stage12_restart_recovery",
] as const;
export type StageFlag = (typeof STAGE_FLAGS)[number];

/** The thirteen budget limits of "Frozen bounded budgets". */
export const BUDGET_LIMITS = [
  "max_review_rounds",
  "max_repair_rounds",
  "repair_turns_per_round",
  "max_extra_cells",
  "wall_time_s",
  "extra_token_multiplier",
  "repeated_finding_limit",
  "same_action_no_delta_limit",
  "no_progress_turn_limit",
  "guardian_timeout_s",
  "guardian_consecutive_denial_limit",
  "guardian_window_size",
  "guardian_window_denial_limit",
] as const;
export type BudgetLimit = (typeof BUDGET_LIMITS)[number];

/**
 * What a `budget_exhausted` terminal may name as its exhausted counter: one of the thirteen
 * {@link BUDGET_LIMITS}, or `engine_turns`, the Engine's own turn limit (an Engine that reports
 * `max_turns` exhausted its turns: a turn budget, not an Agent failure; ADR 0009).
 */
export const EXHAUSTED_LIMITS = [...BUDGET_LIMITS, "engine_turns"] as const;
export type ExhaustedLimit = (typeof EXHAUSTED_LIMITS)[number];

/**
 * The budget ledger's counters: one set of names, shared by the rollout `BudgetMeter` and the
 * `BudgetLedger` schema. Deadlines (`wall_time_s`, `guardian_timeout_s`) are not counters, and
 * the per-fingerprint / per-action-digest counts and the Guardian window are kept beside these.
 */
export const BUDGET_COUNTERS = [
  "review_attempts",
  "repair_rounds",
  "repair_turns",
  "extra_cells",
  "extra_tokens",
  "no_progress_turns",
  "guardian_consecutive_denials",
] as const;
export type BudgetCounter = (typeof BUDGET_COUNTERS)[number];
