import { runInNewContext } from "node:vm";
import { TextEditError } from "./errors.js";

/** Bounds of one regex run. */
export interface RegexBudget {
  /** Wall-clock bound of the run, default 250 ms (a catastrophic pattern is stopped, not waited for). */
  readonly timeoutMs?: number;
  /** Most matches one search_replace may make, default 100 000. */
  readonly maxMatches?: number;
}

/** What a search-replace would do to a text. */
export interface RegexOutcome {
  readonly matches: number;
  readonly output: string;
}

/**
 * Compile `pattern` with `flags` or refuse it.
 * @throws TextEditError `ASP_TEXT_EDIT_BAD_REGEX`.
 */
export function compileRegex(pattern: string, flags: string): RegExp {
  if (!/^[gimsuy]*$/.test(flags) || new Set(flags).size !== flags.length) {
    throw new TextEditError("ASP_TEXT_EDIT_BAD_REGEX", "flags may only be g, i, m, s, u, y, each at most once", {
      data: { flags },
    });
  }
  try {
    return new RegExp(pattern, flags);
  } catch (error) {
    throw new TextEditError("ASP_TEXT_EDIT_BAD_REGEX", `the pattern does not compile: ${(error as Error).message}`);
  }
}

/**
 * Run `text.replace(new RegExp(pattern, flags), replacement)` — the semantics the host applies —
 * in a separate V8 context with a time bound, and count the matches.
 *
 * @throws TextEditError `ASP_TEXT_EDIT_BAD_REGEX`, `ASP_TEXT_EDIT_REGEX_BUDGET`.
 */
export function runSearchReplace(
  text: string,
  pattern: string,
  flags: string,
  replacement: string,
  budget: RegexBudget = {},
): RegexOutcome {
  compileRegex(pattern, flags);
  const timeoutMs = budget.timeoutMs ?? 250;
  const maxMatches = budget.maxMatches ?? 100_000;
  let result: { matches: number; output: string };
  try {
    result = runInNewContext(
      `(() => {
        const re = new RegExp(pattern, flags);
        let matches = 0;
        text.replace(re, () => { matches++; return ""; });
        return { matches, output: matches === 0 ? text : text.replace(re, replacement) };
      })()`,
      { text, pattern, flags, replacement },
      { timeout: timeoutMs },
    ) as { matches: number; output: string };
  } catch (error) {
    if ((error as { code?: unknown }).code === "ERR_SCRIPT_EXECUTION_TIMEOUT") {
      throw new TextEditError(
        "ASP_TEXT_EDIT_REGEX_BUDGET",
        `the pattern ran for more than ${timeoutMs} ms on the file: simplify it (avoid nested quantifiers)`,
        { data: { timeoutMs } },
      );
    }
    throw new TextEditError("ASP_TEXT_EDIT_BAD_REGEX", `the pattern failed: ${(error as Error).message}`);
  }
  if (result.matches > maxMatches) {
    throw new TextEditError(
      "ASP_TEXT_EDIT_REGEX_BUDGET",
      `the pattern matches ${result.matches} times, more than ${maxMatches}`,
      { data: { matches: result.matches, maxMatches } },
    );
  }
  return { matches: result.matches, output: String(result.output) };
}
