/**
 * The shared error base. Every package throws an {@link AspError} subclass with a stable
 * SCREAMING_SNAKE `code`; callers and tests tell errors apart by code, never by message text.
 */

/** The JSON shape of an error as the CLI and the HTTP API print it. */
export interface AspErrorJSON {
  readonly code: string;
  readonly message: string;
  readonly data?: Readonly<Record<string, unknown>>;
}

/**
 * What kind of failure an error is. `input`: the caller gave something wrong and can fix it
 * (CLI exit 64). `integrity`: stored or received data failed a check. `internal`: a bug or an
 * environment failure (CLI exit 70).
 */
export type AspErrorCategory = "input" | "integrity" | "internal";

/** Options accepted by {@link AspError}. */
export interface AspErrorOptions {
  /** Defaults to `input`. */
  readonly category?: AspErrorCategory;
  /** The underlying error, kept for diagnosis (never printed into `toJSON`). */
  readonly cause?: unknown;
  /** Structured, secret-free context (offending key, path, pointer ...). */
  readonly data?: Readonly<Record<string, unknown>>;
}

const BRAND = "@asp/Error";

/**
 * Base class of every error the toolkit throws.
 *
 * @example
 * ```ts
 * class PolicyError extends AspError<"ASP_POLICY_UNKNOWN_VALUE"> {}
 * throw new PolicyError("ASP_POLICY_UNKNOWN_VALUE", "result_review_mode 'auto' is not one of off, review_only, auto_fix", { data: { key: "result_review_mode" } });
 * ```
 */
export class AspError<C extends string = string> extends Error {
  /** Brand, so errors from another copy of this package are still recognised ({@link isAspError}). */
  readonly $$type: typeof BRAND = BRAND;
  /** Stable, documented error code. */
  readonly code: C;
  /** Structured context; never contains secrets. */
  readonly data: Readonly<Record<string, unknown>> | undefined;
  /** Whether the caller can fix it (`input`) or not. */
  readonly category: AspErrorCategory;

  constructor(code: C, message: string, options: AspErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.data = options.data;
    this.category = options.category ?? "input";
  }

  /** `{ code, message, data }`: the machine-readable form used by `--json` output. */
  toJSON(): AspErrorJSON {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }
}

/** True for any {@link AspError}, including one created by another copy of this package. */
export function isAspError(value: unknown): value is AspError {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as { $$type?: unknown }).$$type === BRAND &&
    typeof (value as { code?: unknown }).code === "string"
  );
}

/** Error codes thrown by `@asp/contracts` itself. */
export type ContractsErrorCode =
  | "ASP_CONTRACTS_UNKNOWN_SCHEMA"
  | "ASP_CONTRACTS_INVALID"
  | "ASP_CONTRACTS_NON_CANONICAL_VALUE";

/**
 * Thrown by `@asp/contracts` (unknown schema name, `assertValid` on invalid data, a value with
 * no canonical JSON form).
 */
export class ContractsError extends AspError<ContractsErrorCode> {}
