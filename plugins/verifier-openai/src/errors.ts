import { AspError, type AspErrorOptions } from "@asp/contracts";

/**
 * Every code `@asp/verifier-openai` raises. Stable public API: switch on these, never on text.
 * No error ever carries the API key, a request header or text the server sent: `data` names
 * the option, the HTTP status or the failing step only.
 *
 * - `ASP_OPENAI_BAD_OPTIONS`: the plugin options are not the documented shape (a `baseUrl` that
 *   is not plain http/https or carries credentials, a query or a fragment; an unknown option ...).
 * - `ASP_OPENAI_NO_API_KEY`: the environment variable named by `apiKeyEnv` is unset, empty, or not
 *   a single printable header token. Nothing was sent.
 * - `ASP_OPENAI_BAD_REQUEST`: the request is not one this verifier answers (neither `review` nor
 *   `guardian`; a review subject without candidate, payload or snapshot, a blob the content reader
 *   does not hold; a Guardian request without action digest or class, a subject that is not a JSON
 *   object, names another action, or is over 16 KiB of JSON). Nothing was sent.
 * - `ASP_OPENAI_CONNECTION_FAILED`: no HTTP answer: connection refused or reset, DNS failure, TLS.
 * - `ASP_OPENAI_TIMEOUT`: no complete answer within `timeoutMs`; the request was aborted.
 * - `ASP_OPENAI_ABORTED`: the caller's signal aborted the request (e.g. the runner's own deadline).
 * - `ASP_OPENAI_RATE_LIMITED`: HTTP 429.
 * - `ASP_OPENAI_HTTP_STATUS`: any other status outside 2xx, redirects included (never followed:
 *   the key must not travel to another origin).
 * - `ASP_OPENAI_RESPONSE_TOO_LARGE`: the body exceeded the bound; reading stopped there.
 * - `ASP_OPENAI_MALFORMED_RESPONSE`: the body is not UTF-8 JSON, has no
 *   `choices[0].message.content` string, the content is not JSON, or the answer was cut off.
 * - `ASP_OPENAI_REFUSAL`: the model refused (`message.refusal`, `finish_reason: content_filter`).
 * - `ASP_OPENAI_SCHEMA_INVALID`: the content is JSON but not the verdict schema (a review) or the
 *   Guardian answer schema (a Guardian request; an allow or a recoverable deny at `critical` risk
 *   included).
 */
export type OpenAIReviewerErrorCode =
  | "ASP_OPENAI_BAD_OPTIONS"
  | "ASP_OPENAI_NO_API_KEY"
  | "ASP_OPENAI_BAD_REQUEST"
  | "ASP_OPENAI_CONNECTION_FAILED"
  | "ASP_OPENAI_TIMEOUT"
  | "ASP_OPENAI_ABORTED"
  | "ASP_OPENAI_RATE_LIMITED"
  | "ASP_OPENAI_HTTP_STATUS"
  | "ASP_OPENAI_RESPONSE_TOO_LARGE"
  | "ASP_OPENAI_MALFORMED_RESPONSE"
  | "ASP_OPENAI_REFUSAL"
  | "ASP_OPENAI_SCHEMA_INVALID";

/** Every {@link OpenAIReviewerErrorCode}, for table tests and exhaustive handling. */
export const OPENAI_REVIEWER_ERROR_CODES: readonly OpenAIReviewerErrorCode[] = Object.freeze([
  "ASP_OPENAI_BAD_OPTIONS",
  "ASP_OPENAI_NO_API_KEY",
  "ASP_OPENAI_BAD_REQUEST",
  "ASP_OPENAI_CONNECTION_FAILED",
  "ASP_OPENAI_TIMEOUT",
  "ASP_OPENAI_ABORTED",
  "ASP_OPENAI_RATE_LIMITED",
  "ASP_OPENAI_HTTP_STATUS",
  "ASP_OPENAI_RESPONSE_TOO_LARGE",
  "ASP_OPENAI_MALFORMED_RESPONSE",
  "ASP_OPENAI_REFUSAL",
  "ASP_OPENAI_SCHEMA_INVALID",
]);

/**
 * How a review attempt that failed with each code is recorded by the host (`data.attempt_outcome`,
 * read by `@asp/auto-mode`'s `runAttempt`): an answer that came but is not an admissible verdict is
 * `unparseable`, no answer in time is `timeout`, everything else `provider_failed`. None is a pass.
 * A Guardian request's failure carries the same outcome; none is an allow.
 */
export const ATTEMPT_OUTCOME_OF: Readonly<
  Record<OpenAIReviewerErrorCode, "timeout" | "unparseable" | "provider_failed">
> = Object.freeze({
  ASP_OPENAI_BAD_OPTIONS: "provider_failed",
  ASP_OPENAI_NO_API_KEY: "provider_failed",
  ASP_OPENAI_BAD_REQUEST: "provider_failed",
  ASP_OPENAI_CONNECTION_FAILED: "provider_failed",
  ASP_OPENAI_TIMEOUT: "timeout",
  ASP_OPENAI_ABORTED: "timeout",
  ASP_OPENAI_RATE_LIMITED: "provider_failed",
  ASP_OPENAI_HTTP_STATUS: "provider_failed",
  ASP_OPENAI_RESPONSE_TOO_LARGE: "unparseable",
  ASP_OPENAI_MALFORMED_RESPONSE: "unparseable",
  ASP_OPENAI_REFUSAL: "unparseable",
  ASP_OPENAI_SCHEMA_INVALID: "unparseable",
});

/**
 * Thrown by `@asp/verifier-openai`; never carries the key, a header or server text. Its `data`
 * names the attempt outcome the host records ({@link ATTEMPT_OUTCOME_OF}).
 */
export class OpenAIReviewerError extends AspError<OpenAIReviewerErrorCode> {
  constructor(code: OpenAIReviewerErrorCode, message: string, options: AspErrorOptions = {}) {
    super(code, message, { ...options, data: { ...options.data, attempt_outcome: ATTEMPT_OUTCOME_OF[code] } });
  }
}
