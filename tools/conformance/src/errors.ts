import { AspError } from "@asp/contracts";

/**
 * Every code `@asp/conformance` throws (a failing provider is a report, never an exception).
 *
 * - `ASP_CONFORMANCE_BAD_OPTIONS`: the command is empty or an option is out of range.
 */
export type ConformanceErrorCode = "ASP_CONFORMANCE_BAD_OPTIONS";

/** Thrown by `@asp/conformance` for unusable options. */
export class ConformanceError extends AspError<ConformanceErrorCode> {}
