import type { TSchema } from "@sinclair/typebox";
import * as A from "./schemas/auto-mode.js";
import * as H from "./schemas/host.js";
import * as G from "./schemas/plugin.js";
import * as P from "./schemas/protocol.js";
import * as T from "./schemas/trust.js";

/** Base of every schema `$id`. The files ship in this package under `schemas/`. */
export const SCHEMA_ID_BASE = "https://asp-toolkit.dev/schemas/v1/";

interface Definition {
  readonly schema: TSchema;
  readonly title: string;
  readonly description: string;
}

const def = (schema: TSchema, title: string, description: string): Definition => ({ schema, title, description });

/** Every published schema by name; the file is `schemas/<name>.schema.json`. */
const DEFINITIONS: { readonly [N in SchemaName]: Definition } = {
  verdict: def(
    H.VerdictSchema,
    "Decision Envelope",
    "A host-produced decision (legacy name: verdict), host obligations §1.",
  ),
  assurance: def(
    H.AssuranceSchema,
    "Assurance report",
    "Assurance modes, transaction guarantees and degradation reasons, host obligations §2, §3, §6.",
  ),
  diagnostic: def(
    H.DiagnosticSchema,
    "Diagnostic",
    "A provider-reported diagnostic with a namespaced code and a content fingerprint.",
  ),
  assessment: def(H.AssessmentSchema, "Assessment", "A check provider's provider-owned answer to check/assess."),
  "edit-plan": def(
    H.EditPlanSchema,
    "EditPlan",
    "A structured, baseline-bound edit proposal with per-file preconditions, host obligations §6.",
  ),
  "audit-receipt": def(H.AuditReceiptSchema, "Audit receipt", "The durable record of one host decision."),
  "apply-receipt": def(
    H.ApplyReceiptSchema,
    "Apply receipt",
    "The durable record of one mediated apply, host obligations §6.",
  ),
  "provider-manifest": def(
    H.ProviderManifestSchema,
    "Provider manifest",
    "Trusted, installed provider launch configuration, host obligations §2.",
  ),
  "plugin-manifest": def(
    H.PluginManifestSchema,
    "Plugin manifest",
    "A plugin's own manifest, covered by its digest and signature.",
  ),
  "plugin-public-key": def(
    T.PluginPublicKeySchema,
    "Plugin public key",
    "A trusted ed25519 public key file (PATH.pub from `asp plugin keygen`), with an optional expiry.",
  ),
  "plugin-trust": def(
    T.PluginTrustSchema,
    "Plugin trust file",
    "Trusted plugin signing keys with expiries, and revoked key ids and plugin digests.",
  ),
  "plugin-signature": def(
    T.PluginSignatureSchema,
    "Plugin signature",
    "The detached signature asp-plugin.sig over a plugin's id, version and tree digest.",
  ),
  "host-config": def(
    T.HostConfigSchema,
    "Host configuration",
    "Trusted host configuration: store, policy, trust roots, plugin folders, provider launch manifests (host §2).",
  ),
  policy: def(
    H.PolicySchema,
    "Trusted policy",
    "Requirements, pinned providers, grants, severity caps, fail-policy, assurance, plugins, permissions, budgets.",
  ),
  "host-status": def(
    H.HostStatusSchema,
    "Host status",
    "host/status: per-provider and per-capability-family state and health.",
  ),
  "dogfood-report": def(
    H.DogfoodReportSchema,
    "Dogfood report",
    "Per-capability dogfood evidence, host obligations §9.",
  ),
  "auto-mode-config": def(
    A.AutoModeConfigSchema,
    "Auto Mode configuration",
    "Selection, stage flags and budget tightenings as one source states them.",
  ),
  "auto-run": def(A.AutoRunSchema, "Auto Run", "One Auto Run: identity, frozen selection and budgets, state."),
  candidate: def(A.CandidateSchema, "Candidate", "An immutable candidate bound to its Evidence Snapshot."),
  "evidence-snapshot": def(
    A.EvidenceSnapshotSchema,
    "Evidence Snapshot",
    "The immutable evidence a candidate is reviewed against.",
  ),
  "review-run": def(A.ReviewRunSchema, "Review run", "A Reviewer run with its bounded attempts."),
  "verifier-boundary": def(
    A.VerifierBoundarySchema,
    "Verifier boundary",
    "What a sandboxed verifier tried past its boundary: the count and the first 8 attempts.",
  ),
  finding: def(A.FindingSchema, "Finding", "A review finding: content fingerprint plus per-run identity."),
  "repair-run": def(A.RepairRunSchema, "Repair run", "A bounded Repair Run from a committed checkpoint."),
  "guardian-assessment": def(
    A.GuardianAssessmentSchema,
    "Guardian assessment",
    "A Guardian assessment bound to an exact action digest.",
  ),
  "budget-ledger": def(
    A.BudgetLedgerSchema,
    "Budget ledger",
    "Frozen limits, consumed counters and circuits of a run.",
  ),
  "terminal-record": def(A.TerminalRecordSchema, "Terminal record", "The committed terminal fact of an Auto Run."),
  "event-auto-run-started": def(A.AutoRunStartedEventSchema, "auto_run_started", "Auto Mode event."),
  "event-candidate-ready": def(A.CandidateReadyEventSchema, "candidate_ready", "Auto Mode event."),
  "event-auto-audit-started": def(
    A.AutoAuditStartedEventSchema,
    "auto_audit_started",
    "Auto Mode audit event (result or permission review).",
  ),
  "event-auto-audit-completed": def(
    A.AutoAuditCompletedEventSchema,
    "auto_audit_completed",
    "Auto Mode audit completion with assessment_digest.",
  ),
  "event-repair-started": def(A.RepairStartedEventSchema, "repair_started", "Auto Mode event."),
  "event-repair-completed": def(A.RepairCompletedEventSchema, "repair_completed", "Auto Mode event."),
  "event-auto-run-terminal": def(A.AutoRunTerminalEventSchema, "auto_run_terminal", "Auto Mode terminal event."),
  "protocol-initialize-params": def(
    P.InitializeParamsSchema,
    "initialize params",
    "host -> provider: host identity and protocol version.",
  ),
  "protocol-initialize-result": def(
    P.InitializeResultSchema,
    "initialize result",
    "provider -> host: identity, version, diagnostic sources, capabilities.",
  ),
  "protocol-initialized-params": def(
    P.InitializedParamsSchema,
    "initialized params",
    "host -> provider: the requirements trusted policy granted.",
  ),
  "protocol-assess-params": def(
    P.AssessParamsSchema,
    "check/assess params",
    "The host's baseline and changeset for one assessment.",
  ),
  "protocol-read-blob-params": def(
    P.ReadBlobParamsSchema,
    "host/readBlob params",
    "A blob read bound to a live request's baseline.",
  ),
  "protocol-read-blob-result": def(P.ReadBlobResultSchema, "host/readBlob result", "Blob bytes, base64."),
  "protocol-read-tree-params": def(
    P.ReadTreeParamsSchema,
    "host/readTree params",
    "A tree read bound to a live request's baseline.",
  ),
  "protocol-read-tree-result": def(P.ReadTreeResultSchema, "host/readTree result", "A tree's direct entries."),
  "protocol-inspect-params": def(
    P.InspectParamsSchema,
    "inspect/query params",
    "A read-only graph/search/impact query.",
  ),
  "protocol-inspect-result": def(
    P.InspectResultSchema,
    "inspect/query result",
    "Provider-owned query results bound to the baseline.",
  ),
  "protocol-propose-params": def(
    P.ProposeParamsSchema,
    "edit/propose params",
    "An edit intent against a baseline; the answer is an EditPlan.",
  ),
  "protocol-apply-proposal-params": def(
    P.ApplyProposalParamsSchema,
    "host/applyProposal params",
    "The explicit apply intent for one recorded proposal; the repository is the serving host's.",
  ),
  "plugin-verify-response": def(
    G.PluginVerifyResponseSchema,
    "Verifier plugin answer",
    "What an in-process verifier plugin returns from verify(); validated by the host before use.",
  ),
  "plugin-stage-result": def(
    G.PluginStageResultSchema,
    "Sandbox plugin stage result",
    "What an in-process sandbox plugin reports from stage(); validated, and its guarantee checked against the grant.",
  ),
  "plugin-launch-result": def(
    G.PluginLaunchResultSchema,
    "Sandbox plugin launch result",
    "The confined launch a sandbox plugin returns from launch(); validated, and its mode checked against the grant.",
  ),
  "plugin-recover-result": def(
    G.PluginRecoverResultSchema,
    "Sandbox plugin recover result",
    "What a sandbox plugin's recover() did with an interrupted stage: nothing, rolled back or rolled forward.",
  ),
};

