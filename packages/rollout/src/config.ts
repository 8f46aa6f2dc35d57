import {
  APPROVALS_REVIEWERS,
  type ApprovalsReviewer,
  AUTO_MODE_PRESETS,
  type AutoModeConfig,
  type AutoModePreset,
  BUDGET_LIMITS,
  type BudgetLimit,
  RESULT_REVIEW_MODES,
  type ResultReviewMode,
  STAGE_FLAGS,
  type StageFlag,
  validate,
} from "@asp/contracts";
import { parseBudgetValue } from "./budgets.js";
import { type RolloutError, rolloutError } from "./errors.js";
import { parseBoolean, parseEnum } from "./parse.js";

/** The three configuration scopes, lowest precedence first. */
export const CONFIG_SCOPES = ["deployment", "project", "frame"] as const;
/** One of {@link CONFIG_SCOPES}. */
export type ConfigScope = (typeof CONFIG_SCOPES)[number];

/** The selection keys a configuration may state. */
export const SELECTION_KEYS = ["preset", "result_review_mode", "approvals_reviewer"] as const;
/** One of {@link SELECTION_KEYS}. */
export type SelectionKey = (typeof SELECTION_KEYS)[number];

const TOP_LEVEL_KEYS: ReadonlyArray<string> = [...SELECTION_KEYS, "stages", "budgets"];

/** One scope's Auto Mode configuration after strict parsing. Absent keys stay absent. */
export interface ParsedAutoModeConfig {
  readonly scope: ConfigScope;
  /** Label for reporting (a file path); null when the caller gave none. */
  readonly origin: string | null;
  readonly preset?: AutoModePreset;
  readonly result_review_mode?: ResultReviewMode;
  readonly approvals_reviewer?: ApprovalsReviewer;
  /** Stage flags; only the deployment scope may state them. */
  readonly stages: Readonly<Partial<Record<StageFlag, boolean>>>;
  readonly budgets: Readonly<Partial<Record<BudgetLimit, number>>>;
}

