import { BUDGET_LIMITS, type BudgetLimit, type StageFlag } from "@asp/contracts";
import { type Environment, readEnvSetting } from "./env.js";
import { rolloutError } from "./errors.js";
import type { StageFlags } from "./flags.js";
import { parsePositiveNumber, type ValueLocation } from "./parse.js";
import { BUILT_IN, formatSource, sourceOf, type ValueSource } from "./sources.js";

/** The fixed size of the Guardian rolling circuit window; it is never configurable. */
export const GUARDIAN_WINDOW_SIZE = 50;

/** One row of the contract's "Frozen bounded budgets" table, plus the stage that owns it. */
export interface BudgetSpec {
  readonly limit: BudgetLimit;
  /** The contract's environment variable name. */
  readonly env: string;
  /** The frozen default ceiling. Configuration may only lower it. */
  readonly ceiling: number;
  /** Whole numbers only (every limit but `extra_token_multiplier`). */
  readonly integer: boolean;
  /** Unit shown in the configuration guide and `asp config show`. */
  readonly unit: "count" | "seconds" | "multiplier";
  /** Never configurable to anything but its ceiling (`guardian_window_size`). */
  readonly fixed: boolean;
  /** The contract's wording for the limit. */
  readonly description: string;
  /**
   * The rollout stages whose component consumes this budget. A budget is consumed only while
   * at least one of them is on; with all of them off it records nothing and refuses nothing.
   */
  readonly owners: ReadonlyArray<StageFlag>;
}

const REVIEW: ReadonlyArray<StageFlag> = ["stage3_scientific_review_shadow", "stage4_review_completion_gate"];
const REPAIR: ReadonlyArray<StageFlag> = ["stage5_auto_repair"];
const GUARDIAN: ReadonlyArray<StageFlag> = ["stage7_guardian_enforcement"];
const LOOPS: ReadonlyArray<StageFlag> = ["stage8_loop_circuits"];

function spec(
  limit: BudgetLimit,
  env: string,
  ceiling: number,
  unit: BudgetSpec["unit"],
  owners: ReadonlyArray<StageFlag>,
  description: string,
): BudgetSpec {
  return Object.freeze({
    limit,
    env,
    ceiling,
    integer: unit !== "multiplier",
    unit,
    fixed: limit === "guardian_window_size",
    description,
    owners: Object.freeze([...owners]),
  });
}

/**
 * The thirteen limits with their exact environment variable names and default ceilings
 * (Auto Mode contract, "Frozen bounded budgets"), and the stage(s) owning each.
 */
export const BUDGET_TABLE: Readonly<Record<BudgetLimit, BudgetSpec>> = Object.freeze({
  max_review_rounds: spec(
    "max_review_rounds",
    "OPENAI4S_AUTO_MAX_REVIEW_ROUNDS",
    2,
    "count",
    REVIEW,
    "Reviewer attempts per candidate, including at most one transient retry",
  ),
  max_repair_rounds: spec("max_repair_rounds", "OPENAI4S_AUTO_MAX_REPAIR_ROUNDS", 2, "count", REPAIR, "Repair rounds"),
  repair_turns_per_round: spec(
    "repair_turns_per_round",
    "OPENAI4S_AUTO_REPAIR_TURNS_PER_ROUND",
    12,
    "count",
    REPAIR,
    "Repair Agent turns per round",
  ),
  max_extra_cells: spec("max_extra_cells", "OPENAI4S_AUTO_MAX_EXTRA_CELLS", 30, "count", REPAIR, "Additional Cells"),
  wall_time_s: spec(
    "wall_time_s",
    "OPENAI4S_AUTO_WALL_TIME_S",
    900,
    "seconds",
    ["stage4_review_completion_gate", "stage5_auto_repair"],
    "Auto Run wall time",
  ),
  extra_token_multiplier: spec(
    "extra_token_multiplier",
    "OPENAI4S_AUTO_EXTRA_TOKEN_MULTIPLIER",
    1.5,
    "multiplier",
    [...REVIEW, ...REPAIR],
    "Additional token budget relative to the initial turn",
  ),
  repeated_finding_limit: spec(
    "repeated_finding_limit",
    "OPENAI4S_AUTO_REPEATED_FINDING_LIMIT",
    2,
    "count",
    LOOPS,
    "Repeated unchanged finding",
  ),
  same_action_no_delta_limit: spec(
    "same_action_no_delta_limit",
    "OPENAI4S_AUTO_SAME_ACTION_NO_DELTA_LIMIT",
    3,
    "count",
    LOOPS,
    "Same action digest without a durable delta",
  ),
  no_progress_turn_limit: spec(
    "no_progress_turn_limit",
    "OPENAI4S_AUTO_NO_PROGRESS_TURN_LIMIT",
    5,
    "count",
    LOOPS,
    "Turns without Artifact/Plan/Evidence progress",
  ),
  guardian_timeout_s: spec(
    "guardian_timeout_s",
    "OPENAI4S_AUTO_GUARDIAN_TIMEOUT_S",
    90,
    "seconds",
    GUARDIAN,
    "Guardian decision timeout",
  ),
  guardian_consecutive_denial_limit: spec(
    "guardian_consecutive_denial_limit",
    "OPENAI4S_AUTO_GUARDIAN_CONSECUTIVE_DENIAL_LIMIT",
    3,
    "count",
    GUARDIAN,
    "Consecutive Guardian denials before circuit-open",
  ),
  guardian_window_size: spec(
    "guardian_window_size",
    "OPENAI4S_AUTO_GUARDIAN_WINDOW_SIZE",
    GUARDIAN_WINDOW_SIZE,
    "count",
    GUARDIAN,
    "Guardian rolling circuit window (decisions)",
  ),
  guardian_window_denial_limit: spec(
    "guardian_window_denial_limit",
    "OPENAI4S_AUTO_GUARDIAN_WINDOW_DENIAL_LIMIT",
    10,
    "count",
    GUARDIAN,
    "Denials in that window before circuit-open",
  ),
});