/** Name of a published schema. */
export type SchemaName = keyof SchemaTypes;

/** The TS type each schema describes (derived from the schema itself, so they cannot drift). */
export interface SchemaTypes {
  verdict: H.DecisionEnvelope;
  assurance: H.AssuranceReport;
  diagnostic: H.Diagnostic;
  assessment: H.Assessment;
  "edit-plan": H.EditPlan;
  "audit-receipt": H.AuditReceipt;
  "apply-receipt": H.ApplyReceipt;
  "provider-manifest": H.ProviderManifest;
  "plugin-manifest": H.PluginManifest;
  "plugin-public-key": T.PluginPublicKeyFile;
  "plugin-trust": T.PluginTrustFile;
  "plugin-signature": T.PluginSignatureFile;
  "host-config": T.HostConfigFile;
  policy: H.Policy;
  "host-status": H.HostStatus;
  "dogfood-report": H.DogfoodReport;
  "auto-mode-config": A.AutoModeConfig;
  "auto-run": A.AutoRun;
  candidate: A.Candidate;
  "evidence-snapshot": A.EvidenceSnapshot;
  "review-run": A.ReviewRun;
  "verifier-boundary": A.VerifierBoundary;
  finding: A.Finding;
  "repair-run": A.RepairRun;
  "guardian-assessment": A.GuardianAssessment;
  "budget-ledger": A.BudgetLedger;
  "terminal-record": A.TerminalRecord;
  "event-auto-run-started": A.AutoRunStartedEvent;
  "event-candidate-ready": A.CandidateReadyEvent;
  "event-auto-audit-started": A.AutoAuditStartedEvent;
  "event-auto-audit-completed": A.AutoAuditCompletedEvent;
  "event-repair-started": A.RepairStartedEvent;
  "event-repair-completed": A.RepairCompletedEvent;
  "event-auto-run-terminal": A.AutoRunTerminalEvent;
  "protocol-initialize-params": P.InitializeParams;
  "protocol-initialize-result": P.InitializeResult;
  "protocol-initialized-params": P.InitializedParams;
  "protocol-assess-params": P.AssessParams;
  "protocol-read-blob-params": P.ReadBlobParams;
  "protocol-read-blob-result": P.ReadBlobResult;
  "protocol-read-tree-params": P.ReadTreeParams;
  "protocol-read-tree-result": P.ReadTreeResult;
  "protocol-inspect-params": P.InspectParams;
  "protocol-inspect-result": P.InspectResult;
  "protocol-propose-params": P.ProposeParams;
  "protocol-apply-proposal-params": P.ApplyProposalParams;
  "plugin-verify-response": G.PluginVerifyResponse;
  "plugin-stage-result": G.PluginStageResult;
  "plugin-launch-result": G.PluginLaunchResult;
  "plugin-recover-result": G.PluginRecoverResult;
}

/** Every schema name, in publication order. */
export const SCHEMA_NAMES = Object.freeze(Object.keys(DEFINITIONS)) as ReadonlyArray<SchemaName>;

/** True when `name` is a published schema name. */
export function isSchemaName(name: string): name is SchemaName {
  return Object.hasOwn(DEFINITIONS, name);
}

/**
 * The standalone JSON Schema 2020-12 document for `name`, exactly as published in
 * `schemas/<name>.schema.json` (plain JSON: no TypeBox symbols).
 */
export function schemaDocument(name: SchemaName): Record<string, unknown> {
  const { schema, title, description } = DEFINITIONS[name];
  const body = JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    $id: `${SCHEMA_ID_BASE}${name}.schema.json`,
    title,
    description,
    ...body,
  };
}
