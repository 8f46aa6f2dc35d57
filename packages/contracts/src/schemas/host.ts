import { type Static, Type } from "@sinclair/typebox";
import {
  APPLY_OUTCOMES,
  ASSESSMENT_STATUSES,
  CALL_SITES,
  CAPABILITY_FAMILIES,
  DECISIONS,
  DISPOSITIONS,
  FAIL_CLASSES,
  PERMISSION_OUTCOMES,
  PLUGIN_CAPABILITIES,
  PLUGIN_KINDS,
  PROVIDER_RUN_OUTCOMES,
  PROVIDER_STATES,
} from "../vocabularies.js";
import {
  AbsPath,
  AssuranceBlock,
  AssuranceModeT,
  AuthorityEvidence,
  Brand,
  CallSiteMap,
  CapabilityFamilyT,
  Closed,
  Coverage,
  DegradationReasonT,
  DegradedEntry,
  DiagnosticCode,
  DiagnosticSource,
  Digest,
  Id,
  Json,
  PluginId,
  ProviderRef,
  ProviderStateT,
  RelPath,
  requires,
  SemVer,
  SemVerRange,
  SeverityT,
  StringEnum,
  Timestamp,
  TransactionGuaranteeT,
  ValidAsOf,
  when,
} from "./common.js";

const CallSiteT = StringEnum(CALL_SITES);
const DecisionT = StringEnum(DECISIONS);

// ------------------------------------------------------------------ provider-owned shapes

const Position = Type.Object({ line: Type.Integer({ minimum: 0 }), character: Type.Integer({ minimum: 0 }) }, Closed);

/** A provider-reported diagnostic. Its code must be namespaced under a declared source (host §4). */
export const DiagnosticSchema = Type.Object(
  {
    source: DiagnosticSource,
    code: DiagnosticCode,
    severity: SeverityT,
    message: Type.String({ minLength: 1, maxLength: 10_000 }),
    range: Type.Optional(Type.Object({ path: RelPath, start: Position, end: Position }, Closed)),
    fingerprint: Type.String({
      minLength: 1,
      maxLength: 256,
      description: "stable, content-based identity within this diagnosticSource",
    }),
    codeDescription: Type.Optional(Type.Object({ href: Type.String({ format: "uri" }) }, Closed)),
    help: Type.Optional(Type.String({ maxLength: 10_000 })),
    fix: Type.Optional(
      Type.Object(
        { description: Type.String({ minLength: 1, maxLength: 2000 }), proposalId: Type.Optional(Id) },
        Closed,
      ),
    ),
    tags: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 32 })),
    data: Type.Optional(Json),
  },
  Closed,
);
export type Diagnostic = Static<typeof DiagnosticSchema>;

/**
 * The tool that produced a provider's answer, as the provider reports it: e.g. the TypeScript
 * compiler it chose for the project (`{ name: "typescript", version: "5.9.3", selectedBy:
 * "pnpm-lock.yaml pins 5.9.3" }`). The provider's own statement, bound to its signed digest;
 * the host copies it into the receipt's provenance.
 */
export const ToolRefSchema = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 128 }),
    version: Type.String({ minLength: 1, maxLength: 64 }),
    selectedBy: Type.Optional(Type.String({ maxLength: 1024, description: "why this tool and version answered" })),
  },
  Closed,
);
export type ToolRef = Static<typeof ToolRefSchema>;

/**
 * What a check provider returns for `check/assess`: provider-owned fields only. A decision,
 * verdict, disposition, grant, assurance mode or transaction guarantee anywhere makes it
 * malformed (see `findHostOwnedFields`).
 */
