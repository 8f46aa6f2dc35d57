import { STAGE_FLAGS, type StageFlag } from "@asp/contracts";
import { type Environment, readEnvSetting } from "./env.js";
import { rolloutError } from "./errors.js";
import { parseBoolean } from "./parse.js";
import { BUILT_IN, sourceOf, type ValueSource } from "./sources.js";

/**
 * The environment variable of every stage flag (`OPENAI4S_STAGE<N>_<NAME>`, spec/stages.md).
 * Written out rather than derived so a reader can grep for the exact name.
 */
export const STAGE_ENV_VARS: Readonly<Record<StageFlag, string>> = Object.freeze({
  stage1_trusted_delivery: "OPENAI4S_STAGE1_TRUSTED_DELIVERY",
  stage2_auto_run_storage: "OPENAI4S_STAGE2_AUTO_RUN_STORAGE",
  stage3_scientific_review_shadow: "OPENAI4S_STAGE3_SCIENTIFIC_REVIEW_SHADOW",
  stage4_review_completion_gate: "OPENAI4S_STAGE4_REVIEW_COMPLETION_GATE",
  stage5_auto_repair: "OPENAI4S_STAGE5_AUTO_REPAIR",
  stage6_guardian_shadow: "OPENAI4S_STAGE6_GUARDIAN_SHADOW",
  stage7_guardian_enforcement: "OPENAI4S_STAGE7_GUARDIAN_ENFORCEMENT",
  stage8_loop_circuits: "OPENAI4S_STAGE8_LOOP_CIRCUITS",
  stage9_safe_repair_checkpoint: "OPENAI4S_STAGE9_SAFE_REPAIR_CHECKPOINT",
  stage10_effect_reconciliation: "OPENAI4S_STAGE10_EFFECT_RECONCILIATION",
  stage11_portable_runs: "OPENAI4S_STAGE11_PORTABLE_RUNS",
  stage12_restart_recovery: "OPENAI4S_STAGE12_RESTART_RECOVERY",
});

const BRAND = "@asp/StageFlags";

/** One stage flag's resolved value and where it came from. */
export interface StageFlagState {
  readonly enabled: boolean;
  readonly source: ValueSource;
}

/**
 * The resolved stage flags. {@link StageFlags.isEnabled} is the only way code asks whether a
 * stage is on; each flag is independent, so no stage ever implies another.
 */
export class StageFlags {
  /** Brand, so a copy from another package instance is still recognised ({@link isStageFlags}). */
  readonly $$type: typeof BRAND = BRAND;
  readonly version = 1 as const;
  readonly #states: ReadonlyMap<StageFlag, StageFlagState>;

  /** Prefer {@link resolveStageFlags} or {@link createStageFlags}. Missing flags are off (built-in). */
  constructor(states: Readonly<Partial<Record<StageFlag, StageFlagState>>>) {
    this.#states = new Map(STAGE_FLAGS.map((flag) => [flag, states[flag] ?? { enabled: false, source: BUILT_IN }]));
  }

  /**
   * Whether `stage` is on. This is the only question code may ask about rollout.
   *
   * @throws RolloutError `ASP_ROLLOUT_UNKNOWN_KEY` for a name that is not one of the twelve flags.
   */
  isEnabled(stage: StageFlag): boolean {
    return this.describe(stage).enabled;
  }

  /**
   * A flag's value with its source, for reporting (`asp config show`), not for branching.
   *
   * @throws RolloutError `ASP_ROLLOUT_UNKNOWN_KEY` for a name that is not one of the twelve flags.
   */
  describe(stage: StageFlag): StageFlagState {
    const state = this.#states.get(stage);
    if (state === undefined) {
      throw rolloutError("ASP_ROLLOUT_UNKNOWN_KEY", "not one of the twelve stage flags", { key: String(stage) });
    }
    return state;
  }

  /** The flags that are on, in stage order. */
  enabled(): StageFlag[] {
    return STAGE_FLAGS.filter((flag) => this.isEnabled(flag));
  }
}

/** True for a {@link StageFlags}, including one created by another copy of this package. */
export function isStageFlags(value: unknown): value is StageFlags {
  return typeof value === "object" && value !== null && (value as { $$type?: unknown }).$$type === BRAND;
}

/**
 * Flags for tests and compositions that already know which stages are on (source: `built_in`
 * for off flags, the given `source` for on flags).
 *
 * @example
 * ```ts
 * const flags = createStageFlags(["stage2_auto_run_storage"]);
 * flags.isEnabled("stage2_auto_run_storage"); // true
 * flags.isEnabled("stage1_trusted_delivery"); // false: a later stage never implies an earlier one
 * ```
 * @throws RolloutError `ASP_ROLLOUT_UNKNOWN_KEY` for a name that is not one of the twelve flags.
 */
export function createStageFlags(on: Iterable<StageFlag>, source: ValueSource = BUILT_IN): StageFlags {
  const states: Partial<Record<StageFlag, StageFlagState>> = {};
  for (const flag of on) {
    if (!(STAGE_FLAGS as ReadonlyArray<string>).includes(flag)) {
      throw rolloutError("ASP_ROLLOUT_UNKNOWN_KEY", "not one of the twelve stage flags", { key: String(flag) });
    }
    states[flag] = { enabled: true, source };
  }
  return new StageFlags(states);
}

/** Inputs of {@link resolveStageFlags}. */
export interface StageFlagInputs {
  /** The process environment (the caller passes it; the library never reads `process.env`). */
  readonly env?: Environment;
  /** Optional host alias prefix replacing `OPENAI4S_` (e.g. `ASP_`); already checked. */
  readonly aliasPrefix?: string | undefined;
  /** Stage flags from the trusted deployment configuration (already parsed). */
  readonly deployment?: Readonly<Partial<Record<StageFlag, boolean>>>;
  /** Label of the deployment configuration for reporting (e.g. its file path). */
  readonly deploymentOrigin?: string | null;
}

/**
 * Resolve the twelve flags: the environment variable if set, else the deployment configuration,
 * else off. Only trusted deployment inputs can turn a stage on; project and frame configuration
 * cannot (see {@link parseAutoModeConfig}).
 *
 * @throws RolloutError `ASP_ROLLOUT_EMPTY_VALUE` / `ASP_ROLLOUT_BAD_BOOLEAN` for a bad variable;
 *   `ASP_ROLLOUT_ALIAS_CONFLICT` when a variable and its alias disagree.
 */
export function resolveStageFlags(inputs: StageFlagInputs = {}): StageFlags {
  const env = inputs.env ?? {};
  const states: Partial<Record<StageFlag, StageFlagState>> = {};
  for (const flag of STAGE_FLAGS) {
    const fromEnv = readEnvSetting(env, STAGE_ENV_VARS[flag], inputs.aliasPrefix, parseBoolean);
    const fromDeployment = inputs.deployment?.[flag];
    if (fromEnv !== undefined) {
      states[flag] = { enabled: fromEnv.value, source: sourceOf("env", fromEnv.name) };
    } else if (fromDeployment !== undefined) {
      states[flag] = {
        enabled: fromDeployment,
        source: sourceOf("deployment", `stages.${flag}`, inputs.deploymentOrigin ?? null),
      };
    }
  }
  return new StageFlags(states);
}
