import { STAGE_FLAGS, type StageFlag } from "@asp/contracts";
import { aliasOf, type Environment, readEnvSetting } from "./env.js";
import { rolloutError } from "./errors.js";
import { parseBoolean } from "./parse.js";
import { BUILT_IN, formatSource, sourceOf, type ValueSource } from "./sources.js";

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

/**
 * The stages that are built: turning one of them on changes what the host does. Turning on any
 * other flag is refused with `ASP_ROLLOUT_STAGE_NOT_BUILT` until the issue that builds that stage
 * adds it here, so an operator never believes a stage is at work when nothing reads its flag.
 * Setting an unbuilt flag explicitly off is always accepted. `asp config show --json` prints this
 * list as `built_stages` (and `built` per stage).
 */
export const BUILT_STAGES: ReadonlyArray<StageFlag> = Object.freeze([
  "stage2_auto_run_storage",
  "stage3_scientific_review_shadow",
  "stage4_review_completion_gate",
  "stage5_auto_repair",
  "stage6_guardian_shadow",
  "stage7_guardian_enforcement",
  "stage8_loop_circuits",
  "stage9_safe_repair_checkpoint",
] satisfies StageFlag[]);

function checkFlagName(flag: string): asserts flag is StageFlag {
  if (!(STAGE_FLAGS as ReadonlyArray<string>).includes(flag)) {
    throw rolloutError("ASP_ROLLOUT_UNKNOWN_KEY", "not one of the twelve stage flags", { key: flag });
  }
}

/**
 * Whether `flag` names a built stage (one of {@link BUILT_STAGES}), i.e. whether it may be turned on.
 *
 * @example
 * ```ts
 * isStageBuilt("stage2_auto_run_storage"); // true
 * isStageBuilt("stage10_effect_reconciliation"); // false: turning it on is ASP_ROLLOUT_STAGE_NOT_BUILT
 * ```
 * @throws RolloutError `ASP_ROLLOUT_UNKNOWN_KEY` for a name that is not one of the twelve flags.
 */
export function isStageBuilt(flag: StageFlag): boolean {
  checkFlagName(String(flag));
  return BUILT_STAGES.includes(flag);
}

/** Where an unbuilt flag was turned on: its setting, and every name or file key that says so. */
interface TurnedOn {
  readonly flag: StageFlag;
  readonly source: ValueSource;
  /** Variables that turn it on (the contract name and, if set too, its alias). */
  readonly variables: ReadonlyArray<string>;
  /** The deployment configuration's `stages.<flag>` when it turns it on too, with its file. */
  readonly deployment?: { readonly key: string; readonly origin: string | null };
}

function turnOffStep(on: ReadonlyArray<TurnedOn>): string {
  const steps: string[] = [];
  const variables = on.flatMap((o) => o.variables);
  if (variables.length > 0) steps.push(`unset ${variables.join(" ")}`);
  const byFile = new Map<string | null, string[]>();
  for (const o of on) {
    if (o.deployment !== undefined)
      byFile.set(o.deployment.origin, [...(byFile.get(o.deployment.origin) ?? []), o.deployment.key]);
  }
  for (const [origin, keys] of byFile) {
    const them = keys.length === 1 ? "it" : "them";
    steps.push(`remove ${keys.join(", ")} from ${origin ?? "the deployment configuration"} (or set ${them} to false)`);
  }
  const other = on.filter((o) => o.variables.length === 0 && o.deployment === undefined);
  if (other.length > 0) {
    steps.push(`leave ${other.map((o) => o.flag).join(", ")} out of the flags you turn on`);
  }
  return steps.join("; ");
}

/** The one refusal of every way to turn on an unbuilt stage (`on` is non-empty, in stage order). */
function notBuiltError(on: ReadonlyArray<TurnedOn>) {
  const [first, ...rest] = on as [TurnedOn, ...TurnedOn[]];
  const also = rest.length === 0 ? "" : ` (nor are ${rest.map((o) => o.flag).join(", ")}, also turned on)`;
  const where = first.source.kind === "built_in" ? "" : ` by ${formatSource(first.source)}`;
  const key = first.source.key ?? first.flag;
  return rolloutError(
    "ASP_ROLLOUT_STAGE_NOT_BUILT",
    `${first.flag} is turned on${where}, but that stage is not built yet${also}: turning it on would change nothing. ` +
      `Built stages: ${BUILT_STAGES.join(", ")}. Turn it off: ${turnOffStep(on)}`,
    { key, source: first.source.kind },
    {
      data: {
        stage: first.flag,
        origin: first.source.origin,
        unbuilt: on.map((o) => ({ stage: o.flag, source: o.source })),
        built: [...BUILT_STAGES],
      },
    },
  );
}

const BRAND = "@asp/StageFlags";

/** One stage flag's resolved value and where it came from. */
export interface StageFlagState {
  readonly enabled: boolean;
  readonly source: ValueSource;
}

/** The per-flag states a {@link StageFlags} is built from (a flag left out is off, built in). */
export type StageFlagStates = Readonly<Partial<Record<StageFlag, StageFlagState>>>;
type States = StageFlagStates;

function completeStates(states: States): ReadonlyMap<StageFlag, StageFlagState> {
  return new Map(STAGE_FLAGS.map((flag) => [flag, states[flag] ?? { enabled: false, source: BUILT_IN }]));
}

// Set by a static block of StageFlags: the only way past the not-built check, for this package's
// own tests of code that counts an unbuilt stage's budgets (see stageFlagsForTests).
let withUncheckedStates: (flags: StageFlags, states: States) => StageFlags;

