/**
 * `@asp/auto-mode`: the Auto Run core. Durable runs in the `@asp/evidence` fact log (every
 * transition and its canonical event in one atomic append), an injected Engine (a scripted one
 * ships), independent Reviewer selection over verifier ports, bounded review attempts, finding
 * identity, the contract's terminal states, and one fail-closed projection from durable records.
 *
 * @packageDocumentation
 */

export type {
  ActionClassification,
  ActionWorkspace,
  CanonicalAction,
  Canonicalized,
  CanonicalRefusal,
  CommandResult,
  HostToolName,
  PermissionClassifier,
} from "./actions.js";
export { canonicalizeAction, HOST_TOOLS } from "./actions.js";
export type { Assessment, AssessmentFinding, AuditRequest } from "./audit.js";
export {
  assessmentDigest,
  auditCompletedEvent,
  auditRequestDigest,
  auditStartedEvent,
  checkAuditCompletion,
} from "./audit.js";
export type {
  AutoEvent,
  AutoRecordKind,
  RecordFact,
  StepAudit,
  StepGuardian,
  StepRecord,
  Transition,
  TransitionRecord,
} from "./durable.js";
export {
  AUTO_FACT_KINDS,
  AUTO_STEP_KIND,
  capabilityStateKey,
  checkEvent,
  checkRecord,
  checkStepRecord,
  commitStep,
  commitTransition,
  RUN_ID_INDEX,
  readRunFacts,
  runStateKey,
  stepIdOf,
} from "./durable.js";
export type {
  ActorIdentity,
  CompletionArtifact,
  CompletionEvidence,
  Engine,
  EngineParams,
  EngineScript,
  EngineStep,
  EngineSteps,
} from "./engine.js";
export { AUTO_MODE_TOKENS, createScriptedEngine } from "./engine.js";
export type { AutoModeErrorCode } from "./errors.js";
export { AUTO_MODE_ERROR_CODES, AutoModeError } from "./errors.js";
export {
  blocksVerified,
  FINDING_STATUS_CAUSES,
  findingStatusProblem,
  isUnresolvedFinding,
  UNRESOLVED_FINDING_STATUSES,
} from "./findings.js";
export type {
  Guardian,
  GuardianAnswer,
  GuardianFailure,
  GuardianFailureOutcome,
  GuardianRequest,
  GuardianRule,
  PermissionAssessment,
  PermissionAuditRequest,
} from "./guardian.js";
export {
  actionClassOf,
  auditRequestOf,
  checkGuardianAssessment,
  checkGuardianFailure,
  createRulesGuardian,
  guardianAssessment,
  guardianFailure,
  guardianFromVerifier,
  guardianRequestOf,
  isVerifierLaunch,
  parseGuardianAnswer,
  permissionAssessment,
  permissionAssessmentOf,
  permissionAuditRequest,
  permissionRequestDigest,
  verifierLaunchOf,
} from "./guardian.js";
export type { FindingContent } from "./identity.js";
export {
  candidateIdOf,
  checkRun,
  codeFingerprint,
  findingFingerprint,
  findingIdOf,
  modelFingerprint,
  reviewRunIdOf,
  runIdOf,
} from "./identity.js";
export type { MachineFact, MachineInput, MachineTransition, RunPhase, RunReplay } from "./machine.js";
export { nextPhase, RUN_MACHINE, replayRun, transitionOf } from "./machine.js";
export { CHANGES_REF } from "./modules/candidate.js";
export {
  GUARDIAN_REFUSAL_CODES,
  type GuardianDecisionView,
  type PermissionResolvedEvent,
  permissionResolvedEvent,
} from "./modules/guardian.js";
export {
  CHECKPOINT_REF,
  type FindingStatusView,
  isSafeRelPath,
  mutationSetOf,
  type RepairCheck,
  type RepairOptions,
  repairTask,
} from "./modules/repair.js";
export type { AutoRunProjection, ProjectionFact, ProjectionInput, ShadowJudgment } from "./projection.js";
export { loadAutoRunProjection, projectAutoRun, projectionInputOf } from "./projection.js";
export type {
  ArtifactVersion,
  ArtifactVersionSource,
  AutoRunQuery,
  AutoRunRow,
  FrameAuditPage,
  FrameAuditQuery,
  FrameAuditRow,
} from "./queries.js";
export { listAutoRuns, listFrameAudits, readArtifactVersion } from "./queries.js";
export type {
  AttemptResult,
  BoundaryMark,
  FailedOutcome,
  IndependenceInput,
  ParsedVerdict,
  ReviewerPort,
  VerifierBoundarySource,
} from "./review.js";
export {
  answerTokens,
  attemptOutcomeOfError,
  boundaryMark,
  boundarySince,
  isEligibleReviewer,
  isVerifierBoundary,
  parseVerdict,
  runAttempt,
  selectReviewer,
} from "./review.js";
export { type ReviewContentReader, type ReviewContentScope, scopeReviewContent } from "./review-content.js";
export type {
  AutoRunner,
  AutoRunnerOptions,
  AutoRunParams,
  ProvisionalChunk,
  RunTimers,
  TerminalOutcome,
} from "./runner.js";
export { buildTerminalRecord, createAutoRunner } from "./runner.js";
export type { GuardianMode, ResultReviewStage, RunStages, RuntimeStageFlag } from "./stages.js";
export {
  assertBuiltStages,
  checkRunStages,
  guardianMode,
  RUNTIME_STAGE_FLAGS,
  resultReviewStage,
  runtimeStageFlags,
} from "./stages.js";
export type { ScratchWorkspaceOptions } from "./workspace.js";
export { createScratchWorkspace } from "./workspace.js";