export const AssessmentSchema = Type.Object(
  {
    provider: ProviderRef,
    requestId: Id,
    status: StringEnum(ASSESSMENT_STATUSES),
    validAsOf: ValidAsOf,
    diagnostics: Type.Array(DiagnosticSchema, { maxItems: 10_000 }),
    coverage: Type.Optional(
      Type.Object(
        {
          sources: Type.Array(DiagnosticSource, { uniqueItems: true }),
          paths: Type.Optional(Type.Integer({ minimum: 0 })),
          missing: Type.Optional(Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 10_000 })),
          /**
           * The provider's finding cap was reached: `total` findings found, the first `reported`
           * in `diagnostics`; the files whose findings were cut are in `missing`. Such an answer
           * is never complete.
           */
          truncated: Type.Optional(
            Type.Object(
              { total: Type.Integer({ minimum: 0 }), reported: Type.Integer({ minimum: 0 }) },
              { ...Closed, description: "findings found and findings reported when a cap cut the list" },
            ),
          ),
        },
        Closed,
      ),
    ),
    error: Type.Optional(
      Type.Object(
        { code: Type.String({ minLength: 1, maxLength: 128 }), message: Type.String({ maxLength: 10_000 }) },
        Closed,
      ),
    ),
    metrics: Type.Optional(Type.Object({ durationMs: Type.Optional(Type.Number({ minimum: 0 })) }, Closed)),
    tool: Type.Optional(ToolRefSchema),
  },
  {
    ...Closed,
    allOf: [
      // status "error" must say what failed; "unsupported" is a capability gap, not an error.
      when({ properties: { status: { const: "error" } } }, requires("error")),
    ],
  },
);
export type Assessment = Static<typeof AssessmentSchema>;

const Precondition = Type.Object(
  { path: RelPath, blob: Type.Union([Digest, Type.Literal("absent")]) },
  { ...Closed, description: "the blob the path must hold (or `absent`) for the operation to apply" },
);

const EditOperation = Type.Union([
  Type.Object(
    {
      op: Type.Literal("replace"),
      path: RelPath,
      oldText: Type.String(),
      newText: Type.String(),
      occurrence: Type.Optional(Type.Integer({ minimum: 1 })),
    },
    Closed,
  ),
  Type.Object(
    {
      op: Type.Literal("multi_replace"),
      path: RelPath,
      edits: Type.Array(Type.Object({ oldText: Type.String(), newText: Type.String() }, Closed), {
        minItems: 1,
        maxItems: 1000,
      }),
    },
    Closed,
  ),
  Type.Object(
    {
      op: Type.Literal("search_replace"),
      path: RelPath,
      pattern: Type.String({ minLength: 1, maxLength: 10_000 }),
      flags: Type.Optional(Type.String({ pattern: "^[gimsuy]*$" })),
      replacement: Type.String(),
    },
    Closed,
  ),
  Type.Object(
    {
      op: Type.Literal("create"),
      path: RelPath,
      content: Type.String(),
      encoding: Type.Optional(StringEnum(["utf8", "base64"])),
      mode: Type.Optional(StringEnum(["100644", "100755"])),
    },
    Closed,
  ),
  Type.Object({ op: Type.Literal("rename"), from: RelPath, to: RelPath }, Closed),
  Type.Object({ op: Type.Literal("delete"), path: RelPath }, Closed),
]);

/** A structured edit proposal bound to a baseline, with per-file preconditions (host §6). */
export const EditPlanSchema = Type.Object(
  {
    proposalId: Id,
    provider: ProviderRef,
    validAsOf: ValidAsOf,
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
    preconditions: Type.Array(Precondition, { minItems: 1, maxItems: 10_000 }),
    operations: Type.Array(EditOperation, { minItems: 1, maxItems: 10_000 }),
  },
  Closed,
);
export type EditPlan = Static<typeof EditPlanSchema>;

// ------------------------------------------------------------------ host-produced shapes

/** One finding of a decision envelope, stamped by the host. */
const EnvelopeFinding = Type.Object(
  {
    diagnostic: DiagnosticSchema,
    provider: ProviderRef,
    provenance: Type.Object(
      { source: DiagnosticSource, authenticated: Type.Literal(true, { description: "host-authenticated provenance" }) },
      Closed,
    ),
    disposition: StringEnum(DISPOSITIONS),
    effectiveSeverity: SeverityT,
    severityNote: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
    nextStep: Type.Optional(Type.String({ minLength: 1, maxLength: 4000 })),
    grant: Type.Union([Type.Object({ requirement: Id, callSite: CallSiteT }, Closed), Type.Null()]),
  },
  {
    ...Closed,
    // host §1: every gating finding has a nextStep.
    allOf: [when({ properties: { disposition: { const: "gating" } } }, requires("nextStep"))],
  },
);

