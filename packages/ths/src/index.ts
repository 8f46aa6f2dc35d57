/**
 * `@asp/ths`: the Trusted Host Service, Core Profile. Providers assess; the host decides.
 *
 * - a supervisor that launches providers only from trusted configuration (absolute executable,
 *   argv array, trusted cwd, minimal environment), tracks their lifecycle, restarts with
 *   backoff and quarantines,
 * - JSON-RPC over stdio (`@asp/protocol` on `vscode-jsonrpc`) with per-request timeouts, cancellation,
 *   response-size and callback bounds; `host/readBlob` / `host/readTree` bound to the baseline,
 * - freshness (baselines are evidence snapshot tree ids; `validAsOf` must match exactly),
 * - {@link decide}: the host §1 rule with its fail table, pure,
 * - audit receipts appended with the decision in one durable fact log transition, with each
 *   provider's health (failures, quarantine, latency, outcome kinds), so one-shot hosts
 *   accumulate it and {@link readHealthStatus} reports it without launching anything,
 * - {@link composeHost}: tsyringe composition with a token for every seam.
 *
 * @packageDocumentation
 */

import "reflect-metadata";

export type {
  ApplyOptions,
  ApplyResult,
  EditIntent,
  ProposalProvider,
  ProposeOptions,
  ProposeResult,
} from "./apply/applier.js";
export { APPLY_FACT_KINDS } from "./apply/applier.js";
export type { ApplyRejection } from "./apply/validate.js";

export type { Budgets, SupervisorTimings } from "./budgets.js";
export { budgetsOf, DEFAULT_BUDGETS, DEFAULT_TIMINGS } from "./budgets.js";
export type { ComposedHost, ComposeHostOptions } from "./compose.js";
export { composeHost, HOST_INFO } from "./compose.js";
export type { BaseRevisionPolicy, HostConfig, ServerSettings } from "./config.js";
export { checkManifest, loadHostConfig, parseHostConfig } from "./config.js";
export type {
  DecideInput,
  DecideResult,
  FailOpen,
  ProviderEvaluation,
  RequirementFailure,
} from "./decide.js";
export { DEFAULT_FAIL_TABLE, decide, failCell, failTable, nextStepFor } from "./decide.js";
export type { DogfoodBaselines, DogfoodLabel, DogfoodLabels, DogfoodReportOptions } from "./dogfood.js";
export { dogfoodReport, parseDogfoodLabels } from "./dogfood.js";
export type { ServedHost, ServeHostOptions } from "./endpoint.js";
export { serveHost } from "./endpoint.js";
export type { EnvironmentConfig, EnvironmentSetting } from "./environment.js";
export { DEFAULT_ENVIRONMENT } from "./environment.js";
export type { ApplyRejectionCode, ThsErrorCode } from "./errors.js";
export { APPLY_REJECTION_CODES, THS_ERROR_CODES, ThsError } from "./errors.js";
export type { Binding, IssueOptions } from "./freshness.js";
export { FreshnessAuthority, freshnessMismatch, trustedBaseKey } from "./freshness.js";
export type { HealthSubject, ProviderIdentity, ReadHealthStatusParams } from "./health.js";
export { readHealthStatus } from "./health.js";
export type { EvaluateOptions, EvaluateResult, HostCapabilities, ProgressEvent, QuarantineReset } from "./host.js";
export { Host } from "./host.js";
export type { HostChecksOptions } from "./host-checks.js";
export { committedTree, createHostChecks, gatingFindings } from "./host-checks.js";
export type { LaunchRecord } from "./launcher.js";
export { LAUNCH_CAPABILITY, launchSandbox, storeFolders } from "./launcher.js";
export type { CandidatePolicySetting } from "./policy-change.js";
export { candidatePolicyPaths } from "./policy-change.js";
export { checkPolicyRevision, loadPolicy } from "./policy-file.js";
export type { ProviderPin, RequiredRequirement, VerifiedGrant } from "./policy-view.js";
export type { ReceiptProblem, ReceiptVerification, StoredReceipt } from "./receipts.js";
export { FACT_KINDS, listReceipts, showReceipt, verifyReceipts } from "./receipts.js";
export type { AssessOutcome, HostInfo, ProposeOutcome, TrustedProvider } from "./supervisor.js";
export { launchEnvironment } from "./supervisor.js";
export type { FailOpenSink, HostPolicy, IdSource, ProviderSet, RefusedProvider, SandboxSet } from "./tokens.js";
export { THS_TOKENS } from "./tokens.js";
export type { ProviderLaunch, TrustedLocations, UntrustedLocation } from "./trusted-location.js";
export { assertTrustedLocations, manifestLocationsInside, untrustedLocations } from "./trusted-location.js";
export { VERIFIER_METHODS } from "./verifier-child/wire.js";
export type {
  LaunchedVerifier,
  LaunchVerifierOptions,
  VerifierAttempt,
  VerifierLaunch,
  VerifierNetwork,
} from "./verifier-launch.js";
export { launchVerifier, underBaseUrl, VERIFIER_CHILD_ENTRY } from "./verifier-launch.js";
