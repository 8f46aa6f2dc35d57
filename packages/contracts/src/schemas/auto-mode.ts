import { type Static, type TObject, type TProperties, Type } from "@sinclair/typebox";
import {
  APPROVALS_REVIEWERS,
  ATTEMPT_OUTCOMES,
  AUTO_MODE_PRESETS,
  AUTO_RUN_STATES,
  type AutoRunTerminalState,
  BUDGET_COUNTERS,
  BUDGET_LIMITS,
  type BudgetCounter,
  type BudgetLimit,
  DECISIONS,
  EVIDENCE_REF_KINDS,
  EXHAUSTED_LIMITS,
  FINDING_SEVERITIES,
  FINDING_STATUSES,
  type FindingSeverity,
  GUARDIAN_DECISIONS,
  INDEPENDENCE_POLICIES,
  REPAIR_OUTCOMES,
  RESULT_REVIEW_MODES,
  REVIEW_VERDICTS,
  REVIEWER_SELECTIONS,
  RISK_LEVELS,
  SELECTION_SOURCES,
  STAGE_FLAGS,
  STORED_AUTO_MODE_PRESETS,
  SUBJECT_ENTITY_KINDS,
  SUBJECT_KINDS,
  TERMINAL_REASONS,
  type TerminalReason,
  UNAVAILABLE_REASONS,
} from "../vocabularies.js";
import { Brand, Closed, Digest, Id, Json, RelPath, StringEnum, Timestamp, when } from "./common.js";

/** Run identity: root_frame_id + branch_id + turn_id + execution_id. */
export const RunIdentity = Type.Object({ root_frame_id: Id, branch_id: Id, turn_id: Id, execution_id: Id }, Closed);
export type RunIdentity = Static<typeof RunIdentity>;

const Fingerprint = Type.String({ minLength: 1, maxLength: 256 });
const Actor = Type.Object({ actor_id: Id, session_id: Id, fingerprint: Fingerprint }, Closed);
const BudgetNumber = Type.Number({ exclusiveMinimum: 0 });
const Count = Type.Integer({ minimum: 0 });
const BudgetSet = Type.Object(
  Object.fromEntries(BUDGET_LIMITS.map((b) => [b, BudgetNumber])) as Record<BudgetLimit, typeof BudgetNumber>,
  Closed,
);
const Selection = Type.Object(
  {
    // A run stores `autonomous` normalized to `on` ("Product modes": on/autonomous is one preset).
    preset: StringEnum(STORED_AUTO_MODE_PRESETS),
    result_review_mode: StringEnum(RESULT_REVIEW_MODES),
    approvals_reviewer: StringEnum(APPROVALS_REVIEWERS),
    source: StringEnum(SELECTION_SOURCES),
    normalized: Type.Boolean({ description: "true when preset normalization changed an explicit sub-mode" }),
  },
  Closed,
);
const ArtifactVersion = Type.Object({ artifact_id: Id, version_id: Id, checksum: Digest }, Closed);

/** Auto Mode configuration as a deployment, project or frame states it (all fields optional, none empty). */
export const AutoModeConfigSchema = Type.Object(
  {
    preset: Type.Optional(StringEnum(AUTO_MODE_PRESETS)),
    result_review_mode: Type.Optional(StringEnum(RESULT_REVIEW_MODES)),
    approvals_reviewer: Type.Optional(StringEnum(APPROVALS_REVIEWERS)),
    stages: Type.Optional(
      Type.Object(Object.fromEntries(STAGE_FLAGS.map((s) => [s, Type.Optional(Type.Boolean())])), Closed),
    ),
    budgets: Type.Optional(
      Type.Object(Object.fromEntries(BUDGET_LIMITS.map((b) => [b, Type.Optional(BudgetNumber)])), Closed),
    ),
  },
  Closed,
);
export type AutoModeConfig = Static<typeof AutoModeConfigSchema>;

/** An actor and session that may never review a run's candidates (its Repair and promotion actors). */
const ExcludedActor = Type.Object(
  {
    actor_id: Type.String({ minLength: 1, maxLength: 256 }),
    session_id: Type.String({ minLength: 1, maxLength: 256 }),
  },
  Closed,
);

