import { AspError } from "@asp/contracts";

/**
 * Every code `@asp/sdk` raises. Stable public API: switch on these, never on message text.
 *
 * - `ASP_SDK_INVALID_DEFINITION`: `defineProvider` / `defineVerifier` / `defineSandbox` was given
 *   something that is not a valid definition (missing handler, bad id, unknown capability).
 * - `ASP_SDK_INVALID_RESULT`: a handler returned a result that fails the contracts schema or
 *   carries a host-owned field; the SDK answers the host with status `error` instead.
 * - `ASP_SDK_HANDLER_FAILED`: a handler threw something that is not an `AspError`.
 * - `ASP_SDK_BAD_BLOB`: the host answered `host/readBlob` with bytes that do not match the digest.
 * - `ASP_SDK_CALLBACK_FAILED`: a `host/readBlob` or `host/readTree` callback was refused by the host.
 * - `ASP_SDK_CANCELLED`: the request was cancelled (`$/cancelRequest`) or passed its deadline.
 * - `ASP_SDK_CONNECTION_FAILED`: (`@asp/sdk/testing`) a request to the provider under test got no
 *   answer: the process exited, the answer was over the size bound or not framed, or it timed out.
 */
export type SdkErrorCode =
  | "ASP_SDK_INVALID_DEFINITION"
  | "ASP_SDK_INVALID_RESULT"
  | "ASP_SDK_HANDLER_FAILED"
  | "ASP_SDK_BAD_BLOB"
  | "ASP_SDK_CALLBACK_FAILED"
  | "ASP_SDK_CANCELLED"
  | "ASP_SDK_CONNECTION_FAILED";

/** Every {@link SdkErrorCode}. */
export const SDK_ERROR_CODES: readonly SdkErrorCode[] = Object.freeze([
  "ASP_SDK_INVALID_DEFINITION",
  "ASP_SDK_INVALID_RESULT",
  "ASP_SDK_HANDLER_FAILED",
  "ASP_SDK_BAD_BLOB",
  "ASP_SDK_CALLBACK_FAILED",
  "ASP_SDK_CANCELLED",
  "ASP_SDK_CONNECTION_FAILED",
]);

/** Thrown by `@asp/sdk`. */
export class SdkError extends AspError<SdkErrorCode> {}

/** The message of anything thrown (internal). */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
