import { AspError, type AspErrorOptions } from "@asp/contracts";

/**
 * Every error code `@asp/rollout` throws. Stable: callers and tests branch on these, never on
 * message text. Every error's `data` names the offending `key` and, where there is one, the
 * `source` it came from; no error ever contains the offending value itself, so a secret pasted
 * into the wrong variable is never echoed.
 */
export type RolloutErrorCode =
  /** An enum value outside its closed vocabulary (or a non-string where an enum is expected). */
  | "ASP_ROLLOUT_UNKNOWN_VALUE"
  /** An explicitly empty value (`""`, whitespace only, or JSON `null`): empty never means off. */
  | "ASP_ROLLOUT_EMPTY_VALUE"
  /** A boolean spelled outside the fixed spelling set. */
  | "ASP_ROLLOUT_BAD_BOOLEAN"
  /** An unknown or misspelled configuration key or contract-namespaced environment variable. */
  | "ASP_ROLLOUT_UNKNOWN_KEY"
  /** A known key in a scope that may not set it (stage flags outside deployment configuration). */
  | "ASP_ROLLOUT_KEY_NOT_ALLOWED"
  /** A configuration (or one of its sections) that is not a JSON object. */
  | "ASP_ROLLOUT_BAD_SHAPE"
  /** A budget value that is not a positive number (or not an integer where one is required). */
  | "ASP_ROLLOUT_BAD_NUMBER"
  /** A budget value looser than the ceiling in force above it. */
  | "ASP_ROLLOUT_BUDGET_LOOSENED"
  /** `guardian_window_size` set to anything but 50. */
  | "ASP_ROLLOUT_WINDOW_FIXED"
  /** The contract variable and its host alias are both set and disagree. */
  | "ASP_ROLLOUT_ALIAS_CONFLICT"
  /** A caller-supplied option is malformed (alias prefix, run identity, meter use). */
  | "ASP_ROLLOUT_INVALID_OPTION"
  /**
   * A stage flag turned on (by its variable, a host alias or the deployment configuration's
   * `stages`) whose stage is not built yet (not in `BUILT_STAGES`): it would change nothing.
   * `data.stage` names the flag, `key` / `source` / `data.origin` where it was turned on,
   * `data.unbuilt` every such flag, `data.built` the built stages.
   */
  | "ASP_ROLLOUT_STAGE_NOT_BUILT"
  /** Persisting a run's selection while `stage2_auto_run_storage` is off. */
  | "ASP_ROLLOUT_STAGE_DISABLED"
  /** A second, different selection persisted for a run that already has one. */
  | "ASP_ROLLOUT_SELECTION_CONFLICT"
  /** A stored selection record that no longer validates (integrity failure, fail closed). */
  | "ASP_ROLLOUT_CORRUPT_RECORD";

/**
 * The one error class `@asp/rollout` throws. `category` is `input` (CLI exit 64) except for
 * {@link RolloutErrorCode | ASP_ROLLOUT_CORRUPT_RECORD}, which is `integrity`.
 *
 * @example
 * ```ts
 * try { parseAutoModeConfig({ preset: "turbo" }, "deployment"); }
 * catch (e) { if (isAspError(e)) console.error(e.code, e.data); } // ASP_ROLLOUT_UNKNOWN_VALUE { key: "preset", source: "deployment" }
 * ```
 */
export class RolloutError extends AspError<RolloutErrorCode> {}

/** Build a {@link RolloutError} whose `data` always carries the offending key and source. */
export function rolloutError(
  code: RolloutErrorCode,
  message: string,
  where: { readonly key: string; readonly source?: string | undefined },
  options: Omit<AspErrorOptions, "data"> & { readonly data?: Readonly<Record<string, unknown>> } = {},
): RolloutError {
  const data: Record<string, unknown> = { key: where.key, ...options.data };
  if (where.source !== undefined) data.source = where.source;
  const rest: AspErrorOptions = {
    data,
    ...(options.category === undefined ? {} : { category: options.category }),
    ...(options.cause === undefined ? {} : { cause: options.cause }),
  };
  return new RolloutError(code, message, rest);
}