/** The Decision Envelope (legacy name "verdict"): the host's decision as surfaced to a harness or user. */
export const VerdictSchema = Type.Object(
  {
    $$type: Brand("DecisionEnvelope"),
    version: Type.Literal(1),
    decisionId: Id,
    decision: DecisionT,
    callSite: CallSiteT,
    policyDigest: Digest,
    baseline: Digest,
    changeset: Type.Union([Digest, Type.Null()]),
    findings: Type.Array(EnvelopeFinding),
    coverage: Coverage,
    authority: Type.Array(AuthorityEvidence),
    assurance: AssuranceBlock,
    receipt: Type.Optional(Type.Object({ id: Id, location: Type.String({ minLength: 1 }) }, Closed)),
    /**
     * The dependency environment the providers were given (absent: none): its tree id (also in
     * the receipt), the roots it holds and how many files and links they hold.
     */
    environment: Type.Optional(
      Type.Object(
        {
          tree: Digest,
          roots: Type.Array(RelPath, { minItems: 1, uniqueItems: true, maxItems: 10_000 }),
          files: Type.Integer({ minimum: 0 }),
        },
        Closed,
      ),
    ),
    /**
     * What the judged worktree left out (THREAT-MODEL invariant 11; absent: nothing): untracked
     * files and folders an ignore rule, an exclude or a nested repository kept out (never a
     * tracked path), and the tracked submodules, whose content is another repository's.
     */
    judged: Type.Optional(
      Type.Object(
        {
          leftOut: Type.Integer({ minimum: 0 }),
          submodules: Type.Array(RelPath, { maxItems: 100_000 }),
        },
        Closed,
      ),
    ),
    decidedAt: Timestamp,
  },
  Closed,
);
export type DecisionEnvelope = Static<typeof VerdictSchema>;

/** assurance.schema.json: the achieved assurance report and its three vocabularies. */
export const AssuranceSchema = Type.Object(
  {
    mode: AssuranceModeT,
    transactionGuarantee: TransactionGuaranteeT,
    directWriteRisk: Type.Boolean(),
    degradationReasons: Type.Optional(Type.Array(DegradationReasonT, { uniqueItems: true })),
  },
  Closed,
);
export type AssuranceReport = Static<typeof AssuranceSchema>;

/** Durable audit receipt for one decision. */
export const AuditReceiptSchema = Type.Object(
  {
    $$type: Brand("AuditReceipt"),
    version: Type.Literal(1),
    receiptId: Id,
    decisionId: Id,
    decision: DecisionT,
    callSite: CallSiteT,
    policyDigest: Digest,
    baseline: Digest,
    changeset: Type.Union([Digest, Type.Null()]),
    /** The dependency environment tree the providers were given (absent: none declared). */
    environment: Type.Optional(Digest),
    validAsOf: Type.Array(Type.Object({ provider: Id, validAsOf: ValidAsOf }, Closed)),
    coverage: Coverage,
    provenance: Type.Array(
      Type.Object(
        {
          provider: ProviderRef,
          digest: Digest,
          sources: Type.Array(DiagnosticSource),
          /** The tool the provider reported answering with (its assessment's `tool`). */
          tool: Type.Optional(ToolRefSchema),
        },
        Closed,
      ),
    ),
    authority: Type.Array(AuthorityEvidence),
    assurance: AssuranceBlock,
    envelopeDigest: Digest,
    failOpens: Type.Array(
      Type.Object({ provider: Id, failClass: StringEnum(FAIL_CLASSES), callSite: CallSiteT }, Closed),
    ),
    decidedAt: Timestamp,
  },
  Closed,
);
export type AuditReceipt = Static<typeof AuditReceiptSchema>;

