import { AspError, type AspErrorOptions } from "@asp/contracts";

/**
 * Every code `@asp/engine-openai` raises: thrown at creation (`ASP_ENGINE_OPENAI_BAD_OPTIONS`),
 * and otherwise the `code` of a run's `failed` step. Stable public API: switch on these, never on
 * text. No error or step ever carries the API key, a request header or text the server sent:
 * messages and `data` name the option, the HTTP status, the errno code or the failing step only.
 *
 * - `ASP_ENGINE_OPENAI_BAD_OPTIONS`: the plugin options are not the documented shape.
 * - `ASP_ENGINE_OPENAI_BAD_REQUEST`: the run's params are not what the Engine port takes (no task
 *   string, a tool without name or parameters), or the host answered an action with something
 *   that is not an `ActionResult`. Nothing (more) was sent.
 * - `ASP_ENGINE_OPENAI_NO_API_KEY`: the environment variable named by `apiKeyEnv` is unset, empty,
 *   or not a single printable header token. Nothing was sent.
 * - `ASP_ENGINE_OPENAI_CONNECTION_FAILED`: no HTTP answer, or the connection broke mid-answer.
 * - `ASP_ENGINE_OPENAI_TIMEOUT`: no byte of the answer for `requestTimeoutMs` (a stall); the
 *   request was aborted.
 * - `ASP_ENGINE_OPENAI_RATE_LIMITED`: HTTP 429 on the retry too, or a `Retry-After` beyond the cap.
 * - `ASP_ENGINE_OPENAI_HTTP_STATUS`: a 5xx on the retry too, or any other status outside 2xx,
 *   redirects included (never followed: the key must not travel to another origin).
 * - `ASP_ENGINE_OPENAI_STREAM_ERROR`: the server sent an `error` event inside the stream.
 * - `ASP_ENGINE_OPENAI_RESPONSE_TOO_LARGE`: one answer exceeded the byte bound, or its final text
 *   the size of a completion payload; reading stopped there.
 * - `ASP_ENGINE_OPENAI_MALFORMED_STREAM`: the body is not UTF-8 server-sent events of
 *   chat-completion chunks, or it ended before the answer was complete (`finish_reason: length`
 *   included), or an echoed key kept reforming after it was scrubbed.
 * - `ASP_ENGINE_OPENAI_BAD_TOOL_CALL`: a tool call without a name, with `arguments` that are not
 *   a JSON object, or more tool calls in one answer than the bound.
 * - `ASP_ENGINE_OPENAI_REFUSAL`: the model refused (`refusal` text, `finish_reason: content_filter`).
 */
export type OpenAIEngineErrorCode =
  | "ASP_ENGINE_OPENAI_BAD_OPTIONS"
  | "ASP_ENGINE_OPENAI_BAD_REQUEST"
  | "ASP_ENGINE_OPENAI_NO_API_KEY"
  | "ASP_ENGINE_OPENAI_CONNECTION_FAILED"
  | "ASP_ENGINE_OPENAI_TIMEOUT"
  | "ASP_ENGINE_OPENAI_RATE_LIMITED"
  | "ASP_ENGINE_OPENAI_HTTP_STATUS"
  | "ASP_ENGINE_OPENAI_STREAM_ERROR"
  | "ASP_ENGINE_OPENAI_RESPONSE_TOO_LARGE"
  | "ASP_ENGINE_OPENAI_MALFORMED_STREAM"
  | "ASP_ENGINE_OPENAI_BAD_TOOL_CALL"
  | "ASP_ENGINE_OPENAI_REFUSAL";

/** Every {@link OpenAIEngineErrorCode}, for table tests and exhaustive handling. */
export const OPENAI_ENGINE_ERROR_CODES: readonly OpenAIEngineErrorCode[] = Object.freeze([
  "ASP_ENGINE_OPENAI_BAD_OPTIONS",
  "ASP_ENGINE_OPENAI_BAD_REQUEST",
  "ASP_ENGINE_OPENAI_NO_API_KEY",
  "ASP_ENGINE_OPENAI_CONNECTION_FAILED",
  "ASP_ENGINE_OPENAI_TIMEOUT",
  "ASP_ENGINE_OPENAI_RATE_LIMITED",
  "ASP_ENGINE_OPENAI_HTTP_STATUS",
  "ASP_ENGINE_OPENAI_STREAM_ERROR",
  "ASP_ENGINE_OPENAI_RESPONSE_TOO_LARGE",
  "ASP_ENGINE_OPENAI_MALFORMED_STREAM",
  "ASP_ENGINE_OPENAI_BAD_TOOL_CALL",
  "ASP_ENGINE_OPENAI_REFUSAL",
]);

/** The attempt outcomes a `failed` step carries. */
export type EngineAttemptOutcome = "timeout" | "provider_error" | "parse_error";

/**
 * The attempt outcome of each code (a `failed` step's `outcome`, and `data.attempt_outcome` of a
 * thrown error): no answer in time is `timeout`; an answer that came but cannot be used (not the
 * stream format, a tool call whose arguments do not parse, a refusal, too large) is `parse_error`;
 * no usable answer from the provider (no key, no connection, 429/5xx after the retry, another
 * status, an error event) is `provider_error`.
 */
export const ATTEMPT_OUTCOME_OF: Readonly<Record<OpenAIEngineErrorCode, EngineAttemptOutcome>> = Object.freeze({
  ASP_ENGINE_OPENAI_BAD_OPTIONS: "provider_error",
  ASP_ENGINE_OPENAI_BAD_REQUEST: "provider_error",
  ASP_ENGINE_OPENAI_NO_API_KEY: "provider_error",
  ASP_ENGINE_OPENAI_CONNECTION_FAILED: "provider_error",
  ASP_ENGINE_OPENAI_TIMEOUT: "timeout",
  ASP_ENGINE_OPENAI_RATE_LIMITED: "provider_error",
  ASP_ENGINE_OPENAI_HTTP_STATUS: "provider_error",
  ASP_ENGINE_OPENAI_STREAM_ERROR: "provider_error",
  ASP_ENGINE_OPENAI_RESPONSE_TOO_LARGE: "parse_error",
  ASP_ENGINE_OPENAI_MALFORMED_STREAM: "parse_error",
  ASP_ENGINE_OPENAI_BAD_TOOL_CALL: "parse_error",
  ASP_ENGINE_OPENAI_REFUSAL: "parse_error",
});

/**
 * Raised by `@asp/engine-openai`; never carries the key, a header or server text. Its `data`
 * names the attempt outcome ({@link ATTEMPT_OUTCOME_OF}). A run turns it into a `failed` step.
 */
export class OpenAIEngineError extends AspError<OpenAIEngineErrorCode> {
  constructor(code: OpenAIEngineErrorCode, message: string, options: AspErrorOptions = {}) {
    super(code, message, { ...options, data: { ...options.data, attempt_outcome: ATTEMPT_OUTCOME_OF[code] } });
  }

  /** The attempt outcome of this error's code. */
  get outcome(): EngineAttemptOutcome {
    return ATTEMPT_OUTCOME_OF[this.code];
  }
}
