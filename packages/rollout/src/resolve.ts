import { BUDGET_LIMITS, type BudgetLimit, type SelectionSource, STAGE_FLAGS, type StageFlag } from "@asp/contracts";
import {
  BUDGET_TABLE,
  type BudgetSpec,
  defaultBudgets,
  envBudgetSource,
  isBudgetActive,
  type ResolvedBudgets,
  readBudgetEnv,
  tightenBudgets,
} from "./budgets.js";
import { type ConfigScope, type ParsedAutoModeConfig, parseAutoModeConfig, type SelectionKey } from "./config.js";
import { checkAliasPrefix, checkUnknownVariables, type Environment } from "./env.js";
import { BUILT_STAGES, resolveStageFlags, STAGE_ENV_VARS, type StageFlags } from "./flags.js";
import {
  type LegacyReviewAuto,
  type Normalization,
  type ResolvedSelection,
  resolveSelection,
  type SessionState,
} from "./selection.js";
import { sourceOf, type ValueSource } from "./sources.js";

/** Everything {@link resolveConfiguration} reads. The caller supplies it all; nothing is read from globals. */
export interface ResolveConfigurationInputs {
  /** The environment (the CLI passes `process.env`). */
  readonly env?: Environment;
  /** Optional host alias prefix replacing `OPENAI4S_` (`ASP_` -> `ASP_STAGE1_TRUSTED_DELIVERY`). */
  readonly aliasPrefix?: string;
  /** Trusted deployment configuration (parsed JSON, `AutoModeConfig` shape). */
  readonly deployment?: unknown;
  readonly deploymentOrigin?: string;
  /** Project configuration (parsed JSON); may not set stage flags. */
  readonly project?: unknown;
  readonly projectOrigin?: string;
  /** Frame configuration (parsed JSON); may not set stage flags. */
  readonly frame?: unknown;
  readonly frameOrigin?: string;
  /** The legacy `review:auto:<root_frame_id>` boolean, if the host has one for this frame. */
  readonly legacyReviewAuto?: LegacyReviewAuto;
  /** Whether this is an imported (quarantined) session. */
  readonly session?: SessionState;
}

const BRAND = "@asp/RolloutConfiguration";

/**
 * What Auto Repair (Stage 5) does under a configuration (ADR 0006):
 *
 * - `off`: Stage 5 is off, or result review is not `auto_fix`; findings never start a repair.
 * - `safe_rollback_unavailable`: Stage 5 is on with `auto_fix` but Stage 9 (safe repair
 *   checkpoint) is off. Repair never starts without a committed safe checkpoint, and nothing
 *   commits one, so a run whose review finds issues ends `safe_rollback_unavailable` before any
 *   Repair starts. Stage 9 is not switched on implicitly.
 * - `checkpointed`: Stage 5 and Stage 9 are on with `auto_fix`; Repair starts only from a committed
 *   checkpoint within a bounded mutation set.
 *
 * The Auto Mode runtime (`@asp/auto-mode`) applies the same rule to a run's frozen flags.
 */
export type RepairAdmission = "off" | "safe_rollback_unavailable" | "checkpointed";

/** The {@link RepairAdmission} of these flags and this selection (pure). */
export function repairAdmission(flags: StageFlags, selection: ResolvedSelection["selection"]): RepairAdmission {
  if (!flags.isEnabled("stage5_auto_repair") || selection.result_review_mode !== "auto_fix") return "off";
  return flags.isEnabled("stage9_safe_repair_checkpoint") ? "checkpointed" : "safe_rollback_unavailable";
}

/** The resolved rollout configuration: flags, selection and budgets, each value with its source. */
export interface ResolvedConfiguration {
  readonly $$type: typeof BRAND;
  readonly version: 1;
  readonly flags: StageFlags;
  readonly selection: ResolvedSelection;
  readonly budgets: ResolvedBudgets;
  /** What Auto Repair does under these flags and this selection ({@link repairAdmission}). */
  readonly repair: RepairAdmission;
}

/** True for a {@link ResolvedConfiguration}, including one from another copy of this package. */
export function isResolvedConfiguration(value: unknown): value is ResolvedConfiguration {
  return typeof value === "object" && value !== null && (value as { $$type?: unknown }).$$type === BRAND;
}

function parseScope(value: unknown, scope: ConfigScope, origin: string | undefined): ParsedAutoModeConfig | undefined {
  if (value === undefined) return undefined;
  return parseAutoModeConfig(value, scope, origin === undefined ? {} : { origin });
}

function configBudgetSource(config: ParsedAutoModeConfig) {
  return (limit: BudgetLimit): ValueSource => sourceOf(config.scope, `budgets.${limit}`, config.origin);
}

/**
 * Parse and resolve everything at once. Any bad value anywhere rejects the whole configuration
 * (nothing is partially applied). Stage flags: environment over deployment configuration over
 * off. Selection: {@link resolveSelection}. Budgets: the built-in ceilings, then the deployment
 * configuration, the environment, the project and the frame, each layer only tightening.
 *
 * @example
 * ```ts
 * const config = resolveConfiguration({ env: process.env, deployment: JSON.parse(text), deploymentOrigin: "deploy.json" });
 * if (config.flags.isEnabled("stage2_auto_run_storage")) persist(config.selection.selection);
 * ```
 * @throws RolloutError any code of {@link parseAutoModeConfig}, {@link resolveStageFlags},
 *   {@link resolveSelection} and {@link tightenBudgets}; `ASP_ROLLOUT_UNKNOWN_KEY` for an unknown
 *   variable in the contract's namespaces; `ASP_ROLLOUT_INVALID_OPTION` for a bad alias prefix;
 *   `ASP_ROLLOUT_STAGE_NOT_BUILT` when the environment or the deployment configuration turns on
 *   a stage that is not built ({@link BUILT_STAGES}).
 */