/** Options of {@link parseAutoModeConfig}. */
export interface ParseConfigOptions {
  /** Label for reporting and error data (e.g. the file path). */
  readonly origin?: string;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function requireObject(value: unknown, key: string, source: string): Record<string, unknown> {
  if (!isPlainObject(value)) {
    throw rolloutError("ASP_ROLLOUT_BAD_SHAPE", `${key} must be a JSON object`, { key, source });
  }
  return value;
}

function unknownKey(key: string, source: string, allowed: ReadonlyArray<string>): RolloutError {
  return rolloutError(
    "ASP_ROLLOUT_UNKNOWN_KEY",
    `${key} is not a known Auto Mode setting`,
    { key, source },
    {
      data: { allowed: [...allowed] },
    },
  );
}

/**
 * Parse one scope's Auto Mode configuration (the `AutoModeConfig` contract shape: `preset`,
 * `result_review_mode`, `approvals_reviewer`, `stages`, `budgets`), rejecting the whole
 * configuration on the first problem. Enum values must be exact vocabulary members; booleans
 * are JSON booleans or the fixed spellings; budgets are positive numbers or decimal strings.
 * A key whose value is JS `undefined` counts as absent; `null` and `""` are explicitly empty
 * and rejected. Budget ceilings are checked later, when layers are combined.
 *
 * @example
 * ```ts
 * parseAutoModeConfig({ preset: "on", budgets: { wall_time_s: 600 } }, "deployment", { origin: "deploy.json" });
 * ```
 * @throws RolloutError `ASP_ROLLOUT_BAD_SHAPE` (not an object), `ASP_ROLLOUT_UNKNOWN_KEY`,
 *   `ASP_ROLLOUT_KEY_NOT_ALLOWED` (`stages` outside deployment), `ASP_ROLLOUT_UNKNOWN_VALUE`,
 *   `ASP_ROLLOUT_EMPTY_VALUE`, `ASP_ROLLOUT_BAD_BOOLEAN`, `ASP_ROLLOUT_BAD_NUMBER`,
 *   `ASP_ROLLOUT_WINDOW_FIXED`. `error.data` carries `key` (setting path) and `source` (scope).
 */
export function parseAutoModeConfig(
  value: unknown,
  scope: ConfigScope,
  options: ParseConfigOptions = {},
): ParsedAutoModeConfig {
  const source = scope;
  const root = requireObject(value, "(configuration)", source);
  for (const key of Object.keys(root)) {
    if (!TOP_LEVEL_KEYS.includes(key)) throw unknownKey(key, source, TOP_LEVEL_KEYS);
  }
  const out: {
    -readonly [K in keyof ParsedAutoModeConfig]: ParsedAutoModeConfig[K];
  } = { scope, origin: options.origin ?? null, stages: {}, budgets: {} };

  if (root.preset !== undefined) out.preset = parseEnum(root.preset, AUTO_MODE_PRESETS, { key: "preset", source });
  if (root.result_review_mode !== undefined) {
    out.result_review_mode = parseEnum(root.result_review_mode, RESULT_REVIEW_MODES, {
      key: "result_review_mode",
      source,
    });
  }
  if (root.approvals_reviewer !== undefined) {
    out.approvals_reviewer = parseEnum(root.approvals_reviewer, APPROVALS_REVIEWERS, {
      key: "approvals_reviewer",
      source,
    });
  }

  if (root.stages !== undefined) {
    if (scope !== "deployment") {
      throw rolloutError(
        "ASP_ROLLOUT_KEY_NOT_ALLOWED",
        `stages may only be set by trusted deployment configuration, not by ${scope} configuration`,
        { key: "stages", source },
      );
    }
    const stages = requireObject(root.stages, "stages", source);
    const parsed: Partial<Record<StageFlag, boolean>> = {};
    for (const [flag, raw] of Object.entries(stages)) {
      const key = `stages.${flag}`;
      if (!(STAGE_FLAGS as ReadonlyArray<string>).includes(flag)) throw unknownKey(key, source, STAGE_FLAGS);
      if (raw !== undefined) parsed[flag as StageFlag] = parseBoolean(raw, { key, source });
    }
    out.stages = Object.freeze(parsed);
  }

  if (root.budgets !== undefined) {
    const budgets = requireObject(root.budgets, "budgets", source);
    const parsed: Partial<Record<BudgetLimit, number>> = {};
    for (const [limit, raw] of Object.entries(budgets)) {
      const key = `budgets.${limit}`;
      if (!(BUDGET_LIMITS as ReadonlyArray<string>).includes(limit)) throw unknownKey(key, source, BUDGET_LIMITS);
      if (raw !== undefined)
        parsed[limit as BudgetLimit] = parseBudgetValue(limit as BudgetLimit, raw, { key, source });
    }
    out.budgets = Object.freeze(parsed);
  }

  // Belt and braces: what we accept must be a valid contracts AutoModeConfig.
  const check = validate("auto-mode-config", toAutoModeConfig(out));
  if (!check.ok) {
    const [first] = check.errors;
    throw rolloutError(
      "ASP_ROLLOUT_BAD_SHAPE",
      `parsed configuration does not match the AutoModeConfig contract at ${first?.pointer ?? "/"}`,
      { key: first?.pointer ?? "/", source },
      { category: "internal" },
    );
  }
  return Object.freeze(out);
}

/** True when the configuration states any of preset / result_review_mode / approvals_reviewer. */
export function hasExplicitSelection(config: ParsedAutoModeConfig | undefined): boolean {
  return config !== undefined && SELECTION_KEYS.some((key) => config[key] !== undefined);
}

/** The contracts `AutoModeConfig` shape of a parsed configuration (native booleans and numbers). */
export function toAutoModeConfig(config: ParsedAutoModeConfig): AutoModeConfig {
  const out: Record<string, unknown> = {};
  for (const key of SELECTION_KEYS) if (config[key] !== undefined) out[key] = config[key];
  if (Object.keys(config.stages).length > 0) out.stages = { ...config.stages };
  if (Object.keys(config.budgets).length > 0) out.budgets = { ...config.budgets };
  return out as AutoModeConfig;
}
