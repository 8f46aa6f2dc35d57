import { AspError, type AspErrorCategory } from "@asp/contracts";

/**
 * Every error code `@asp/policy` throws. Stable public API: callers and tests branch on these,
 * never on message text. Every parse error's `data.pointer` is the RFC 6901 JSON pointer of
 * the offending value, and `data.errors` lists every problem found (each with its own code and
 * pointer), so one run shows all of them. No message echoes a policy value longer than an id.
 */
export type PolicyErrorCode =
  /** The policy text is not JSON at all. */
  | "ASP_POLICY_NOT_JSON"
  /** A JSON object names the same key twice: the later value would silently hide the earlier one. */
  | "ASP_POLICY_DUPLICATE_KEY"
  /** `apiVersion` is missing or not a version this package understands. */
  | "ASP_POLICY_UNSUPPORTED_VERSION"
  /** A property the policy schema does not define (every object is closed). */
  | "ASP_POLICY_UNKNOWN_FIELD"
  /** A value outside its closed vocabulary (call-site, fail class, outcome, assurance mode ...). */
  | "ASP_POLICY_UNKNOWN_VALUE"
  /** A required property is absent. */
  | "ASP_POLICY_MISSING_FIELD"
  /** An empty string or an empty list where a value is required: empty never means "none" or "all". */
  | "ASP_POLICY_EMPTY_VALUE"
  /** A value of the wrong type or shape (not a digest, not semver, not an integer ...). */
  | "ASP_POLICY_INVALID_VALUE"
  /** Two requirements, provider pins, plugin grants or authority grants with the same identity. */
  | "ASP_POLICY_DUPLICATE_ID"
  /** A grant whose provider id + version + digest does not match a `providers[]` pin exactly. */
  | "ASP_POLICY_UNPINNED_GRANT"
  /** A grant naming a requirement the policy does not define, or a call-site the requirement is not required at. */
  | "ASP_POLICY_UNKNOWN_REQUIREMENT"
  /** Something that looks like a launch instruction: executable path, shell string, argv, cwd or env mutation (host §2). */
  | "ASP_POLICY_LAUNCH_INSTRUCTION"
  /** A `gate` fail-policy cell set to `open`: the non-weakenable floor (host §2). */
  | "ASP_POLICY_FAIL_OPEN_FLOOR"
  /** An organization floor that pins providers, grants authority or grants plugins: a floor only tightens. */
  | "ASP_POLICY_FLOOR_GRANTS"
  /** A value given where an {@link ActivePolicy} (the result of `parsePolicy`) is required. */
  | "ASP_POLICY_NOT_ACTIVE"
  /** A permission request without a tool, or with a path / network target that is not a string. */
  | "ASP_POLICY_INVALID_ACTION"
  /** A policy source that is not trusted by construction (relative path, option-like revision, path escaping the repository). */
  | "ASP_POLICY_UNTRUSTED_SOURCE"
  /** A policy source could not be read (missing file, unknown revision, git failure). */
  | "ASP_POLICY_SOURCE_UNREADABLE";

/** Every {@link PolicyErrorCode}, for table tests and documentation. */
export const POLICY_ERROR_CODES: ReadonlyArray<PolicyErrorCode> = Object.freeze([
  "ASP_POLICY_NOT_JSON",
  "ASP_POLICY_DUPLICATE_KEY",
  "ASP_POLICY_UNSUPPORTED_VERSION",
  "ASP_POLICY_UNKNOWN_FIELD",
  "ASP_POLICY_UNKNOWN_VALUE",
  "ASP_POLICY_MISSING_FIELD",
  "ASP_POLICY_EMPTY_VALUE",
  "ASP_POLICY_INVALID_VALUE",
  "ASP_POLICY_DUPLICATE_ID",
  "ASP_POLICY_UNPINNED_GRANT",
  "ASP_POLICY_UNKNOWN_REQUIREMENT",
  "ASP_POLICY_LAUNCH_INSTRUCTION",
  "ASP_POLICY_FAIL_OPEN_FLOOR",
  "ASP_POLICY_FLOOR_GRANTS",
  "ASP_POLICY_NOT_ACTIVE",
  "ASP_POLICY_INVALID_ACTION",
  "ASP_POLICY_UNTRUSTED_SOURCE",
  "ASP_POLICY_SOURCE_UNREADABLE",
] as const);

/** One problem found in a policy document: what (code), where (JSON pointer) and why. */
export interface PolicyProblem {
  readonly code: PolicyErrorCode;
  /** RFC 6901 pointer into the document; `""` is the whole document. */
  readonly pointer: string;
  readonly message: string;
}

/**
 * The one error class `@asp/policy` throws. `category` is `input` except for
 * `ASP_POLICY_SOURCE_UNREADABLE` from a git failure, which is `internal`.
 *
 * @example
 * ```ts
 * try { parsePolicy(text); }
 * catch (e) { if (isAspError(e)) console.error(e.code, e.data?.pointer); }
 * ```
 */
export class PolicyError extends AspError<PolicyErrorCode> {}

/** A {@link PolicyError} for a list of problems: its code and pointer are the first problem's. */
export function problemsError(problems: ReadonlyArray<PolicyProblem>, what: string): PolicyError {
  const first = problems[0] as PolicyProblem;
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more problem${problems.length > 2 ? "s" : ""})` : "";
  return new PolicyError(first.code, `${what} is not valid policy: ${first.pointer || "/"} ${first.message}${more}`, {
    data: { pointer: first.pointer, errors: problems.map((p) => ({ ...p })) },
  });
}

/** Shorthand for a single-problem {@link PolicyError}. */
export function policyError(
  code: PolicyErrorCode,
  message: string,
  data: Readonly<Record<string, unknown>> = {},
  options: { readonly cause?: unknown; readonly category?: AspErrorCategory } = {},
): PolicyError {
  return new PolicyError(code, message, { data, ...options });
}