/** What happened to one touched path during a mediated apply (host §6). */
const ApplyFileOutcome = Type.Object(
  {
    path: RelPath,
    /** The blob the path held before (null: absent). */
    before: Type.Union([Digest, Type.Null()]),
    /** The blob the apply meant it to hold (null: deleted). */
    after: Type.Union([Digest, Type.Null()]),
    outcome: StringEnum(["written", "deleted", "unchanged", "restored", "failed"]),
  },
  Closed,
);

/**
 * Receipt of a mediated apply (host §6), appended to the fact log before the result is returned.
 * Not applied means no baseline after. The validation decision is referenced by id, receipt id
 * and envelope digest: the envelope itself is the decision record in the log.
 */
export const ApplyReceiptSchema = Type.Object(
  {
    $$type: Brand("ApplyReceipt"),
    version: Type.Literal(1),
    proposalId: Id,
    /** The repository's real path. */
    repo: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    applied: Type.Boolean(),
    baselineBefore: Digest,
    baselineAfter: Type.Union([Digest, Type.Null()]),
    /** The hypothetical after-tree the checks ran on (null when validation never got that far). */
    hypotheticalAfter: Type.Optional(Type.Union([Digest, Type.Null()])),
    /** The validation decision; null when the plan was refused before any check ran. */
    decision: Type.Union([DecisionT, Type.Null()]),
    validation: Type.Optional(
      Type.Union([
        Type.Object(
          { decisionId: Id, receiptId: Id, envelopeDigest: Digest, callSite: CallSiteT },
          { ...Closed, description: "the decision over the hypothetical after-state" },
        ),
        Type.Null(),
      ]),
    ),
    policyDigest: Digest,
    provenance: Type.Object({ provider: ProviderRef, digest: Digest }, Closed),
    authority: AuthorityEvidence,
    assuranceMode: AssuranceModeT,
    transactionGuarantee: TransactionGuaranteeT,
    directWriteRisk: Type.Boolean(),
    sandbox: Type.Optional(Type.Union([Type.Object({ id: Id, digest: Digest }, Closed), Type.Null()])),
    files: Type.Optional(Type.Array(ApplyFileOutcome, { maxItems: 10_000 })),
    /** How many validate-and-apply rounds ran (re-proposals after a moved baseline count). */
    attempts: Type.Optional(Type.Integer({ minimum: 0 })),
    /** Touched paths that moved since the proposal and were 3-way merged. */
    mergedPaths: Type.Optional(Type.Array(RelPath, { maxItems: 10_000 })),
    /** Why nothing (or not all) was applied: a stable `ASP_APPLY_*` code and a bounded detail. */
    rejection: Type.Optional(
      Type.Object(
        {
          code: Type.String({ pattern: "^ASP_APPLY_[A-Z_]+$", maxLength: 128 }),
          detail: Type.String({ maxLength: 4000 }),
        },
        Closed,
      ),
    ),
    reason: Type.Optional(Type.String({ maxLength: 4000 })),
    appliedAt: Timestamp,
  },
  {
    ...Closed,
    allOf: [
      when({ properties: { applied: { const: false } } }, { properties: { baselineAfter: { type: "null" } } }),
      when({ properties: { applied: { const: true } } }, { properties: { decision: { const: "allow" } } }),
      when({ properties: { applied: { const: true } } }, { not: requires("rejection") }),
    ],
  },
);
export type ApplyReceipt = Static<typeof ApplyReceiptSchema>;