/** The full set of thirteen limits (the `budgets` object of an Auto Run). */
export type BudgetSet = Readonly<Record<BudgetLimit, number>>;

/** A partial set of limits, as one configuration layer states it. */
export type BudgetOverrides = Readonly<Partial<Record<BudgetLimit, number>>>;

/** The frozen default ceilings. */
export const DEFAULT_BUDGETS: BudgetSet = Object.freeze(
  Object.fromEntries(BUDGET_LIMITS.map((limit) => [limit, BUDGET_TABLE[limit].ceiling])) as Record<BudgetLimit, number>,
);

/** Resolved budgets: every limit's value and the source that set it. */
export interface ResolvedBudgets {
  readonly values: BudgetSet;
  readonly sources: Readonly<Record<BudgetLimit, ValueSource>>;
}

/** The built-in ceilings, all from the built-in source. */
export function defaultBudgets(): ResolvedBudgets {
  return {
    values: DEFAULT_BUDGETS,
    sources: Object.freeze(
      Object.fromEntries(BUDGET_LIMITS.map((l) => [l, BUILT_IN])) as Record<BudgetLimit, ValueSource>,
    ),
  };
}

/**
 * Parse one budget value (a JSON number or a decimal string).
 *
 * @throws RolloutError `ASP_ROLLOUT_EMPTY_VALUE`, `ASP_ROLLOUT_BAD_NUMBER`, or
 *   `ASP_ROLLOUT_WINDOW_FIXED` when `guardian_window_size` is anything but 50.
 */
export function parseBudgetValue(limit: BudgetLimit, value: unknown, at: ValueLocation): number {
  const spec = BUDGET_TABLE[limit];
  const n = parsePositiveNumber(value, spec.integer, at);
  if (spec.fixed && n !== spec.ceiling) {
    throw rolloutError(
      "ASP_ROLLOUT_WINDOW_FIXED",
      `${at.key} is fixed at ${spec.ceiling} so the denial-rate denominator cannot change; remove the setting`,
      at,
      { data: { limit } },
    );
  }
  return n;
}

/**
 * Apply one configuration layer on top of `base`. Every limit is monotonic: a tighter value is a
 * lower number (including `extra_token_multiplier`), and only tighter or equal values are
 * accepted. Pure; `base` is not changed.
 *
 * @example
 * ```ts
 * const d = tightenBudgets(defaultBudgets(), { wall_time_s: 600 }, sourceOf("deployment", "budgets.wall_time_s"));
 * d.values.wall_time_s; // 600
 * tightenBudgets(d, { wall_time_s: 700 }, sourceOf("project")); // throws ASP_ROLLOUT_BUDGET_LOOSENED
 * ```
 * @throws RolloutError `ASP_ROLLOUT_BUDGET_LOOSENED` when a value is above the limit in force,
 *   `ASP_ROLLOUT_WINDOW_FIXED` for a window size other than 50, `ASP_ROLLOUT_BAD_NUMBER` for a
 *   non-positive or fractional count, `ASP_ROLLOUT_UNKNOWN_KEY` for an unknown limit.
 */
