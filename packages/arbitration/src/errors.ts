import { AspError } from "@asp/contracts";

/**
 * Every error code `@asp/arbitration` throws. Stable public API: callers branch on these, never
 * on message text. `data.pointer` is the JSON pointer of the offending value in the input.
 */
export type ArbitrationErrorCode =
  /** Two provider runs with the same provider id in one arbitration. */
  | "ASP_ARBITRATION_DUPLICATE_PROVIDER"
  /** Two edit plans with the same proposal id. */
  | "ASP_ARBITRATION_DUPLICATE_PROPOSAL"
  /** Input that is not the documented shape (unknown call-site, run without a result, missing provider identity ...). */
  | "ASP_ARBITRATION_INVALID_INPUT";

/** Every {@link ArbitrationErrorCode}, for table tests and documentation. */
export const ARBITRATION_ERROR_CODES: ReadonlyArray<ArbitrationErrorCode> = Object.freeze([
  "ASP_ARBITRATION_DUPLICATE_PROVIDER",
  "ASP_ARBITRATION_DUPLICATE_PROPOSAL",
  "ASP_ARBITRATION_INVALID_INPUT",
] as const);

/** The one error class `@asp/arbitration` throws (category `input`: the caller passed bad input). */
export class ArbitrationError extends AspError<ArbitrationErrorCode> {}

/** Shorthand with the pointer in `data`. */
export function arbitrationError(code: ArbitrationErrorCode, message: string, pointer: string): ArbitrationError {
  return new ArbitrationError(code, message, { data: { pointer } });
}