/** Installed provider launch configuration: trusted configuration only, never repository content (host §2). */
export const ProviderManifestSchema = Type.Object(
  {
    id: Id,
    version: SemVer,
    digest: Digest,
    executable: AbsPath,
    args: Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 256 }),
    cwd: AbsPath,
    // The folder holding the provider's code: the host measures its tree digest (the plugin
    // digest) before each launch and honours grants only when it equals `digest`.
    root: Type.Optional(AbsPath),
    capabilities: Type.Array(CapabilityFamilyT, { minItems: 1, uniqueItems: true }),
    diagnosticSources: Type.Array(DiagnosticSource, { uniqueItems: true }),
    protocolVersion: Type.String({ pattern: "^\\d+\\.\\d+$" }),
    envPassthrough: Type.Optional(Type.Array(Type.String({ pattern: "^[A-Z_][A-Z0-9_]*$" }), { uniqueItems: true })),
  },
  Closed,
);
export type ProviderManifest = Static<typeof ProviderManifestSchema>;

/** A plugin's own manifest (`asp-plugin.json`), covered by its digest and signature. */
export const PluginManifestSchema = Type.Object(
  {
    id: PluginId,
    version: SemVer,
    kind: StringEnum(PLUGIN_KINDS),
    entry: RelPath,
    capabilities: Type.Array(StringEnum(PLUGIN_CAPABILITIES), { minItems: 1, uniqueItems: true }),
    diagnosticSources: Type.Array(DiagnosticSource, { uniqueItems: true }),
    protocolVersion: Type.String({ pattern: "^\\d+\\.\\d+$" }),
    engines: Type.Object({ node: Type.String({ minLength: 1 }) }, Closed),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
  },
  Closed,
);
export type PluginManifest = Static<typeof PluginManifestSchema>;

// The fail-policy floor (host §2): a gate cell may never be `open`.
const FailPolicyRow = Type.Object(
  {
    interactive: Type.Optional(StringEnum(["open", "indeterminate", "deny"])),
    gate: Type.Optional(StringEnum(["indeterminate", "deny"])),
    sweep: Type.Optional(StringEnum(["open", "indeterminate", "deny"])),
  },
  Closed,
);

/**
 * A conformance result the operator ran (`asp conformance --json`) and pinned next to a provider
 * (host §1 "Authority axes"): the suite, pass or fail, the digest of the provider it ran against
 * (`subjectDigest`) and the report's own digest. Evidence only: the `conformance` axis reads
 * `verified` only when `subjectDigest` equals the digest the host measured for the provider that
 * ran; it never grants authority, and nothing a provider says sets it.
 */
const ConformancePin = Type.Object(
  {
    result: StringEnum(["pass", "fail"]),
    suite: Type.String({ pattern: "^asp\\.conformance/[0-9]+$", maxLength: 64 }),
    subjectDigest: Digest,
    digest: Digest,
  },
  Closed,
);

