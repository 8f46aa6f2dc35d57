import { rolloutError } from "./errors.js";

/** Boolean spellings that mean on. Exact, lowercase, no surrounding whitespace. */
export const TRUE_SPELLINGS = ["1", "true", "on", "yes"] as const;
/** Boolean spellings that mean off. Exact, lowercase, no surrounding whitespace. */
export const FALSE_SPELLINGS = ["0", "false", "off", "no"] as const;

/** Where a value being parsed lives: its key (setting path or variable name) and its source. */
export interface ValueLocation {
  /** The offending key: a setting path (`budgets.wall_time_s`) or a variable name. */
  readonly key: string;
  /** The source label (`env`, `deployment`, `project`, `frame`, `legacy_review_auto` ...). */
  readonly source?: string | undefined;
}

const TRUE_SET: ReadonlySet<string> = new Set(TRUE_SPELLINGS);
const FALSE_SET: ReadonlySet<string> = new Set(FALSE_SPELLINGS);

/** True for `null`, `""` and whitespace-only strings: values that are present but empty. */
function isExplicitlyEmpty(value: unknown): boolean {
  return value === null || (typeof value === "string" && value.trim() === "");
}

function emptyError(at: ValueLocation) {
  return rolloutError(
    "ASP_ROLLOUT_EMPTY_VALUE",
    `${at.key} is set but empty; an empty value never means off. Remove the setting or give a value`,
    at,
  );
}

/**
 * Parse a boolean setting. Accepts JSON `true`/`false` and exactly the spellings
 * {@link TRUE_SPELLINGS} and {@link FALSE_SPELLINGS}; nothing else.
 *
 * @throws RolloutError `ASP_ROLLOUT_EMPTY_VALUE` for `null`, `""` or whitespace only.
 * @throws RolloutError `ASP_ROLLOUT_BAD_BOOLEAN` for any other spelling or type.
 * @example
 * ```ts
 * parseBoolean("on", { key: "OPENAI4S_STAGE1_TRUSTED_DELIVERY", source: "env" }); // true
 * ```
 */
export function parseBoolean(value: unknown, at: ValueLocation): boolean {
  if (typeof value === "boolean") return value;
  if (isExplicitlyEmpty(value)) throw emptyError(at);
  if (typeof value === "string") {
    if (TRUE_SET.has(value)) return true;
    if (FALSE_SET.has(value)) return false;
  }
  throw rolloutError(
    "ASP_ROLLOUT_BAD_BOOLEAN",
    `${at.key} is not a boolean; use one of ${[...TRUE_SPELLINGS, ...FALSE_SPELLINGS].join(", ")} (or JSON true/false)`,
    at,
  );
}

/**
 * Parse a closed-vocabulary value: exactly one of `vocabulary`, case-sensitive.
 *
 * @throws RolloutError `ASP_ROLLOUT_EMPTY_VALUE` for `null`, `""` or whitespace only.
 * @throws RolloutError `ASP_ROLLOUT_UNKNOWN_VALUE` for a value outside the vocabulary or a non-string.
 */
export function parseEnum<const T extends ReadonlyArray<string>>(
  value: unknown,
  vocabulary: T,
  at: ValueLocation,
): T[number] {
  if (isExplicitlyEmpty(value)) throw emptyError(at);
  if (typeof value === "string" && (vocabulary as ReadonlyArray<string>).includes(value)) return value;
  throw rolloutError("ASP_ROLLOUT_UNKNOWN_VALUE", `${at.key} must be one of ${vocabulary.join(", ")}`, at, {
    data: { allowed: [...vocabulary] },
  });
}

const INTEGER_TEXT = /^[1-9][0-9]*$/;
const DECIMAL_TEXT = /^(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$/;

/**
 * Parse a positive budget number: a JSON number or a plain decimal string (`"2"`, `"1.5"`; no
 * sign, exponent, hex, or surrounding whitespace). Integer limits refuse fractions.
 *
 * @throws RolloutError `ASP_ROLLOUT_EMPTY_VALUE` for `null`, `""` or whitespace only.
 * @throws RolloutError `ASP_ROLLOUT_BAD_NUMBER` for anything that is not a finite number > 0
 *   (a safe integer >= 1 when `integer`).
 */
export function parsePositiveNumber(value: unknown, integer: boolean, at: ValueLocation): number {
  if (isExplicitlyEmpty(value)) throw emptyError(at);
  let n: number | undefined;
  if (typeof value === "number") n = value;
  else if (typeof value === "string" && (integer ? INTEGER_TEXT : DECIMAL_TEXT).test(value)) n = Number(value);
  const ok =
    n !== undefined && Number.isFinite(n) && n > 0 && (!integer || (Number.isSafeInteger(n) && Number.isInteger(n)));
  if (!ok || n === undefined) {
    throw rolloutError(
      "ASP_ROLLOUT_BAD_NUMBER",
      `${at.key} must be ${integer ? "a whole number >= 1" : "a number > 0"}`,
      at,
    );
  }
  return n;
}
