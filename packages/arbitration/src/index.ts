/**
 * `@asp/arbitration`: pure reconciliation of what several providers reported, before the host
 * decides (host obligations §4).
 *
 * - {@link arbitrate}: source ownership (typed drop events), dedup within a provider's source by
 *   fingerprint, precedence per requirement by authority grant, tie markers, and coverage with
 *   degraded entries in the assurance vocabulary,
 * - {@link provisionalDecision}: the outcome arbitration alone allows (a necessary condition),
 * - {@link findEditConflicts}: edit plans that touch overlapping blobs, for the caller to serialize.
 *
 * Deterministic: every output list is sorted, so shuffled inputs give identical results.
 * Node-free: builds with `"types": []`.
 *
 * @packageDocumentation
 */

export type {
  ArbitrateParams,
  ArbitrationCoverage,
  ArbitrationResult,
  DroppedDiagnostic,
  DropReason,
  FailPolicyDecision,
  KeptDiagnostic,
  ProviderRef,
  ProviderResult,
  ProviderRun,
  RequirementOutcome,
  TieMarker,
} from "./arbitrate.js";
export { arbitrate } from "./arbitrate.js";
export type { EditConflict, EditConflictKind, EditConflictOptions } from "./edit-conflicts.js";
export { findEditConflicts } from "./edit-conflicts.js";
export type { ArbitrationErrorCode } from "./errors.js";
export { ARBITRATION_ERROR_CODES, ArbitrationError } from "./errors.js";
export type { ProvisionalDecision } from "./outcome.js";
export { provisionalDecision } from "./outcome.js";