/** Trusted policy document (host §1, §2, §7; DESIGN §4). */
export const PolicySchema = Type.Object(
  {
    apiVersion: Type.Literal("asp.policy/v1"),
    description: Type.Optional(Type.String({ maxLength: 4000 })),
    requirements: Type.Array(
      Type.Object(
        {
          id: Id,
          description: Type.Optional(Type.String({ maxLength: 2000 })),
          capability: CapabilityFamilyT,
          sources: Type.Array(DiagnosticSource, { minItems: 1, uniqueItems: true }),
          callSites: Type.Array(CallSiteT, { minItems: 1, uniqueItems: true }),
        },
        Closed,
      ),
    ),
    providers: Type.Array(
      Type.Object({ id: Id, version: SemVer, digest: Digest, conformance: Type.Optional(ConformancePin) }, Closed),
    ),
    grants: Type.Array(
      Type.Object(
        {
          provider: Id,
          version: SemVer,
          digest: Digest,
          requirement: Id,
          callSites: Type.Array(CallSiteT, { minItems: 1, uniqueItems: true }),
        },
        Closed,
      ),
    ),
    severityCaps: Type.Optional(
      Type.Array(
        Type.Object(
          {
            provider: Type.Optional(Id),
            authority: Type.Optional(StringEnum(["granted", "ungranted"])),
            isolation: Type.Optional(AssuranceModeT),
            maxSeverity: SeverityT,
          },
          Closed,
        ),
      ),
    ),
    failPolicy: Type.Optional(
      Type.Object(Object.fromEntries(FAIL_CLASSES.map((c) => [c, Type.Optional(FailPolicyRow)])), Closed),
    ),
    assurance: Type.Optional(CallSiteMap(AssuranceModeT)),
    plugins: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Id,
            digest: Digest,
            capabilities: Type.Array(StringEnum(PLUGIN_CAPABILITIES), { minItems: 1, uniqueItems: true }),
          },
          Closed,
        ),
      ),
    ),
    permissions: Type.Optional(
      Type.Object(
        {
          default: StringEnum(PERMISSION_OUTCOMES),
          rules: Type.Array(
            Type.Object(
              {
                tool: Type.String({ minLength: 1, maxLength: 200 }),
                path: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
                network: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
                outcome: StringEnum(PERMISSION_OUTCOMES),
              },
              Closed,
            ),
          ),
          credentialFence: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 4096 }))),
        },
        Closed,
      ),
    ),
    host: Type.Optional(
      Type.Object(
        {
          implementation: Id,
          // A semver range the running host's version must satisfy (an exact version is a range).
          version: Type.Optional(SemVerRange),
          // This host cannot measure its own artifact: a policy that pins a digest is never satisfied.
          digest: Type.Optional(Digest),
        },
        {
          ...Closed,
          description:
            "the trusted host implementation that decides under this policy; a candidate policy that changes it selects a privileged host implementation (host §7)",
        },
      ),
    ),
    budgets: Type.Optional(
      Type.Object(
        {
          timeoutMs: Type.Optional(CallSiteMap(Type.Integer({ minimum: 1 }))),
          callbacksPerRequest: Type.Optional(Type.Integer({ minimum: 0 })),
          callbacksPerSession: Type.Optional(Type.Integer({ minimum: 0 })),
          maxResponseBytes: Type.Optional(Type.Integer({ minimum: 1 })),
          quarantineAfterFailures: Type.Optional(Type.Integer({ minimum: 1 })),
          editRetries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10 })),
        },
        Closed,
      ),
    ),
  },
  Closed,
);
export type Policy = Static<typeof PolicySchema>;

const ProviderStatus = Type.Object(
  {
    id: Id,
    version: SemVer,
    state: ProviderStateT,
    families: Type.Object(
      Object.fromEntries(CAPABILITY_FAMILIES.map((f) => [f, Type.Optional(StringEnum(PROVIDER_STATES))])),
      Closed,
    ),
    health: Type.Object(
      {
        restarts: Type.Integer({ minimum: 0 }),
        consecutiveFailures: Type.Integer({ minimum: 0 }),
        quarantined: Type.Boolean(),
      },
      Closed,
    ),
    latency: Type.Object(
      {
        samples: Type.Integer({ minimum: 0 }),
        p50Ms: Type.Union([Type.Number({ minimum: 0 }), Type.Null()]),
        p95Ms: Type.Union([Type.Number({ minimum: 0 }), Type.Null()]),
      },
      Closed,
    ),
    timeouts: Type.Integer({ minimum: 0 }),
    coverage: Type.Object({ ran: Type.Integer({ minimum: 0 }), degraded: Type.Integer({ minimum: 0 }) }, Closed),
    // host §2: error, unsupported and incomplete stay distinct in metrics; `ran` counts only `complete`.
    outcomes: Type.Optional(
      Type.Object(Object.fromEntries(PROVIDER_RUN_OUTCOMES.map((o) => [o, Type.Integer({ minimum: 0 })])), Closed),
    ),
  },
  Closed,
);

/** `host/status`: per-provider and per-capability-family state and health (host §2, §8). */
export const HostStatusSchema = Type.Object(
  {
    $$type: Brand("HostStatus"),
    version: Type.Literal(1),
    hostVersion: SemVer,
    policyDigest: Type.Union([Digest, Type.Null()]),
    providers: Type.Array(ProviderStatus),
    capabilities: Type.Object(
      Object.fromEntries(CAPABILITY_FAMILIES.map((f) => [f, Type.Array(Id, { uniqueItems: true })])),
      Closed,
    ),
    generatedAt: Timestamp,
  },
  Closed,
);
export type HostStatus = Static<typeof HostStatusSchema>;