export function tightenBudgets(
  base: ResolvedBudgets,
  overrides: BudgetOverrides,
  source: ValueSource | ((limit: BudgetLimit) => ValueSource),
): ResolvedBudgets {
  const values: Record<string, number> = { ...base.values };
  const sources: Record<string, ValueSource> = { ...base.sources };
  for (const [limit, value] of Object.entries(overrides)) {
    if (value === undefined) continue;
    const key = limit as BudgetLimit;
    const at = (s: ValueSource): ValueLocation => ({ key: s.key ?? key, source: s.kind });
    if (!(BUDGET_LIMITS as ReadonlyArray<string>).includes(limit)) {
      throw rolloutError("ASP_ROLLOUT_UNKNOWN_KEY", `${limit} is not one of the thirteen budget limits`, {
        key: limit,
      });
    }
    const src = typeof source === "function" ? source(key) : source;
    const parsed = parseBudgetValue(key, value, at(src));
    const current = base.values[key];
    if (parsed > current) {
      const above = base.sources[key];
      throw rolloutError(
        "ASP_ROLLOUT_BUDGET_LOOSENED",
        `${src.key ?? key} may only tighten ${key}: ${parsed} is looser than ${current} set by ${formatSource(above)}`,
        at(src),
        { data: { limit: key, attempted: parsed, inForce: current, inForceSource: above } },
      );
    }
    values[key] = parsed;
    sources[key] = src;
  }
  return { values: Object.freeze(values) as BudgetSet, sources: Object.freeze(sources) as ResolvedBudgets["sources"] };
}

/**
 * Read the thirteen budget variables (and their aliases) from the environment.
 *
 * @throws RolloutError as {@link parseBudgetValue}; `ASP_ROLLOUT_ALIAS_CONFLICT`.
 */
export function readBudgetEnv(
  env: Environment,
  aliasPrefix: string | undefined,
): { readonly overrides: BudgetOverrides; readonly names: Readonly<Partial<Record<BudgetLimit, string>>> } {
  const overrides: Partial<Record<BudgetLimit, number>> = {};
  const names: Partial<Record<BudgetLimit, string>> = {};
  for (const limit of BUDGET_LIMITS) {
    const reading = readEnvSetting(env, BUDGET_TABLE[limit].env, aliasPrefix, (raw, at) =>
      parseBudgetValue(limit, raw, at),
    );
    if (reading !== undefined) {
      overrides[limit] = reading.value;
      names[limit] = reading.name;
    }
  }
  return { overrides, names };
}

/** A budget that is counted; the window size is a denominator, not a counter. */
export type ConsumableBudget = Exclude<BudgetLimit, "guardian_window_size">;

/** Outcome of {@link BudgetMeter.admit}. */
export type Admission =
  | {
      /** The owning stage(s) are off: nothing recorded, nothing refused. */
      readonly admitted: true;
      readonly active: false;
      readonly limit: ConsumableBudget;
    }
  | {
      readonly admitted: true;
      readonly active: true;
      readonly limit: ConsumableBudget;
      /** Consumed after admitting this amount. */
      readonly consumed: number;
      readonly ceiling: number;
    }
  | {
      /** Admitting would exceed the limit: the caller must not start the action. */
      readonly admitted: false;
      readonly active: true;
      readonly limit: ConsumableBudget;
      readonly consumed: number;
      readonly ceiling: number;
      readonly reason: "budget_exhausted";
    };

/** Options of {@link createBudgetMeter}. */
export interface BudgetMeterOptions {
  /** The run's frozen limits. */
  readonly budgets: BudgetSet;
  /** The resolved stage flags; a budget counts only while one of its owners is on. */
  readonly flags: StageFlags;
  /** Counters restored from the durable ledger on reopen: a limit never replenishes itself. */
  readonly consumed?: Readonly<Partial<Record<ConsumableBudget, number>>>;
  /** Tokens of the initial turn; required to admit `extra_token_multiplier` consumption (in tokens). */
  readonly initialTurnTokens?: number;
}

