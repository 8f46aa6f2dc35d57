import { AspError, type AspErrorOptions } from "@asp/contracts";

/**
 * Every code `@asp/ths` throws. Stable public API: callers and tests switch on these, never on
 * message text. Provider failures are never thrown: they become typed degraded coverage.
 *
 * - `ASP_THS_BAD_CONFIG`: the trusted host configuration is unreadable or invalid (input).
 * - `ASP_THS_BAD_OPTIONS`: `composeHost` was given an option it does not know (`data.option`,
 *   `data.closest`), or options that are not an object (input).
 * - `ASP_THS_BAD_MANIFEST`: a trusted provider manifest is invalid: not absolute, not
 *   structured, a duplicate id (input).
 * - `ASP_THS_BAD_POLICY`: the trusted policy is unreadable or does not validate (input).
 * - `ASP_THS_BAD_REQUEST`: an evaluation was asked for with bad arguments (unknown call-site,
 *   missing repository directory) (input).
 * - `ASP_THS_CLOSED`: the host was used after `close()` (internal).
 * - `ASP_THS_RECEIPT_NOT_FOUND`: no receipt with that id in the store (input).
 * - `ASP_THS_UNTRUSTED_LOCATION`: a trusted input (host configuration, policy, trust root,
 *   plugin folder, store, provider executable, argument or cwd) lies inside the repository
 *   being evaluated, after resolving symlinks (input).
 * - `ASP_THS_INTERNAL`: an invariant of the host itself broke, e.g. an envelope that does not
 *   validate against the verdict schema (internal; never returned as a decision).
 */
export type ThsErrorCode =
  | "ASP_THS_BAD_CONFIG"
  | "ASP_THS_BAD_OPTIONS"
  | "ASP_THS_BAD_MANIFEST"
  | "ASP_THS_BAD_POLICY"
  | "ASP_THS_BAD_REQUEST"
  | "ASP_THS_CLOSED"
  | "ASP_THS_RECEIPT_NOT_FOUND"
  | "ASP_THS_UNTRUSTED_LOCATION"
  | "ASP_THS_INTERNAL";

/** Every {@link ThsErrorCode}, for table tests and documentation. */
export const THS_ERROR_CODES: readonly ThsErrorCode[] = [
  "ASP_THS_BAD_CONFIG",
  "ASP_THS_BAD_OPTIONS",
  "ASP_THS_BAD_MANIFEST",
  "ASP_THS_BAD_POLICY",
  "ASP_THS_BAD_REQUEST",
  "ASP_THS_CLOSED",
  "ASP_THS_RECEIPT_NOT_FOUND",
  "ASP_THS_UNTRUSTED_LOCATION",
  "ASP_THS_INTERNAL",
];

/** Thrown by `@asp/ths`. */
export class ThsError extends AspError<ThsErrorCode> {
  constructor(code: ThsErrorCode, message: string, options: AspErrorOptions = {}) {
    super(code, message, {
      ...options,
      category: options.category ?? (code === "ASP_THS_CLOSED" || code === "ASP_THS_INTERNAL" ? "internal" : "input"),
    });
  }
}