/**
 * The Reviewer independence an Auto Run freezes when it starts: the fingerprint rule, the
 * producer's fingerprint it is judged against, and the excluded actors (Repair, promotion) that
 * may never review. A later configuration change cannot move any of them.
 */
const Independence = Type.Object(
  {
    policy: StringEnum(INDEPENDENCE_POLICIES),
    producer_fingerprint: Fingerprint,
    /** Always written since issue 25; absent on runs recorded before (read as none). */
    excluded_actors: Type.Optional(Type.Array(ExcludedActor, { maxItems: 64 })),
  },
  Closed,
);

/** One Auto Run: identity, frozen selection, budgets and independence policy, current state. */
export const AutoRunSchema = Type.Object(
  {
    $$type: Brand("AutoRun"),
    version: Type.Literal(1),
    run: RunIdentity,
    selection: Selection,
    budgets: BudgetSet,
    independence: Independence,
    state: Type.Union([StringEnum(AUTO_RUN_STATES), Type.Null()], { description: "null before the first candidate" }),
    terminal_reason: Type.Union([StringEnum(TERMINAL_REASONS), Type.Null()]),
    candidate_id: Type.Union([Id, Type.Null()]),
    generation: Count,
    imported: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  Closed,
);
export type AutoRun = Static<typeof AutoRunSchema>;

/** An immutable candidate: the Engine completion and what it was bound to. */
export const CandidateSchema = Type.Object(
  {
    candidate_id: Id,
    run: RunIdentity,
    snapshot_digest: Digest,
    payload_digest: Digest,
    artifact_versions: Type.Array(ArtifactVersion),
    producer: Actor,
    review_status: StringEnum(["candidate", "verified", "unverified"]),
    parent_candidate_id: Type.Union([Id, Type.Null()]),
    created_at: Timestamp,
  },
  Closed,
);
export type Candidate = Static<typeof CandidateSchema>;

/**
 * The immutable Evidence Snapshot a candidate is reviewed against: one shape, `@asp/evidence`'s
 * frozen snapshot (`digest` over the refs sorted by name and the labels; every ref resolved when
 * it was frozen) bound to its run and candidate. `toEvidenceSnapshot` in `@asp/evidence` adapts a
 * frozen snapshot to it. A snapshot that could not be frozen completely is not a snapshot (that is
 * the safety boundary), so `complete` is always true.
 */
export const EvidenceSnapshotSchema = Type.Object(
  {
    digest: Digest,
    run: RunIdentity,
    candidate_id: Id,
    complete: Type.Literal(true),
    refs: Type.Array(
      Type.Object(
        { name: Type.String({ minLength: 1, maxLength: 256 }), kind: StringEnum(EVIDENCE_REF_KINDS), digest: Digest },
        Closed,
      ),
      { maxItems: 10_000 },
    ),
    labels: Type.Record(Type.String({ minLength: 1, maxLength: 256 }), Type.String({ maxLength: 4_096 }), Closed),
    created_at: Timestamp,
  },
  Closed,
);
export type EvidenceSnapshot = Static<typeof EvidenceSnapshotSchema>;

/**
 * How a verifier (a Reviewer or a Guardian) was launched, frozen into its audit record (issue 27
 * item 4, ADR 0011): the sandbox's reported mode and mechanism, the sandbox plugin that confines
 * it (its verified id and digest; `null` for a verifier the composing host runs itself), and
 * whether it could write the worktree. Evidence of assurance, never authority.
 */
export const VerifierLaunchSchema = Type.Object(
  {
    mode: Type.String({ minLength: 1, maxLength: 64 }),
    mechanism: Type.String({ maxLength: 500 }),
    sandbox: Type.Union([Type.Object({ id: Id, digest: Digest }, Closed), Type.Null()]),
    direct_write: Type.Boolean(),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
  },
  Closed,
);
export type VerifierLaunch = Static<typeof VerifierLaunchSchema>;

/** What an out-of-process verifier's boundary refused or saw go wrong (`@asp/ths` `VerifierAttempt`). */
export const VERIFIER_BOUNDARY_KINDS = [
  "port_denied",
  "network_denied",
  "failed",
  "exited",
  "timeout",
  "cancelled",
  "stream_fault",
] as const;

/**
 * The boundary events of one verifier call (a review attempt), frozen with it: how many there
 * were and the first few, each with its host time. Evidence of what the Reviewer tried, never a
 * verdict; bounded so a child that floods refused callbacks cannot grow the record.
 */
export const VerifierBoundarySchema = Type.Object(
  {
    count: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    first: Type.Array(
      Type.Object(
        { kind: StringEnum(VERIFIER_BOUNDARY_KINDS), detail: Type.String({ maxLength: 500 }), at: Timestamp },
        Closed,
      ),
      { minItems: 0, maxItems: 8 },
    ),
  },
  Closed,
);
export type VerifierBoundary = Static<typeof VerifierBoundarySchema>;

/**
 * One review run: how its Reviewer was selected, then its bounded attempts (at most one transient
 * retry). It binds the exact candidate payload and snapshot digests. A run whose selection found no
 * Reviewer satisfying the frozen independence policy (`reviewer_independence_unavailable`) has no
 * Reviewer, no attempt, no verdict and no finding: no inference call was admitted.
 */
export const ReviewRunSchema = Type.Object(
  {
    review_run_id: Id,
    run: RunIdentity,
    candidate_id: Id,
    candidate_payload_digest: Digest,
    snapshot_digest: Digest,
    selection: StringEnum(REVIEWER_SELECTIONS),
    selected_at: Timestamp,
    reviewer: Type.Union([
      Type.Object(
        {
          actor_id: Id,
          session_id: Id,
          fingerprint: Fingerprint,
          model: Type.Optional(Id),
          /** How the Reviewer's process was launched (absent: a Reviewer port the composing host supplied itself). */
          launch: Type.Optional(VerifierLaunchSchema),
        },
        Closed,
      ),
      Type.Null(),
    ]),
    attempts: Type.Array(
      Type.Object(
        {
          attempt: Type.Integer({ minimum: 1 }),
          outcome: StringEnum(ATTEMPT_OUTCOMES),
          started_at: Timestamp,
          completed_at: Type.Optional(Timestamp),
          missing_coverage: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
          /** What the Reviewer's sandbox boundary refused during this attempt (absent: nothing). */
          boundary: Type.Optional(VerifierBoundarySchema),
        },
        Closed,
      ),
      { maxItems: 2 },
    ),
    verdict: Type.Union([StringEnum(REVIEW_VERDICTS), Type.Null()]),
    finding_ids: Type.Array(Id, { uniqueItems: true }),
    audit_id: Id,
    audit_request_digest: Digest,
    assessment_digest: Type.Union([Digest, Type.Null()]),
  },
  {
    ...Closed,
    allOf: [
      when({ properties: { selection: { const: "selected" } } }, { properties: { reviewer: { type: "object" } } }),
      when(
        { properties: { selection: { const: "reviewer_independence_unavailable" } } },
        {
          properties: {
            reviewer: { type: "null" },
            attempts: { type: "array", maxItems: 0 },
            verdict: { type: "null" },
            finding_ids: { type: "array", maxItems: 0 },
            assessment_digest: { type: "null" },
          },
        },
      ),
    ],
  },
);
export type ReviewRun = Static<typeof ReviewRunSchema>;

/** The severities that make a finding material: an open one blocks Verified. */
export const MATERIAL_SEVERITIES = ["critical", "major"] as const satisfies ReadonlyArray<FindingSeverity>;

/** Whether a finding of this severity is material (critical and major are; minor and info are not). */
export function isMaterialSeverity(severity: FindingSeverity): boolean {
  return (MATERIAL_SEVERITIES as ReadonlyArray<string>).includes(severity);
}

/** A review finding: fingerprint is content only; finding_id is unique per review run. */
export const FindingSchema = Type.Object(
  {
    finding_id: Id,
    review_run_id: Id,
    fingerprint: Digest,
    severity: StringEnum(FINDING_SEVERITIES),
    material: Type.Boolean(),
    category: Type.String({ minLength: 1, maxLength: 128, pattern: "^[a-z][a-z0-9_.-]*$" }),
    claim: Type.String({ minLength: 1, maxLength: 10_000 }),
    evidence_refs: Type.Array(Id),
    status: StringEnum(FINDING_STATUSES),
  },
  {
    ...Closed,
    // `material` follows from severity: critical and major are material, minor and info are not.
    allOf: [
      when(
        { properties: { severity: { enum: [...MATERIAL_SEVERITIES] } } },
        { properties: { material: { const: true } } },
      ),
      when(
        { properties: { severity: { not: { enum: [...MATERIAL_SEVERITIES] } } } },
        { properties: { material: { const: false } } },
      ),
    ],
  },
);
export type Finding = Static<typeof FindingSchema>;

/**
 * A bounded Repair Run from a committed checkpoint. `mutation_set` is every file path the Repair
 * may write (empty: it may rewrite only the answer itself, the candidate payload); a proposed edit
 * outside it is never applied. `checkpoint.digest` is the frozen snapshot of the pre-repair state.
 */
export const RepairRunSchema = Type.Object(
  {
    repair_run_id: Id,
    run: RunIdentity,
    round: Type.Integer({ minimum: 1 }),
    from_candidate_id: Id,
    checkpoint: Type.Object({ checkpoint_id: Id, digest: Digest }, Closed),
    mutation_set: Type.Array(RelPath, { maxItems: 10_000, uniqueItems: true }),
    finding_ids: Type.Array(Id, { minItems: 1, uniqueItems: true }),
    actor: Actor,
    before_versions: Type.Array(ArtifactVersion),
    after_versions: Type.Array(ArtifactVersion),
    turns_used: Count,
    outcome: Type.Union([StringEnum(REPAIR_OUTCOMES), Type.Null()]),
    to_candidate_id: Type.Union([Id, Type.Null()]),
    /**
     * The host's hypothetical check of the repaired after-state (ADR 0012): its decision and
     * receipt. Only `allow` applies; any other rolls back to the checkpoint (`rejected`). Absent:
     * the host checked nothing (no check port, or the Repair ended before its plan was whole).
     * `plan_digest` names the exact plan that was judged: the files laid over the checkpoint's
     * base (by path and content digest) and the paths it removes. `repeat_of` names the earlier Repair Run of this run whose check denied this exact
     * plan: the host did not check it again, the round is rejected with that run's decision and
     * receipt, and the no-progress circuit opens.
     */
    check: Type.Optional(
      Type.Object(
        {
          decision: StringEnum(DECISIONS),
          receipt_id: Type.Union([Type.String({ minLength: 1, maxLength: 256 }), Type.Null()]),
          plan_digest: Type.Optional(Digest),
          repeat_of: Type.Optional(Id),
        },
        Closed,
      ),
    ),
  },
  Closed,
);
export type RepairRun = Static<typeof RepairRunSchema>;

/** A Guardian assessment bound to one exact action digest; an allow is one-shot. */
export const GuardianAssessmentSchema = Type.Object(
  {
    assessment_id: Id,
    run: RunIdentity,
    ask_decision_id: Id,
    action_digest: Digest,
    action_class: Id,
    decision: StringEnum(GUARDIAN_DECISIONS),
    risk: StringEnum(RISK_LEVELS),
    recoverable: Type.Boolean(),
    rationale: Type.String({ maxLength: 10_000 }),
    policy_version: Id,
    prompt_version: Id,
    model_version: Id,
    /** How the Guardian's process was launched (absent: a Guardian the composing host runs itself, e.g. the rules Guardian). */
    launch: Type.Optional(VerifierLaunchSchema),
    /** What the Guardian's sandbox boundary refused while it answered this ask (absent: nothing). */
    boundary: Type.Optional(VerifierBoundarySchema),
    audit_id: Id,
    audit_request_digest: Digest,
    assessment_digest: Digest,
    capability: Type.Union([
      Type.Object(
        {
          capability_id: Id,
          action_digest: Digest,
          max_uses: Type.Literal(1),
          generation: Count,
          expires_at: Timestamp,
        },
        Closed,
      ),
      Type.Null(),
    ]),
    decided_at: Timestamp,
  },
  {
    ...Closed,
    // A deny never carries a capability; Guardian never creates standing allows.
    allOf: [when({ properties: { decision: { const: "deny" } } }, { properties: { capability: { type: "null" } } })],
  },
);
export type GuardianAssessment = Static<typeof GuardianAssessmentSchema>;

/** The ledger's counters ({@link BUDGET_COUNTERS}): one set of names for the meter and the ledger. */
export const BudgetCounters = Type.Object(
  Object.fromEntries(BUDGET_COUNTERS.map((c) => [c, Count])) as Record<BudgetCounter, typeof Count>,
  Closed,
);
export type BudgetCounters = Static<typeof BudgetCounters>;

// Counts per finding fingerprint / per action digest (the repeated-finding and same-action limits).
const CountsByDigest = Type.Record(Type.String({ pattern: "^sha256:[0-9a-f]{64}$" }), Count, {
  ...Closed,
  maxProperties: 10_000,
});
const Circuit = StringEnum(["closed", "open"]);

/**
 * Budget ledger of a run, persisted with it so no limit replenishes itself on reopen: the frozen
 * limits; the wall-time origin and the pending Guardian question (deadlines, compared against a
 * clock); the counters and what the per-candidate / per-round ones belong to; the per-fingerprint
 * and per-action-digest counts; the last 50 Guardian decisions; the durable circuits.
 */
export const BudgetLedgerSchema = Type.Object(
  {
    run: RunIdentity,
    limits: BudgetSet,
    started_at: Timestamp,
    initial_turn_tokens: Type.Union([Count, Type.Null()]),
    /** The candidate `review_attempts` counts for, and the repair round `repair_turns` counts in. */
    scope: Type.Object({ candidate_id: Type.Union([Id, Type.Null()]), repair_round: Count }, Closed),
    consumed: BudgetCounters,
    repeated_findings: CountsByDigest,
    same_action_no_delta: CountsByDigest,
    guardian_pending: Type.Union([Type.Object({ action_digest: Digest, asked_at: Timestamp }, Closed), Type.Null()]),
    guardian_window: Type.Array(StringEnum(GUARDIAN_DECISIONS), { maxItems: 50 }),
    circuits: Type.Object({ no_progress: Circuit, guardian_denial: Circuit }, Closed),
    updated_at: Timestamp,
  },
  Closed,
);
export type BudgetLedger = Static<typeof BudgetLedgerSchema>;

// ------------------------------------------------------------------ terminal records

/**
 * Each terminal's exact user-truth label (the contract's "User truth" lines and its table of
 * terminal reasons; `user_cancelled` and `agent_failed` per ADR 0005). `completed_with_issues`
 * names N, the number of unresolved findings: see {@link terminalUserTruth}.
 */
export const TERMINAL_USER_TRUTH = Object.freeze({
  verified: "Verified",
  completed_with_issues: "Completed · unverified · N unresolved issues",
  review_unavailable: "Unavailable · not verified",
  blocked_by_guardian: "Blocked · Guardian",
  policy_requires_explicit_setup: "Blocked · Policy requires explicit setup",
  budget_exhausted: "Paused · Budget exhausted",
  safe_rollback_unavailable: "Blocked · Safe rollback unavailable",
  outcome_unknown: "Needs review · Outcome unknown",
  loop_detected: "Paused/Blocked · Loop detected",
  safety_boundary: "Failed · Safety boundary",
  user_cancelled: "Stopped · Cancelled by user",
  agent_failed: "Failed · Agent error",
} as const satisfies Record<AutoRunTerminalState | TerminalReason, string>);

/** The user truth of the non-terminal `candidate` phase. */
export const CANDIDATE_USER_TRUTH = "Candidate · provisional / not verified";

/**
 * The exact user-truth label of a terminal record (pure).
 *
 * @example
 * ```ts
 * terminalUserTruth({ state: "completed_with_issues", terminal_reason: null, unresolved_finding_ids: ["f-1", "f-2"] });
 * // "Completed · unverified · 2 unresolved issues"
 * ```
 */
export function terminalUserTruth(
  record: Pick<TerminalRecord, "state" | "terminal_reason" | "unresolved_finding_ids">,
): string {
  if (record.state === "completed_with_issues") {
    return `Completed · unverified · ${record.unresolved_finding_ids.length} unresolved issues`;
  }
  const key = record.state ?? record.terminal_reason;
  return TERMINAL_USER_TRUTH[key as keyof typeof TERMINAL_USER_TRUTH];
}

const Null = Type.Null();
const MaybeId = Type.Union([Id, Null]);
const FindingIds = (options: { minItems?: number; maxItems?: number } = {}) =>
  Type.Array(Id, { uniqueItems: true, ...options });

// The fields every terminal record has; each variant pins what its state requires and forbids.
function terminal<P extends TProperties>(props: P) {
  return Type.Object(
    {
      run: RunIdentity,
      counters: BudgetCounters,
      event_id: Id,
      committed_at: Timestamp,
      ...props,
    },
    Closed,
  );
}

function reasonRecord<R extends TerminalReason>(reason: R) {
  return terminal({
    state: Null,
    terminal_reason: Type.Literal(reason),
    stop_reason: Null,
    unavailable_reason: Null,
    candidate_id: MaybeId,
    unresolved_finding_ids: FindingIds(),
    exhausted_limit: reason === "budget_exhausted" ? StringEnum(EXHAUSTED_LIMITS) : Null,
    guardian_record_id: Null,
    user_truth: Type.Literal(TERMINAL_USER_TRUTH[reason]),
  });
}

/**
 * The committed terminal fact of a run: one of the four five-state terminals, or a terminal
 * reason outside them. Each variant states its required and forbidden fields and its exact
 * user-truth label, so a combination the contract forbids does not validate:
 *
 * - `verified`: the candidate; no stop, unavailable or terminal reason; no unresolved finding.
 * - `completed_with_issues`: the preserved best candidate, a stop reason (`review_only`,
 *   `budget_exhausted` naming the exhausted limit, or `loop_detected`) and at least one unresolved
 *   finding; its label names their number (checked by {@link checkTerminalRecord}).
 * - `review_unavailable`: the candidate and an unavailable reason, nothing else.
 * - `blocked_by_guardian`: the durable Guardian assessment or failure record; stop reason only
 *   `loop_detected`.
 * - a terminal reason: no state, stop or unavailable reason; `budget_exhausted` names its limit.
 */
export const TerminalRecordSchema = Type.Union([
  terminal({
    state: Type.Literal("verified"),
    terminal_reason: Null,
    stop_reason: Null,
    unavailable_reason: Null,
    candidate_id: Id,
    unresolved_finding_ids: FindingIds({ maxItems: 0 }),
    exhausted_limit: Null,
    guardian_record_id: Null,
    user_truth: Type.Literal(TERMINAL_USER_TRUTH.verified),
  }),
  terminal({
    state: Type.Literal("completed_with_issues"),
    terminal_reason: Null,
    stop_reason: Type.Union([Type.Literal("review_only"), Type.Literal("loop_detected")]),
    unavailable_reason: Null,
    candidate_id: Id,
    unresolved_finding_ids: FindingIds({ minItems: 1 }),
    exhausted_limit: Null,
    guardian_record_id: Null,
    user_truth: Type.String({ pattern: "^Completed · unverified · [1-9][0-9]* unresolved issues$" }),
  }),
  terminal({
    state: Type.Literal("completed_with_issues"),
    terminal_reason: Null,
    stop_reason: Type.Literal("budget_exhausted"),
    unavailable_reason: Null,
    candidate_id: Id,
    unresolved_finding_ids: FindingIds({ minItems: 1 }),
    exhausted_limit: StringEnum(BUDGET_LIMITS),
    guardian_record_id: Null,
    user_truth: Type.String({ pattern: "^Completed · unverified · [1-9][0-9]* unresolved issues$" }),
  }),
  terminal({
    state: Type.Literal("review_unavailable"),
    terminal_reason: Null,
    stop_reason: Null,
    unavailable_reason: StringEnum(UNAVAILABLE_REASONS),
    candidate_id: Id,
    unresolved_finding_ids: FindingIds({ maxItems: 0 }),
    exhausted_limit: Null,
    guardian_record_id: Null,
    user_truth: Type.Literal(TERMINAL_USER_TRUTH.review_unavailable),
  }),
  terminal({
    state: Type.Literal("blocked_by_guardian"),
    terminal_reason: Null,
    stop_reason: Type.Union([Type.Literal("loop_detected"), Null]),
    unavailable_reason: Null,
    candidate_id: MaybeId,
    unresolved_finding_ids: FindingIds({ maxItems: 0 }),
    exhausted_limit: Null,
    guardian_record_id: Id,
    user_truth: Type.Literal(TERMINAL_USER_TRUTH.blocked_by_guardian),
  }),
  ...TERMINAL_REASONS.map(reasonRecord),
]);
export type TerminalRecord = Static<typeof TerminalRecordSchema>;

/** A problem {@link checkTerminalRecord} found beyond the schema. */
export interface TerminalRecordProblem {
  readonly expected: string;
  readonly actual: string;
}

/**
 * The one cross-field rule of a schema-valid terminal record that JSON Schema cannot state: its
 * `user_truth` is exactly {@link terminalUserTruth} (for `completed_with_issues`, N is the number of
 * unresolved findings). Returns the problem, or null. Pure.
 */
export function checkTerminalRecord(record: TerminalRecord): TerminalRecordProblem | null {
  const expected = terminalUserTruth(record);
  return record.user_truth === expected ? null : { expected, actual: record.user_truth };
}

// ------------------------------------------------------------------ the seven events

function event<const T extends string, P extends TProperties>(type: T, props: P, options: object = {}) {
  return Type.Object(
    { event_id: Id, type: Type.Literal(type), run: RunIdentity, committed_at: Timestamp, ...props },
    { ...Closed, ...options },
  ) as TObject<
    {
      event_id: typeof Id;
      type: ReturnType<typeof Type.Literal<T>>;
      run: typeof RunIdentity;
      committed_at: typeof Timestamp;
    } & P
  >;
}

// The only two valid (subject_kind, subject_entity_kind) pairings.
const SubjectPairing = {
  oneOf: [
    {
      properties: {
        subject_kind: { const: "result_review" },
        subject_entity_kind: { const: "candidate_evidence_snapshot" },
      },
    },
    { properties: { subject_kind: { const: "permission_review" }, subject_entity_kind: { const: "approval_action" } } },
  ],
};
const AuditSubject = {
  audit_id: Id,
  subject_kind: StringEnum(SUBJECT_KINDS),
  subject_entity_kind: StringEnum(SUBJECT_ENTITY_KINDS),
  subject_id: Id,
  attempt: Type.Integer({ minimum: 1 }),
  audit_request_digest: Digest,
};

export const AutoRunStartedEventSchema = event("auto_run_started", { selection: Selection, budgets: BudgetSet });
export const CandidateReadyEventSchema = event("candidate_ready", { candidate_id: Id, snapshot_digest: Digest });
export const AutoAuditStartedEventSchema = event("auto_audit_started", AuditSubject, { allOf: [SubjectPairing] });
export const AutoAuditCompletedEventSchema = event(
  "auto_audit_completed",
  { ...AuditSubject, assessment: Json, assessment_digest: Digest },
  { allOf: [SubjectPairing] },
);
export const RepairStartedEventSchema = event("repair_started", {
  repair_run_id: Id,
  round: Type.Integer({ minimum: 1 }),
  from_candidate_id: Id,
});
export const RepairCompletedEventSchema = event("repair_completed", {
  repair_run_id: Id,
  outcome: StringEnum(REPAIR_OUTCOMES),
  to_candidate_id: Type.Union([Id, Type.Null()]),
});
export const AutoRunTerminalEventSchema = event("auto_run_terminal", { terminal: TerminalRecordSchema });

export type AutoRunStartedEvent = Static<typeof AutoRunStartedEventSchema>;
export type CandidateReadyEvent = Static<typeof CandidateReadyEventSchema>;
export type AutoAuditStartedEvent = Static<typeof AutoAuditStartedEventSchema>;
export type AutoAuditCompletedEvent = Static<typeof AutoAuditCompletedEventSchema>;
export type RepairStartedEvent = Static<typeof RepairStartedEventSchema>;
export type RepairCompletedEvent = Static<typeof RepairCompletedEventSchema>;
export type AutoRunTerminalEvent = Static<typeof AutoRunTerminalEventSchema>;