/** True when at least one owning stage of `limit` is on. */
export function isBudgetActive(limit: BudgetLimit, flags: StageFlags): boolean {
  return BUDGET_TABLE[limit].owners.some((stage) => flags.isEnabled(stage));
}

/**
 * Admission control for one run's budgets. A limit is checked before admitting the next
 * action: `admit` records the amount only if it fits. While every owning stage of a budget is
 * off, `admit` is a no-op that records nothing and never refuses.
 */
export class BudgetMeter {
  readonly #budgets: BudgetSet;
  readonly #flags: StageFlags;
  readonly #consumed = new Map<ConsumableBudget, number>();
  readonly #initialTurnTokens: number | undefined;

  /** Prefer {@link createBudgetMeter}. */
  constructor(options: BudgetMeterOptions) {
    this.#budgets = options.budgets;
    this.#flags = options.flags;
    this.#initialTurnTokens = options.initialTurnTokens;
    for (const [limit, n] of Object.entries(options.consumed ?? {})) {
      if (n !== undefined) this.#consumed.set(limit as ConsumableBudget, n);
    }
  }

  /** The ceiling `admit` compares against (tokens for `extra_token_multiplier`). */
  ceiling(limit: ConsumableBudget): number {
    const value = this.#budgets[limit];
    if (limit !== "extra_token_multiplier") return value;
    if (this.#initialTurnTokens === undefined) {
      throw rolloutError(
        "ASP_ROLLOUT_INVALID_OPTION",
        "extra_token_multiplier consumption is counted in tokens; create the meter with initialTurnTokens",
        { key: "initialTurnTokens", source: "options" },
      );
    }
    return Math.floor(value * this.#initialTurnTokens);
  }

  /** Whether the budget counts now (an owning stage is on). */
  isActive(limit: ConsumableBudget): boolean {
    return isBudgetActive(limit, this.#flags);
  }

  /** What has been consumed so far (0 when inactive). */
  consumed(limit: ConsumableBudget): number {
    return this.#consumed.get(limit) ?? 0;
  }

  /** True when an active budget has no room left for another unit. */
  exhausted(limit: ConsumableBudget): boolean {
    return this.isActive(limit) && this.consumed(limit) >= this.ceiling(limit);
  }

  /**
   * Ask to consume `amount` (default 1) of `limit` before starting the action.
   *
   * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` for a negative or non-finite amount, or for
   *   token consumption on a meter without `initialTurnTokens`.
   */
  admit(limit: ConsumableBudget, amount = 1): Admission {
    if (!Number.isFinite(amount) || amount < 0) {
      throw rolloutError("ASP_ROLLOUT_INVALID_OPTION", "amount must be a finite number >= 0", {
        key: "amount",
        source: "options",
      });
    }
    if (!this.isActive(limit)) return { admitted: true, active: false, limit };
    const ceiling = this.ceiling(limit);
    const consumed = this.consumed(limit);
    if (consumed + amount > ceiling) {
      return { admitted: false, active: true, limit, consumed, ceiling, reason: "budget_exhausted" };
    }
    this.#consumed.set(limit, consumed + amount);
    return { admitted: true, active: true, limit, consumed: consumed + amount, ceiling };
  }

  /** The counters to persist with the run (only budgets that consumed something). */
  snapshot(): Readonly<Partial<Record<ConsumableBudget, number>>> {
    return Object.freeze(Object.fromEntries(this.#consumed));
  }
}

/**
 * Create a {@link BudgetMeter} for one run.
 *
 * @example
 * ```ts
 * const meter = createBudgetMeter({ budgets: DEFAULT_BUDGETS, flags: createStageFlags(["stage5_auto_repair"]) });
 * meter.admit("max_repair_rounds"); // { admitted: true, active: true, consumed: 1, ceiling: 2, ... }
 * meter.admit("guardian_timeout_s", 30); // { admitted: true, active: false }: stage 7 is off
 * ```
 */
export function createBudgetMeter(options: BudgetMeterOptions): BudgetMeter {
  return new BudgetMeter(options);
}

/** Internal helper: label an env-sourced budget layer. */
export function envBudgetSource(names: Readonly<Partial<Record<BudgetLimit, string>>>) {
  return (limit: BudgetLimit): ValueSource => sourceOf("env", names[limit] ?? BUDGET_TABLE[limit].env);
}