const Count = Type.Integer({ minimum: 0 });
const Sample = Type.Object({ ref: Id, detail: Type.String({ maxLength: 4000 }) }, Closed);

/**
 * Whether a section of the dogfood report that needs outside input was built (host §9):
 * `measured` (computed by the host from the baseline named here), `declared` (the operator's
 * statement, copied and bound by digest), or `not_measured` (empty, and `needs` says what input
 * would fill it). An empty section is never a silent "nothing to report". `baselines` names each
 * input by digest (and the tool it came from, when it says).
 */
const DogfoodSection = Type.Object(
  {
    status: StringEnum(["measured", "declared", "not_measured"]),
    needs: Type.Optional(Type.String({ maxLength: 2000 })),
    baselines: Type.Optional(
      Type.Array(Type.Object({ name: Type.Optional(Id), version: Type.Optional(SemVer), digest: Digest }, Closed), {
        minItems: 1,
        maxItems: 64,
      }),
    ),
  },
  Closed,
);

/** Dogfood report (host §9): per-capability evidence, never one pass/fail label. */
export const DogfoodReportSchema = Type.Object(
  {
    $$type: Brand("DogfoodReport"),
    version: Type.Literal(2),
    /** The host toolkit that built the report. */
    engine: Type.Object({ name: Id, version: SemVer }, Closed),
    /** The reference engine or server the receipts dogfood, when one is named (host §9). */
    referenceEngine: Type.Optional(Type.Object({ name: Id, version: SemVer }, Closed)),
    generatedAt: Timestamp,
    sections: Type.Object(
      { parity: DogfoodSection, compatibility: DogfoodSection, releaseEvidence: DogfoodSection },
      Closed,
    ),
    capabilities: Type.Array(
      Type.Object(
        {
          family: CapabilityFamilyT,
          // Whether this host routes the family's requests at all: `not_served` is said, never left empty.
          routing: StringEnum(["served", "not_served"]),
          // Where the family's latency comes from: `not_recorded` when its receipts carry no timing.
          latencyStatus: StringEnum(["measured", "no_runs", "not_recorded", "not_served"]),
          latencyNote: Type.Optional(Type.String({ maxLength: 2000 })),
          parityDeltas: Type.Array(Type.Object({ baseline: Id, metric: Id, delta: Type.Number() }, Closed)),
          falsePositives: Type.Array(Sample),
          falseNegatives: Type.Array(Sample),
          latency: Type.Array(
            Type.Object(
              {
                callSite: CallSiteT,
                p50Ms: Type.Number({ minimum: 0 }),
                p95Ms: Type.Number({ minimum: 0 }),
                timeouts: Count,
              },
              Closed,
            ),
          ),
          staleRejections: Count,
          typedFailures: Type.Record(Type.String({ pattern: "^[a-z_]+$" }), Count),
          degraded: Type.Array(DegradedEntry),
          editConflicts: Type.Array(Type.Object({ kind: Id, detail: Type.String({ maxLength: 4000 }) }, Closed)),
          applyOutcomes: Type.Object(Object.fromEntries(APPLY_OUTCOMES.map((o) => [o, Type.Optional(Count)])), Closed),
        },
        Closed,
      ),
      { minItems: 1 },
    ),
    assurance: Type.Object({ mode: AssuranceModeT, transactionGuarantee: TransactionGuaranteeT }, Closed),
    compatibility: Type.Array(
      Type.Object(
        {
          surface: Id,
          status: StringEnum(["native_provider", "asp_provider_compat", "retained_gate", "descoped", "roadmap"]),
        },
        Closed,
      ),
    ),
    releaseEvidence: Type.Array(
      Type.Object({ kind: Id, digest: Digest, uri: Type.Optional(Type.String({ format: "uri" })) }, Closed),
    ),
  },
  Closed,
);
export type DogfoodReport = Static<typeof DogfoodReportSchema>;

export { DegradedEntry };
