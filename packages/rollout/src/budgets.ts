import {
  BUDGET_COUNTERS,
  BUDGET_LIMITS,
  type BudgetCounter,
  type BudgetCounters,
  type BudgetLedger,
  type BudgetLimit,
  type RunIdentity,
  type StageFlag,
  validate,
} from "@asp/contracts";
import { type Environment, readEnvSetting } from "./env.js";
import { rolloutError } from "./errors.js";
import type { StageFlags } from "./flags.js";
import { parsePositiveNumber, type ValueLocation } from "./parse.js";
import { checkRunIdentity } from "./persist.js";
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

/** The clock a meter compares its deadlines against, in milliseconds since the epoch. Injected. */
export interface Clock {
  now(): number;
}

/**
 * Why an action was refused: a consumed or deadline limit (`budget_exhausted`), an open no-progress
 * circuit (`loop_detected`), an open Guardian denial circuit, or a Guardian decision past its
 * deadline. The caller maps these onto the contract's terminals.
 */
export type BudgetRefusal = "budget_exhausted" | "loop_detected" | "guardian_denial_circuit" | "guardian_timeout";

/** Outcome of every admission and record call of {@link BudgetMeter}. */
export type BudgetCheck =
  | {
      readonly admitted: true;
      /** False when every owning stage is off: nothing was recorded and nothing can be refused. */
      readonly active: boolean;
      readonly limit: BudgetLimit;
    }
  | {
      /** The caller must not start the action (or must treat the decision as failed closed). */
      readonly admitted: false;
      readonly active: true;
      /** The limit that refused: the terminal's `exhausted_limit` for `budget_exhausted`. */
      readonly limit: BudgetLimit;
      readonly reason: BudgetRefusal;
      /** What was used of it (a count, tokens, or elapsed seconds for a deadline). */
      readonly used: number;
      readonly ceiling: number;
    };

/** Options of {@link createBudgetMeter}: a new run's meter. */
export interface BudgetMeterOptions {
  readonly run: RunIdentity;
  /** The run's frozen limits. */
  readonly budgets: BudgetSet;
  /** The resolved stage flags; a budget counts only while one of its owners is on. */
  readonly flags: StageFlags;
  /** The clock deadlines are measured with; the wall-time deadline starts at its `now()`. */
  readonly clock: Clock;
  /** Tokens of the initial turn; required once extra tokens are admitted (the 1.5x budget). */
  readonly initialTurnTokens?: number;
}

/** Options of {@link BudgetMeter.fromLedger}: what a reopened run supplies besides its ledger. */
export interface RestoreMeterOptions {
  readonly flags: StageFlags;
  readonly clock: Clock;
}

/** True when at least one owning stage of `limit` is on. */
export function isBudgetActive(limit: BudgetLimit, flags: StageFlags): boolean {
  return BUDGET_TABLE[limit].owners.some((stage) => flags.isEnabled(stage));
}

/** Which limit bounds each ledger counter (one set of names: {@link BUDGET_COUNTERS}). */
export const COUNTER_LIMITS: Readonly<Record<BudgetCounter, BudgetLimit>> = Object.freeze({
  review_attempts: "max_review_rounds",
  repair_rounds: "max_repair_rounds",
  repair_turns: "repair_turns_per_round",
  extra_cells: "max_extra_cells",
  extra_tokens: "extra_token_multiplier",
  no_progress_turns: "no_progress_turn_limit",
  guardian_consecutive_denials: "guardian_consecutive_denial_limit",
});

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function badAmount(key: string): never {
  throw rolloutError("ASP_ROLLOUT_INVALID_OPTION", `${key} must be a whole number >= 0`, { key, source: "options" });
}

