import { AspError } from "@asp/contracts";

/**
 * Every error code `@asp/auto-mode` throws. Stable: callers and tests branch on these, never on
 * message text.
 */
export type AutoModeErrorCode =
  /** A caller-supplied option is malformed (run identity, reviewer descriptor, script). */
  | "ASP_AUTO_MODE_INVALID_OPTION"
  /** A record about to be committed does not validate against its contracts schema (nothing is written). */
  | "ASP_AUTO_MODE_INVALID_RECORD"
  /** A required durable append (a transition and its event) could not commit: the audit persistence failure. */
  | "ASP_AUTO_MODE_PERSIST_FAILED"
  /** A transition was asked of a run that is already terminal, or out of order. */
  | "ASP_AUTO_MODE_ILLEGAL_TRANSITION"
  /** A run with this identity already exists in the store. */
  | "ASP_AUTO_MODE_RUN_EXISTS"
  /** No run with this identity exists in the store. */
  | "ASP_AUTO_MODE_RUN_NOT_FOUND"
  /** A stage this call needs is off (e.g. Auto Run storage without `stage2_auto_run_storage`). */
  | "ASP_AUTO_MODE_STAGE_DISABLED"
  /** An assessment that does not re-hash to its `assessment_digest` (fail closed). */
  | "ASP_AUTO_MODE_DIGEST_MISMATCH"
  /** A behaviour this package does not implement yet. */
  | "ASP_AUTO_MODE_UNSUPPORTED"
  /** A rollout stage this build does not implement is on (refused rather than silently ignored). */
  | "ASP_AUTO_MODE_STAGE_NOT_BUILT"
  /** An action adapter's path would leave the run's workspace (a path escape: the safety boundary). */
  | "ASP_AUTO_MODE_PATH_ESCAPE"
  /** A command cannot run because its sandbox is unavailable (nothing ran). */
  | "ASP_AUTO_MODE_SANDBOX_UNAVAILABLE"
  /** No committed candidate names this Artifact version id. */
  | "ASP_AUTO_MODE_VERSION_NOT_FOUND"
  /** Committed candidates name one version id with different bytes or Artifacts (never guessed). */
  | "ASP_AUTO_MODE_VERSION_AMBIGUOUS";

/** Every {@link AutoModeErrorCode}, for table tests and documentation. */
export const AUTO_MODE_ERROR_CODES: ReadonlyArray<AutoModeErrorCode> = Object.freeze([
  "ASP_AUTO_MODE_INVALID_OPTION",
  "ASP_AUTO_MODE_INVALID_RECORD",
  "ASP_AUTO_MODE_PERSIST_FAILED",
  "ASP_AUTO_MODE_ILLEGAL_TRANSITION",
  "ASP_AUTO_MODE_RUN_EXISTS",
  "ASP_AUTO_MODE_RUN_NOT_FOUND",
  "ASP_AUTO_MODE_STAGE_DISABLED",
  "ASP_AUTO_MODE_DIGEST_MISMATCH",
  "ASP_AUTO_MODE_UNSUPPORTED",
  "ASP_AUTO_MODE_STAGE_NOT_BUILT",
  "ASP_AUTO_MODE_PATH_ESCAPE",
  "ASP_AUTO_MODE_SANDBOX_UNAVAILABLE",
  "ASP_AUTO_MODE_VERSION_NOT_FOUND",
  "ASP_AUTO_MODE_VERSION_AMBIGUOUS",
]);

/**
 * The one error class `@asp/auto-mode` throws (category `integrity` for persistence and digest
 * failures, `input` otherwise).
 */
export class AutoModeError extends AspError<AutoModeErrorCode> {}