export function resolveConfiguration(inputs: ResolveConfigurationInputs = {}): ResolvedConfiguration {
  const env = inputs.env ?? {};
  const aliasPrefix = checkAliasPrefix(inputs.aliasPrefix);
  checkUnknownVariables(
    env,
    new Set([...Object.values(STAGE_ENV_VARS), ...BUDGET_LIMITS.map((l) => BUDGET_TABLE[l].env)]),
    aliasPrefix,
  );
  const deployment = parseScope(inputs.deployment, "deployment", inputs.deploymentOrigin);
  const project = parseScope(inputs.project, "project", inputs.projectOrigin);
  const frame = parseScope(inputs.frame, "frame", inputs.frameOrigin);

  const flags = resolveStageFlags({
    env,
    aliasPrefix,
    ...(deployment === undefined ? {} : { deployment: deployment.stages, deploymentOrigin: deployment.origin }),
  });

  const budgetEnv = readBudgetEnv(env, aliasPrefix);
  let budgets = defaultBudgets();
  if (deployment !== undefined) budgets = tightenBudgets(budgets, deployment.budgets, configBudgetSource(deployment));
  budgets = tightenBudgets(budgets, budgetEnv.overrides, envBudgetSource(budgetEnv.names));
  if (project !== undefined) budgets = tightenBudgets(budgets, project.budgets, configBudgetSource(project));
  if (frame !== undefined) budgets = tightenBudgets(budgets, frame.budgets, configBudgetSource(frame));

  const selection = resolveSelection({
    ...(inputs.session === undefined ? {} : { session: inputs.session }),
    ...(frame === undefined ? {} : { frame }),
    ...(project === undefined ? {} : { project }),
    ...(deployment === undefined ? {} : { deployment }),
    ...(inputs.legacyReviewAuto === undefined ? {} : { legacyReviewAuto: inputs.legacyReviewAuto }),
  });

  const repair = repairAdmission(flags, selection.selection);
  return Object.freeze({ $$type: BRAND, version: 1, flags, selection, budgets, repair });
}

/** One value and its source, as `asp config show` prints it. */
export interface ReportedValue<T> {
  readonly value: T;
  readonly source: ValueSource;
}

/**
 * What `asp config show --json` prints: every flag (and whether its stage is built), the
 * selection and every budget, with sources.
 */
export interface ConfigurationReport {
  /** What Auto Repair does under this configuration (ADR 0006). */
  readonly repair: RepairAdmission;
  /** The stages that are built, in stage order ({@link BUILT_STAGES}); only these can be on. */
  readonly built_stages: ReadonlyArray<StageFlag>;
  readonly stages: Readonly<
    Record<
      StageFlag,
      {
        readonly enabled: boolean;
        /** Whether the stage is built; turning on one that is not is `ASP_ROLLOUT_STAGE_NOT_BUILT`. */
        readonly built: boolean;
        readonly env: string;
        readonly source: ValueSource;
      }
    >
  >;
  readonly selection: {
    readonly preset: ReportedValue<string>;
    readonly result_review_mode: ReportedValue<string>;
    readonly approvals_reviewer: ReportedValue<string>;
    /** The one selection source that won. */
    readonly source: SelectionSource;
    readonly normalized: boolean;
    readonly normalizations: ReadonlyArray<Normalization>;
  };
  readonly budgets: Readonly<
    Record<
      BudgetLimit,
      {
        readonly value: number;
        readonly ceiling: number;
        readonly unit: BudgetSpec["unit"];
        readonly env: string;
        readonly owners: ReadonlyArray<StageFlag>;
        /** Whether an owning stage is on, i.e. whether the budget is consumed at all. */
        readonly active: boolean;
        readonly source: ValueSource;
      }
    >
  >;
}

/** The JSON-ready report of a resolved configuration (pure). */
export function configurationReport(config: ResolvedConfiguration): ConfigurationReport {
  const pick = (key: SelectionKey): ReportedValue<string> => ({
    value: config.selection.selection[key],
    source: config.selection.sources[key],
  });
  return {
    repair: config.repair,
    built_stages: [...BUILT_STAGES],
    stages: Object.fromEntries(
      STAGE_FLAGS.map((flag) => {
        const state = config.flags.describe(flag);
        return [
          flag,
          {
            enabled: state.enabled,
            built: BUILT_STAGES.includes(flag),
            env: STAGE_ENV_VARS[flag],
            source: state.source,
          },
        ];
      }),
    ) as ConfigurationReport["stages"],
    selection: {
      preset: pick("preset"),
      result_review_mode: pick("result_review_mode"),
      approvals_reviewer: pick("approvals_reviewer"),
      source: config.selection.selection.source,
      normalized: config.selection.selection.normalized,
      normalizations: config.selection.normalizations,
    },
    budgets: Object.fromEntries(
      BUDGET_LIMITS.map((limit) => {
        const spec = BUDGET_TABLE[limit];
        return [
          limit,
          {
            value: config.budgets.values[limit],
            ceiling: spec.ceiling,
            unit: spec.unit,
            env: spec.env,
            owners: spec.owners,
            active: isBudgetActive(limit, config.flags),
            source: config.budgets.sources[limit],
          },
        ];
      }),
    ) as ConfigurationReport["budgets"],
  };
}
