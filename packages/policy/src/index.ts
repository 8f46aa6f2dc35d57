/**
 * `@asp/policy`: the trusted policy a host decides from (host obligations §1, §2, §7).
 *
 * - {@link parsePolicy}: parse, validate and activate a policy document; nothing partial is ever
 *   activated, and its {@link ActivePolicy.digest} is the `policyDigest` of every decision,
 * - requirements per call-site, pinned authority grants ({@link authorityFor}: labels never
 *   grant), plugin grants, effective-severity caps, required assurance,
 * - the fail-policy table with its non-weakenable gate floor ({@link failPolicyCell}),
 * - deterministic Auto Mode permission rules with the credential fence ({@link classifyAction}),
 * - BasePolicyAuthority: a candidate policy stays pending and every self-authorization attempt
 *   is reported ({@link assessPolicyChange}, {@link createBasePolicyAuthority}),
 * - the {@link PolicySource} port; Node implementations live in `@asp/policy/node`.
 *
 * Pure and Node-free: builds with `"types": []`.
 *
 * @packageDocumentation
 */

export type {
  AuthorityGrant,
  ConformanceAxis,
  PluginClaim,
  PluginGrant,
  ProviderClaim,
  ProviderPin,
} from "./authority.js";
export { authorityFor, conformanceOf, grantsFor, pluginGrant } from "./authority.js";
export type {
  BasePolicyAuthority,
  BasePolicyAuthorityOptions,
  PendingPolicy,
  PolicyEvaluation,
} from "./base-authority.js";
export { applyFloor, createBasePolicyAuthority } from "./base-authority.js";
export type {
  DegradedEntry,
  PolicyChange,
  PolicyChangeAssessment,
  SelfAuthorizationAttempt,
  SelfAuthorizationKind,
} from "./change.js";
export { assessPolicyChange, POLICY_REQUIREMENT, SELF_AUTHORIZATION_KINDS } from "./change.js";
export type { PolicyErrorCode, PolicyProblem } from "./errors.js";
export { POLICY_ERROR_CODES, PolicyError } from "./errors.js";
export type { FailPolicyCellOptions, FailPolicyRow, FailPolicyTable } from "./fail-policy.js";
export {
  DEFAULT_FAIL_POLICY,
  failPolicyCell,
  failPolicyTable,
  outcomeStrictness,
  stricterOutcome,
} from "./fail-policy.js";
export type { HostPinMismatch, RunningHost } from "./host-pin.js";
export { hostPinMismatch } from "./host-pin.js";
export type { DeepReadonly } from "./json.js";
export type {
  ActivePolicy,
  ParsePolicyOptions,
  PolicyDocument,
  PolicyOrigin,
  PolicyValidation,
} from "./parse.js";
export { isActivePolicy, MAX_REPORTED_PROBLEMS, POLICY_API_VERSION, parsePolicy, validatePolicy } from "./parse.js";
export type { PermissionAction, PermissionDecision, PermissionRule } from "./permissions.js";
export { classifyAction, DEFAULT_CREDENTIAL_FENCE } from "./permissions.js";
export type { PolicyRequirement } from "./requirements.js";
export {
  assuranceRank,
  assuranceSatisfies,
  DEFAULT_ASSURANCE,
  isRequiredSource,
  requiredAssurance,
  requiredRequirements,
  requiredSources,
} from "./requirements.js";
export type { EffectiveSeverity, ProviderAuthority, SeverityCeiling } from "./severity.js";
export { capNote, effectiveSeverity, severityCeiling, severityRank } from "./severity.js";
export type { PolicySource, PolicyText } from "./source.js";
export { loadPolicy, POLICY_TOKENS } from "./source.js";
