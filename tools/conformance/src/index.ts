/**
 * `@asp/conformance`: the provider conformance kit. It launches any provider command, acts as
 * the host (serving `host/readBlob` / `host/readTree` from a synthetic tree), runs the protocol
 * suite and returns a per-check report with a conformance digest that can be recorded as
 * conformance evidence (one of the five authority axes).
 *
 * @packageDocumentation
 */

export type { CheckId } from "./checks.js";
export { CHECKS, SUITE_VERSION } from "./checks.js";
export type { ConformanceErrorCode } from "./errors.js";
export { ConformanceError } from "./errors.js";
export type { ConformanceCheck, ConformanceOptions, ConformanceReport } from "./run.js";
export { formatReport, isConformanceReport, runConformance } from "./run.js";
