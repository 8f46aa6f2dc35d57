import { type Static, type TObject, type TProperties, Type } from "@sinclair/typebox";
import {
  APPROVALS_REVIEWERS,
  ATTEMPT_OUTCOMES,
  AUTO_MODE_PRESETS,
  AUTO_RUN_STATES,
  AUTO_RUN_TERMINAL_STATES,
  BUDGET_LIMITS,
  FINDING_SEVERITIES,
  FINDING_STATUSES,
  GUARDIAN_DECISIONS,
  REPAIR_OUTCOMES,
  RESULT_REVIEW_MODES,
  REVIEW_VERDICTS,
  RISK_LEVELS,
  SELECTION_SOURCES,
  STAGE_FLAGS,
  STOP_REASONS,
  SUBJECT_ENTITY_KINDS,
  SUBJECT_KINDS,
  TERMINAL_REASONS,
  UNAVAILABLE_REASONS,
} from "../vocabularies.js";
import { Brand, Closed, Digest, Id, Json, RelPath, StringEnum, Timestamp, when } from "./common.js";

/** Run identity: root_frame_id + branch_id + turn_id + execution_id. */
export const RunIdentity = Type.Object({ root_frame_id: Id, branch_id: Id, turn_id: Id, execution_id: Id }, Closed);
export type RunIdentity = Static<typeof RunIdentity>;

const Actor = Type.Object(
  { actor_id: Id, session_id: Id, fingerprint: Type.String({ minLength: 1, maxLength: 256 }) },
  Closed,
);
const BudgetNumber = Type.Number({ exclusiveMinimum: 0 });
const Count = Type.Integer({ minimum: 0 });
const BudgetSet = Type.Object(Object.fromEntries(BUDGET_LIMITS.map((b) => [b, BudgetNumber])), Closed);
const Selection = Type.Object(
  {
    preset: StringEnum(AUTO_MODE_PRESETS),
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

/** One Auto Run: identity, frozen selection and budgets, current state. */
export const AutoRunSchema = Type.Object(
  {
    $$type: Brand("AutoRun"),
    version: Type.Literal(1),
    run: RunIdentity,
    selection: Selection,
    budgets: BudgetSet,
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

/** The immutable Evidence Snapshot a candidate is reviewed against. */
export const EvidenceSnapshotSchema = Type.Object(
  {
    snapshot_id: Id,
    digest: Digest,
    run: RunIdentity,
    candidate_id: Id,
    complete: Type.Boolean(),
    tree: Digest,
    refs: Type.Array(Type.Object({ ref_id: Id, kind: Id, digest: Digest }, Closed)),
    created_at: Timestamp,
  },
  Closed,
);
export type EvidenceSnapshot = Static<typeof EvidenceSnapshotSchema>;

/** One review run with its bounded attempts (at most one transient retry). */
export const ReviewRunSchema = Type.Object(
  {
    review_run_id: Id,
    run: RunIdentity,
    candidate_id: Id,
    snapshot_digest: Digest,
    reviewer: Type.Object(
      {
        actor_id: Id,
        session_id: Id,
        fingerprint: Type.String({ minLength: 1, maxLength: 256 }),
        model: Type.Optional(Id),
      },
      Closed,
    ),
    attempts: Type.Array(
      Type.Object(
        {
          attempt: Type.Integer({ minimum: 1 }),
          outcome: StringEnum(ATTEMPT_OUTCOMES),
          started_at: Timestamp,
          completed_at: Type.Optional(Timestamp),
          missing_coverage: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
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
  Closed,
);
export type ReviewRun = Static<typeof ReviewRunSchema>;

/** A review finding: fingerprint is content only; finding_id is unique per review run. */
export const FindingSchema = Type.Object(
  {
    finding_id: Id,
    review_run_id: Id,
    fingerprint: Digest,
    severity: StringEnum(FINDING_SEVERITIES),
    material: Type.Boolean(),
    category: Id,
    claim: Type.String({ minLength: 1, maxLength: 10_000 }),
    evidence_refs: Type.Array(Id),
    status: StringEnum(FINDING_STATUSES),
  },
  Closed,
);
export type Finding = Static<typeof FindingSchema>;

/** A bounded Repair Run from a committed checkpoint. */
export const RepairRunSchema = Type.Object(
  {
    repair_run_id: Id,
    run: RunIdentity,
    round: Type.Integer({ minimum: 1 }),
    from_candidate_id: Id,
    checkpoint: Type.Object({ checkpoint_id: Id, digest: Digest }, Closed),
    mutation_set: Type.Array(RelPath, { minItems: 1, uniqueItems: true }),
    finding_ids: Type.Array(Id, { minItems: 1, uniqueItems: true }),
    actor: Actor,
    before_versions: Type.Array(ArtifactVersion),
    after_versions: Type.Array(ArtifactVersion),
    turns_used: Count,
    outcome: Type.Union([StringEnum(REPAIR_OUTCOMES), Type.Null()]),
    to_candidate_id: Type.Union([Id, Type.Null()]),
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

/** Budget ledger of a run: frozen limits, consumed counters, circuits. */
export const BudgetLedgerSchema = Type.Object(
  {
    run: RunIdentity,
    limits: BudgetSet,
    consumed: Type.Object(
      {
        review_rounds: Count,
        repair_rounds: Count,
        repair_turns: Count,
        extra_cells: Count,
        wall_time_s: Type.Number({ minimum: 0 }),
        extra_tokens: Count,
        repeated_findings: Count,
        same_action_no_delta: Count,
        no_progress_turns: Count,
        guardian_consecutive_denials: Count,
      },
      Closed,
    ),
    guardian_window: Type.Array(StringEnum(GUARDIAN_DECISIONS), { maxItems: 50 }),
    circuits: Type.Object(
      { no_progress: StringEnum(["closed", "open"]), guardian_denial: StringEnum(["closed", "open"]) },
      Closed,
    ),
    updated_at: Timestamp,
  },
  Closed,
);
export type BudgetLedger = Static<typeof BudgetLedgerSchema>;

/** The committed terminal fact of a run: a five-state terminal, or a non-Guardian terminal reason. */
export const TerminalRecordSchema = Type.Object(
  {
    run: RunIdentity,
    state: Type.Union([StringEnum(AUTO_RUN_TERMINAL_STATES), Type.Null()]),
    terminal_reason: Type.Union([StringEnum(TERMINAL_REASONS), Type.Null()]),
    stop_reason: Type.Union([StringEnum(STOP_REASONS), Type.Null()]),
    unavailable_reason: Type.Union([StringEnum(UNAVAILABLE_REASONS), Type.Null()]),
    candidate_id: Type.Union([Id, Type.Null()]),
    counters: Type.Record(Type.String({ pattern: "^[a-z_]+$" }), Type.Number({ minimum: 0 })),
    user_truth: Type.String({ minLength: 1, maxLength: 200 }),
    event_id: Id,
    committed_at: Timestamp,
  },
  {
    ...Closed,
    allOf: [
      // Exactly one of state / terminal_reason.
      {
        oneOf: [
          { properties: { state: { type: "string" }, terminal_reason: { type: "null" } } },
          { properties: { state: { type: "null" }, terminal_reason: { type: "string" } } },
        ],
      },
      when(
        { properties: { state: { const: "review_unavailable" } } },
        { properties: { unavailable_reason: { type: "string" } } },
      ),
      when({ properties: { state: { const: "verified" } } }, { properties: { candidate_id: { type: "string" } } }),
    ],
  },
);
export type TerminalRecord = Static<typeof TerminalRecordSchema>;

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