/**
 * The resolved stage flags. {@link StageFlags.isEnabled} is the only way code asks whether a
 * stage is on; each flag is independent, so no stage ever implies another. Only a built stage
 * ({@link BUILT_STAGES}) can be on.
 */
export class StageFlags {
  /** Brand, so a copy from another package instance is still recognised ({@link isStageFlags}). */
  readonly $$type: typeof BRAND = BRAND;
  readonly version = 1 as const;
  #states: ReadonlyMap<StageFlag, StageFlagState>;

  static {
    withUncheckedStates = (flags, states) => {
      flags.#states = completeStates(states);
      return flags;
    };
  }

  /**
   * Prefer {@link resolveStageFlags} or {@link createStageFlags}. Missing flags are off (built-in).
   *
   * @throws RolloutError `ASP_ROLLOUT_STAGE_NOT_BUILT` when a flag that is not in {@link BUILT_STAGES} is on.
   */
  constructor(states: StageFlagStates) {
    const on = STAGE_FLAGS.flatMap((flag): TurnedOn[] => {
      const state = states[flag];
      if (state?.enabled !== true || BUILT_STAGES.includes(flag)) return [];
      const variables = state.source.kind === "env" && state.source.key !== null ? [state.source.key] : [];
      const deployment =
        state.source.kind === "deployment" && state.source.key !== null
          ? { key: state.source.key, origin: state.source.origin }
          : undefined;
      return [{ flag, source: state.source, variables, ...(deployment === undefined ? {} : { deployment }) }];
    });
    if (on.length > 0) throw notBuiltError(on);
    this.#states = completeStates(states);
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

function onStates(on: Iterable<StageFlag>, source: ValueSource): States {
  const states: Partial<Record<StageFlag, StageFlagState>> = {};
  for (const flag of on) {
    checkFlagName(String(flag));
    states[flag] = { enabled: true, source };
  }
  return states;
}

/**
 * Flags for tests and compositions that already know which stages are on (source: `built_in`
 * for off flags, the given `source` for on flags). Only built stages ({@link BUILT_STAGES}) can
 * be on; there is no option to turn on another.
 *
 * @example
 * ```ts
 * const flags = createStageFlags(["stage2_auto_run_storage"]);
 * flags.isEnabled("stage2_auto_run_storage"); // true
 * flags.isEnabled("stage1_trusted_delivery"); // false: a later stage never implies an earlier one
 * ```
 * @throws RolloutError `ASP_ROLLOUT_UNKNOWN_KEY` for a name that is not one of the twelve flags;
 *   `ASP_ROLLOUT_STAGE_NOT_BUILT` for a stage that is not built.
 */
export function createStageFlags(on: Iterable<StageFlag>, source: ValueSource = BUILT_IN): StageFlags {
  return new StageFlags(onStates(on, source));
}

/**
 * Flags with any stages on, built or not. Internal: not exported from `index.ts`, so no caller
 * outside this package can reach it. Only this package's own tests use it, to drive the budget
 * meter's counting and the Stage 5 / Stage 9 repair admission of ADR 0006 without the public
 * flag checks.
 */
export function stageFlagsForTests(on: Iterable<StageFlag>): StageFlags {
  return withUncheckedStates(new StageFlags({}), onStates(on, BUILT_IN));
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
 * cannot (see {@link parseAutoModeConfig}). Only a built stage ({@link BUILT_STAGES}) may be
 * turned on; an unbuilt one set to off is fine.
 *
 * @throws RolloutError `ASP_ROLLOUT_EMPTY_VALUE` / `ASP_ROLLOUT_BAD_BOOLEAN` for a bad variable;
 *   `ASP_ROLLOUT_ALIAS_CONFLICT` when a variable and its alias disagree;
 *   `ASP_ROLLOUT_STAGE_NOT_BUILT` when an unbuilt stage is turned on, naming the first such flag,
 *   its variable or deployment key, and how to turn every one of them off (`data.unbuilt`).
 */
export function resolveStageFlags(inputs: StageFlagInputs = {}): StageFlags {
  const env = inputs.env ?? {};
  const states: Partial<Record<StageFlag, StageFlagState>> = {};
  const unbuilt: TurnedOn[] = [];
  for (const flag of STAGE_FLAGS) {
    const fromEnv = readEnvSetting(env, STAGE_ENV_VARS[flag], inputs.aliasPrefix, parseBoolean);
    const fromDeployment = inputs.deployment?.[flag];
    const deploymentSource = sourceOf("deployment", `stages.${flag}`, inputs.deploymentOrigin ?? null);
    if (fromEnv !== undefined) {
      states[flag] = { enabled: fromEnv.value, source: sourceOf("env", fromEnv.name) };
    } else if (fromDeployment !== undefined) {
      states[flag] = { enabled: fromDeployment, source: deploymentSource };
    }
    const state = states[flag];
    if (state?.enabled === true && !BUILT_STAGES.includes(flag)) {
      // Name every setting that turns it on, so one round of changes turns it off.
      const names = [
        STAGE_ENV_VARS[flag],
        ...(inputs.aliasPrefix === undefined ? [] : [aliasOf(STAGE_ENV_VARS[flag], inputs.aliasPrefix)]),
      ];
      const variables = fromEnv === undefined ? [] : names.filter((name) => env[name] !== undefined);
      const deployment =
        fromDeployment === true
          ? { key: deploymentSource.key ?? `stages.${flag}`, origin: deploymentSource.origin }
          : undefined;
      unbuilt.push({ flag, source: state.source, variables, ...(deployment === undefined ? {} : { deployment }) });
    }
  }
  if (unbuilt.length > 0) throw notBuiltError(unbuilt);
  return new StageFlags(states);
}