/**
 * One run's budget meter and ledger. Every limit is checked before the next action is admitted,
 * and each kind of limit is counted the way the contract defines it:
 *
 * - per candidate / per round: Reviewer attempts reset for each new candidate; Repair turns reset
 *   when a new repair round is admitted;
 * - cumulative for the run: repair rounds, extra cells, extra tokens (against multiplier x the
 *   initial turn's tokens);
 * - deadlines, compared against the injected clock: the run's wall time from `started_at`, and
 *   each Guardian question's timeout from when it was asked;
 * - per key: repeated findings per fingerprint, same action without a durable delta per action
 *   digest;
 * - resetting: turns without progress reset on progress, consecutive Guardian denials reset on an
 *   allow;
 * - rolling: denials among the last 50 Guardian decisions.
 *
 * Loop limits and Guardian thresholds open durable circuits that stay open. A budget whose owning
 * stages are all off records nothing and refuses nothing. The ledger ({@link toJSON}) is persisted
 * with the run and restored with {@link BudgetMeter.fromLedger}, so nothing replenishes on reopen.
 */
export class BudgetMeter {
  readonly #flags: StageFlags;
  readonly #clock: Clock;
  readonly #ledger: Mutable<Omit<BudgetLedger, "consumed" | "scope" | "circuits">> & {
    consumed: Mutable<BudgetCounters>;
    scope: Mutable<BudgetLedger["scope"]>;
    circuits: Mutable<BudgetLedger["circuits"]>;
    repeated_findings: Record<string, number>;
    same_action_no_delta: Record<string, number>;
    guardian_window: Array<"allow" | "deny">;
  };

  /** Prefer {@link createBudgetMeter} or {@link BudgetMeter.fromLedger}. */
  constructor(ledger: BudgetLedger, flags: StageFlags, clock: Clock) {
    this.#flags = flags;
    this.#clock = clock;
    this.#ledger = structuredCloneJson(ledger);
  }

  /**
   * Restore a run's meter from its persisted ledger (a reopen): counters, deadlines' origins,
   * per-key counts, the Guardian window and open circuits all carry over.
   *
   * @throws RolloutError `ASP_ROLLOUT_CORRUPT_RECORD` (category `integrity`) when the ledger does
   *   not validate against `BudgetLedgerSchema`: a meter never guesses its counters.
   */
  static fromLedger(ledger: unknown, options: RestoreMeterOptions): BudgetMeter {
    const result = validate("budget-ledger", ledger);
    if (!result.ok) {
      throw rolloutError(
        "ASP_ROLLOUT_CORRUPT_RECORD",
        "the persisted budget ledger does not validate; refusing to guess its counters",
        { key: "ledger", source: "store" },
        { category: "integrity", data: { errors: result.errors.slice(0, 5) } },
      );
    }
    return new BudgetMeter(result.value, options.flags, options.clock);
  }

  /** Whether `limit` counts now (an owning stage is on). */
  isActive(limit: BudgetLimit): boolean {
    return isBudgetActive(limit, this.#flags);
  }

  /** The value of one ledger counter. */
  used(counter: BudgetCounter): number {
    return this.#ledger.consumed[counter];
  }

  /** The ceiling a counter is compared against (tokens for `extra_tokens`). */
  ceiling(counter: BudgetCounter): number {
    const limit = COUNTER_LIMITS[counter];
    const value = this.#ledger.limits[limit];
    if (counter !== "extra_tokens") return value;
    const initial = this.#ledger.initial_turn_tokens;
    if (initial === null) {
      throw rolloutError(
        "ASP_ROLLOUT_INVALID_OPTION",
        "extra tokens are counted against multiplier x the initial turn's tokens; create the meter with initialTurnTokens",
        { key: "initialTurnTokens", source: "options" },
      );
    }
    return Math.floor(value * initial);
  }

  /** Whether a durable circuit is open. */
  circuit(name: "no_progress" | "guardian_denial"): "open" | "closed" {
    return this.#ledger.circuits[name];
  }

  // ------------------------------------------------------------ consumption

  #consume(counter: BudgetCounter, amount: number): BudgetCheck {
    const limit = COUNTER_LIMITS[counter];
    if (!this.isActive(limit)) return { admitted: true, active: false, limit };
    const ceiling = this.ceiling(counter);
    const used = this.#ledger.consumed[counter];
    if (used + amount > ceiling) {
      return { admitted: false, active: true, limit, reason: "budget_exhausted", used, ceiling };
    }
    this.#ledger.consumed[counter] = used + amount;
    this.#touch();
    return { admitted: true, active: true, limit };
  }

  /**
   * Admit one Reviewer attempt for `candidateId`. The attempt budget is per candidate: a new
   * candidate starts from zero.
   *
   * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` for an empty candidate id.
   */
  admitReviewAttempt(candidateId: string): BudgetCheck {
    if (typeof candidateId !== "string" || candidateId.length === 0 || candidateId.length > 256) {
      throw rolloutError("ASP_ROLLOUT_INVALID_OPTION", "candidateId must be a non-empty id", {
        key: "candidateId",
        source: "options",
      });
    }
    if (this.isActive("max_review_rounds") && this.#ledger.scope.candidate_id !== candidateId) {
      this.#ledger.scope.candidate_id = candidateId;
      this.#ledger.consumed.review_attempts = 0;
    }
    return this.#consume("review_attempts", 1);
  }

  /** Admit a new Repair round; its turn budget starts from zero. */
  admitRepairRound(): BudgetCheck {
    const check = this.#consume("repair_rounds", 1);
    if (check.admitted && check.active) {
      this.#ledger.scope.repair_round = this.#ledger.consumed.repair_rounds;
      this.#ledger.consumed.repair_turns = 0;
    }
    return check;
  }

  /** Admit one Repair Agent turn in the current round (the per-round limit). */
  admitRepairTurn(): BudgetCheck {
    return this.#consume("repair_turns", 1);
  }

  /**
   * Admit `count` additional Cells.
   *
   * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` for a count that is not a whole number >= 0.
   */
  admitCells(count: number): BudgetCheck {
    if (!Number.isSafeInteger(count) || count < 0) badAmount("count");
    return this.#consume("extra_cells", count);
  }

  /**
   * Admit `tokens` additional tokens (against multiplier x the initial turn's tokens).
   *
   * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` for a bad amount, or when the budget is active
   *   and the meter was created without `initialTurnTokens`.
   */
  admitTokens(tokens: number): BudgetCheck {
    if (!Number.isSafeInteger(tokens) || tokens < 0) badAmount("tokens");
    return this.#consume("extra_tokens", tokens);
  }

  /**
   * Record one finished model turn's tokens, which were spent before anyone could refuse them.
   * `initial`: a turn of the initial (user's) turn, the base of the 1.5x budget, which the initial
   * turn itself never exhausts; `extra`: a turn Auto Mode added after it (review, repair), counted
   * against multiplier x the initial turn's tokens and recorded even past the ceiling so the ledger
   * shows the truth. Returns refused (`budget_exhausted`) once the extra tokens reach the ceiling:
   * no further autonomous action is admitted.
   *
   * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` for a count that is not a whole number >= 0.
   */
  recordTurnTokens(tokens: number, turn: "initial" | "extra"): BudgetCheck {
    if (!Number.isSafeInteger(tokens) || tokens < 0) badAmount("tokens");
    const limit = "extra_token_multiplier";
    if (!this.isActive(limit)) return { admitted: true, active: false, limit };
    if (turn === "initial") {
      this.#ledger.initial_turn_tokens = (this.#ledger.initial_turn_tokens ?? 0) + tokens;
      this.#touch();
      return { admitted: true, active: true, limit };
    }
    if (this.#ledger.initial_turn_tokens === null) this.#ledger.initial_turn_tokens = 0;
    const used = this.#ledger.consumed.extra_tokens + tokens;
    this.#ledger.consumed.extra_tokens = used;
    this.#touch();
    const ceiling = this.ceiling("extra_tokens");
    return used >= ceiling && tokens > 0
      ? { admitted: false, active: true, limit, reason: "budget_exhausted", used, ceiling }
      : { admitted: true, active: true, limit };
  }

  /**
   * Whether the extra-token budget is already spent (the check before the next action).
   */
  checkTokens(): BudgetCheck {
    const limit = "extra_token_multiplier";
    if (!this.isActive(limit) || this.#ledger.initial_turn_tokens === null) {
      return { admitted: true, active: this.isActive(limit), limit };
    }
    const used = this.#ledger.consumed.extra_tokens;
    const ceiling = this.ceiling("extra_tokens");
    return used > 0 && used >= ceiling
      ? { admitted: false, active: true, limit, reason: "budget_exhausted", used, ceiling }
      : { admitted: true, active: true, limit };
  }

  // ------------------------------------------------------------ deadlines

  /** Check the run's wall-time deadline (`started_at` + `wall_time_s`) against the clock. */
  checkWallTime(): BudgetCheck {
    const limit = "wall_time_s";
    if (!this.isActive(limit)) return { admitted: true, active: false, limit };
    const elapsed = (this.#clock.now() - Date.parse(this.#ledger.started_at)) / 1000;
    const ceiling = this.#ledger.limits.wall_time_s;
    return elapsed >= ceiling
      ? { admitted: false, active: true, limit, reason: "budget_exhausted", used: elapsed, ceiling }
      : { admitted: true, active: true, limit };
  }

  /**
   * Check everything that gates the next autonomous action: the wall-time deadline, the open
   * circuits, and (with `actionDigest`) the same-action-without-delta count of that exact action.
   */
  admitAction(actionDigest?: string): BudgetCheck {
    const wall = this.checkWallTime();
    if (!wall.admitted) return wall;
    const loops = "no_progress_turn_limit";
    if (this.isActive(loops) && this.#ledger.circuits.no_progress === "open") {
      return { admitted: false, active: true, limit: loops, reason: "loop_detected", used: 1, ceiling: 1 };
    }
    if (actionDigest !== undefined && this.isActive("same_action_no_delta_limit")) {
      const used = this.#ledger.same_action_no_delta[actionDigest] ?? 0;
      const ceiling = this.#ledger.limits.same_action_no_delta_limit;
      if (used >= ceiling) {
        return {
          admitted: false,
          active: true,
          limit: "same_action_no_delta_limit",
          reason: "loop_detected",
          used,
          ceiling,
        };
      }
    }
    return { admitted: true, active: wall.active, limit: "wall_time_s" };
  }

  /** Record that a Guardian was asked about `actionDigest` now: its decision deadline starts. */
  askGuardian(actionDigest: string): BudgetCheck {
    const limit = "guardian_timeout_s";
    if (!this.isActive(limit)) return { admitted: true, active: false, limit };
    this.#ledger.guardian_pending = { action_digest: digestOf(actionDigest), asked_at: iso(this.#clock.now()) };
    this.#touch();
    return { admitted: true, active: true, limit };
  }

  /** Whether the pending Guardian question is past its deadline (`asked_at` + `guardian_timeout_s`). */
  checkGuardianDeadline(): BudgetCheck {
    const limit = "guardian_timeout_s";
    const pending = this.#ledger.guardian_pending;
    if (!this.isActive(limit) || pending === null) return { admitted: true, active: this.isActive(limit), limit };
    const elapsed = (this.#clock.now() - Date.parse(pending.asked_at)) / 1000;
    const ceiling = this.#ledger.limits.guardian_timeout_s;
    return elapsed >= ceiling
      ? { admitted: false, active: true, limit, reason: "guardian_timeout", used: elapsed, ceiling }
      : { admitted: true, active: true, limit };
  }

  // ------------------------------------------------------------ loops and circuits

  #open(circuit: "no_progress" | "guardian_denial"): void {
    this.#ledger.circuits[circuit] = "open";
  }

  /**
   * Record one executed action and whether it made a durable delta. Without one, that action
   * digest's count grows and at `same_action_no_delta_limit` the no-progress circuit opens; a
   * durable delta resets that digest's count. 500 distinct digests without a delta open it too.
   */
  recordAction(actionDigest: string, outcome: { readonly durableDelta: boolean }): BudgetCheck {
    return this.#countNoDelta(actionDigest, outcome.durableDelta, (limit) => limit);
  }

  /**
   * Record a Repair plan the host's checks denied (ADR 0012), by the digest of its exact
   * after-state. The host applied nothing, so the plan is counted like an action without a durable
   * delta, in the same per-digest ledger. The same plan denied again is a loop: at the second
   * denial (or at `same_action_no_delta_limit`, if that is tightened below 2) the no-progress
   * circuit opens and the check refuses.
   */
  recordDeniedPlan(planDigest: string): BudgetCheck {
    return this.#countNoDelta(planDigest, false, (limit) => Math.min(2, limit));
  }

  /**
   * The per-digest no-delta ledger both {@link recordAction} and {@link recordDeniedPlan} count
   * in: a durable delta resets the digest's count, else it grows; at `ceilingOf(limit)` (or at
   * 500 distinct digests) the no-progress circuit opens and the check refuses.
   */
  #countNoDelta(digest: string, durableDelta: boolean, ceilingOf: (limit: number) => number): BudgetCheck {
    const limit = "same_action_no_delta_limit";
    if (!this.isActive(limit)) return { admitted: true, active: false, limit };
    const key = digestOf(digest);
    const counts = this.#ledger.same_action_no_delta;
    if (durableDelta) delete counts[key];
    else counts[key] = (counts[key] ?? 0) + 1;
    this.#touch();
    // Ever-new digests without a delta are a loop too, and the ledger stays bounded.
    if (Object.keys(counts).length >= DISTINCT_ACTIONS_LIMIT) {
      this.#open("no_progress");
      return {
        admitted: false,
        active: true,
        limit,
        reason: "loop_detected",
        used: DISTINCT_ACTIONS_LIMIT,
        ceiling: DISTINCT_ACTIONS_LIMIT,
      };
    }
    const used = counts[key] ?? 0;
    const ceiling = ceilingOf(this.#ledger.limits[limit]);
    if (used >= ceiling) {
      this.#open("no_progress");
      return { admitted: false, active: true, limit, reason: "loop_detected", used, ceiling };
    }
    return { admitted: true, active: true, limit };
  }

  /** Record one Agent turn: progress (an Artifact, Plan or Evidence change) resets the count. */
  recordTurn(outcome: { readonly progress: boolean }): BudgetCheck {
    const limit = "no_progress_turn_limit";
    if (!this.isActive(limit)) return { admitted: true, active: false, limit };
    this.#ledger.consumed.no_progress_turns = outcome.progress ? 0 : this.#ledger.consumed.no_progress_turns + 1;
    this.#touch();
    const used = this.#ledger.consumed.no_progress_turns;
    const ceiling = this.#ledger.limits[limit];
    if (used >= ceiling) {
      this.#open("no_progress");
      return { admitted: false, active: true, limit, reason: "loop_detected", used, ceiling };
    }
    return { admitted: true, active: true, limit };
  }

  /**
   * Record the fingerprints of one review round's unresolved findings. A fingerprint seen in an
   * earlier round counts one repeat; at `repeated_finding_limit` repeats of any fingerprint the
   * no-progress circuit opens.
   */
  recordFindings(fingerprints: ReadonlyArray<string>): BudgetCheck {
    const limit = "repeated_finding_limit";
    if (!this.isActive(limit)) return { admitted: true, active: false, limit };
    const counts = this.#ledger.repeated_findings;
    let worst = 0;
    for (const fp of new Set(fingerprints.map(digestOf))) {
      counts[fp] = fp in counts ? (counts[fp] ?? 0) + 1 : 0;
      worst = Math.max(worst, counts[fp] ?? 0);
    }
    this.#touch();
    const ceiling = this.#ledger.limits[limit];
    if (worst >= ceiling) {
      this.#open("no_progress");
      return { admitted: false, active: true, limit, reason: "loop_detected", used: worst, ceiling };
    }
    return { admitted: true, active: true, limit };
  }

  /**
   * Record a Guardian decision on the pending question. A decision after its deadline is not a
   * decision: it fails closed (`guardian_timeout`) and is not counted. Otherwise it enters the
   * rolling window of the last 50 decisions; an allow resets the consecutive-denial count. Either
   * threshold opens the durable denial circuit, which stays open.
   */
  recordGuardianDecision(decision: "allow" | "deny"): BudgetCheck {
    const limit = "guardian_consecutive_denial_limit";
    if (!this.isActive(limit)) return { admitted: true, active: false, limit };
    const deadline = this.checkGuardianDeadline();
    this.#ledger.guardian_pending = null;
    this.#touch();
    if (!deadline.admitted) return deadline;
    const window = this.#ledger.guardian_window;
    window.push(decision);
    if (window.length > GUARDIAN_WINDOW_SIZE) window.splice(0, window.length - GUARDIAN_WINDOW_SIZE);
    this.#ledger.consumed.guardian_consecutive_denials =
      decision === "allow" ? 0 : this.#ledger.consumed.guardian_consecutive_denials + 1;
    const consecutive = this.#ledger.consumed.guardian_consecutive_denials;
    const denials = window.filter((d) => d === "deny").length;
    const limits = this.#ledger.limits;
    if (consecutive >= limits.guardian_consecutive_denial_limit) this.#open("guardian_denial");
    if (denials >= limits.guardian_window_denial_limit) this.#open("guardian_denial");
    if (this.#ledger.circuits.guardian_denial === "open") {
      const byWindow = denials >= limits.guardian_window_denial_limit;
      return byWindow
        ? {
            admitted: false,
            active: true,
            limit: "guardian_window_denial_limit",
            reason: "guardian_denial_circuit",
            used: denials,
            ceiling: limits.guardian_window_denial_limit,
          }
        : {
            admitted: false,
            active: true,
            limit,
            reason: "guardian_denial_circuit",
            used: consecutive,
            ceiling: limits.guardian_consecutive_denial_limit,
          };
    }
    return { admitted: true, active: true, limit };
  }

  // ------------------------------------------------------------ persistence

  #touch(): void {
    this.#ledger.updated_at = iso(this.#clock.now());
  }

  /** The ledger to persist with the run (a deep copy, valid against `BudgetLedgerSchema`). */
  toJSON(): BudgetLedger {
    return structuredCloneJson(this.#ledger);
  }
}

/**
 * How many distinct action digests without a durable delta a ledger tracks before the no-progress
 * circuit opens: an Engine varying each action slightly is still making no progress, and the
 * ledger committed with every step stays bounded.
 */
const DISTINCT_ACTIONS_LIMIT = 500;

function digestOf(value: string): string {
  if (typeof value !== "string" || !/^sha256:[0-9a-f]{64}$/.test(value)) {
    throw rolloutError("ASP_ROLLOUT_INVALID_OPTION", "fingerprints and action digests are sha256:<64 hex>", {
      key: "digest",
      source: "options",
    });
  }
  return value;
}

function structuredCloneJson<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/**
 * Create the meter of a new run: every counter at zero, circuits closed, the wall-time deadline
 * starting now.
 *
 * @example
 * ```ts
 * const meter = createBudgetMeter({ run, budgets: DEFAULT_BUDGETS, flags, clock: { now: Date.now } });
 * meter.admitReviewAttempt("cand-1"); // { admitted: true, active: true, limit: "max_review_rounds" } with stage 4 on
 * store.put(meter.toJSON()); // ... later: BudgetMeter.fromLedger(stored, { flags, clock })
 * ```
 * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` for a bad run identity or `initialTurnTokens`.
 */
export function createBudgetMeter(options: BudgetMeterOptions): BudgetMeter {
  const run = checkRunIdentity(options.run);
  const tokens = options.initialTurnTokens;
  if (tokens !== undefined && (!Number.isSafeInteger(tokens) || tokens < 0)) badAmount("initialTurnTokens");
  const now = iso(options.clock.now());
  const ledger: BudgetLedger = {
    run,
    limits: { ...options.budgets },
    started_at: now,
    initial_turn_tokens: tokens ?? null,
    scope: { candidate_id: null, repair_round: 0 },
    consumed: Object.fromEntries(BUDGET_COUNTERS.map((c) => [c, 0])) as BudgetCounters,
    repeated_findings: {},
    same_action_no_delta: {},
    guardian_pending: null,
    guardian_window: [],
    circuits: { no_progress: "closed", guardian_denial: "closed" },
    updated_at: now,
  };
  return new BudgetMeter(ledger, options.flags, options.clock);
}

/** Internal helper: label an env-sourced budget layer. */
export function envBudgetSource(names: Readonly<Partial<Record<BudgetLimit, string>>>) {
  return (limit: BudgetLimit): ValueSource => sourceOf("env", names[limit] ?? BUDGET_TABLE[limit].env);
}
