import { AspError, type AspErrorOptions, isAspError } from "@asp/contracts";

/**
 * Every code `@asp/server` answers with or throws. Stable public API: clients switch on these,
 * never on message text. Each is sent as `{ code, message }` with the HTTP status beside it.
 *
 * - `ASP_SERVER_UNAUTHORIZED` (401): no `Authorization: Bearer …` header, or a token trusted
 *   configuration does not list (input).
 * - `ASP_SERVER_FORBIDDEN` (403): the token is valid but lacks the scope the route needs
 *   (`data.scope`) (input).
 * - `ASP_SERVER_NOT_FOUND` (404): no such route; there are no unversioned or alias routes (input).
 * - `ASP_SERVER_UNKNOWN_REPOSITORY` (404): the repository name is not in the trusted
 *   configuration's `server.repositories`; a client never names a path (input).
 * - `ASP_SERVER_UNKNOWN_RUN` (404): no Auto Run with this id in the host's store (input).
 * - `ASP_SERVER_PRECONDITION_FAILED` (412): an `If-Match` that names another version of the
 *   resource than the one stored (GET it again) (input).
 * - `ASP_SERVER_RATE_LIMITED` (429): more requests from this token (or, without one, this
 *   address) than the server's rate allows in its window; `Retry-After` says when (input).
 * - `ASP_SERVER_BUSY` (503): as many event streams are open as the server allows (input).
 * - `ASP_SERVER_BAD_REQUEST` (400): the body, query or path does not match the route's schema, or
 *   is not JSON (input).
 * - `ASP_SERVER_BODY_TOO_LARGE` (413): the body is over the server's `bodyLimit` (input).
 * - `ASP_SERVER_UNSUPPORTED_MEDIA_TYPE` (415): a body that is not `application/json` (or, on a
 *   PATCH route, `application/merge-patch+json`) (input).
 * - `ASP_SERVER_BAD_OPTIONS` (thrown by `createServer`): no repository, a repository that is not a
 *   folder, a token digest twice, or a store the server cannot hold alone (input).
 * - `ASP_SERVER_INTERNAL` (500): the host failed in a way the client cannot fix; the message says
 *   nothing more (the server's log does) (internal).
 *
 * Errors of the host itself keep their own code (`ASP_THS_RECEIPT_NOT_FOUND`,
 * `ASP_AUTO_MODE_VERSION_NOT_FOUND` are 404s; `ASP_THS_TRUSTED_BASE_MOVED`,
 * `ASP_AUTO_MODE_VERSION_AMBIGUOUS` and `ASP_ROLLOUT_STAGE_DISABLED` 409s; any other input error
 * of the host, a rollout configuration error included, a 400).
 */
export type ServerErrorCode =
  | "ASP_SERVER_UNAUTHORIZED"
  | "ASP_SERVER_FORBIDDEN"
  | "ASP_SERVER_NOT_FOUND"
  | "ASP_SERVER_UNKNOWN_REPOSITORY"
  | "ASP_SERVER_UNKNOWN_RUN"
  | "ASP_SERVER_PRECONDITION_FAILED"
  | "ASP_SERVER_BUSY"
  | "ASP_SERVER_RATE_LIMITED"
  | "ASP_SERVER_BAD_REQUEST"
  | "ASP_SERVER_BODY_TOO_LARGE"
  | "ASP_SERVER_UNSUPPORTED_MEDIA_TYPE"
  | "ASP_SERVER_BAD_OPTIONS"
  | "ASP_SERVER_INTERNAL";

/** Every {@link ServerErrorCode}, for documentation and exhaustiveness tests. */
export const SERVER_ERROR_CODES: readonly ServerErrorCode[] = [
  "ASP_SERVER_UNAUTHORIZED",
  "ASP_SERVER_FORBIDDEN",
  "ASP_SERVER_NOT_FOUND",
  "ASP_SERVER_UNKNOWN_REPOSITORY",
  "ASP_SERVER_UNKNOWN_RUN",
  "ASP_SERVER_PRECONDITION_FAILED",
  "ASP_SERVER_BUSY",
  "ASP_SERVER_RATE_LIMITED",
  "ASP_SERVER_BAD_REQUEST",
  "ASP_SERVER_BODY_TOO_LARGE",
  "ASP_SERVER_UNSUPPORTED_MEDIA_TYPE",
  "ASP_SERVER_BAD_OPTIONS",
  "ASP_SERVER_INTERNAL",
];

const STATUS: Readonly<Record<ServerErrorCode, number>> = {
  ASP_SERVER_UNAUTHORIZED: 401,
  ASP_SERVER_FORBIDDEN: 403,
  ASP_SERVER_NOT_FOUND: 404,
  ASP_SERVER_UNKNOWN_REPOSITORY: 404,
  ASP_SERVER_UNKNOWN_RUN: 404,
  ASP_SERVER_PRECONDITION_FAILED: 412,
  ASP_SERVER_BUSY: 503,
  ASP_SERVER_RATE_LIMITED: 429,
  ASP_SERVER_BAD_REQUEST: 400,
  ASP_SERVER_BODY_TOO_LARGE: 413,
  ASP_SERVER_UNSUPPORTED_MEDIA_TYPE: 415,
  ASP_SERVER_BAD_OPTIONS: 500,
  ASP_SERVER_INTERNAL: 500,
};

/** A failure of the server, with its HTTP status. */
export class ServerError extends AspError<ServerErrorCode> {
  /** The HTTP status the answer carries. */
  readonly status: number;
  constructor(code: ServerErrorCode, message: string, options: AspErrorOptions = {}) {
    super(code, message, options);
    this.status = STATUS[code];
  }
}

/** Host codes with a status of their own; every other input error of the host is a 400. */
const HOST_STATUS: Readonly<Record<string, number>> = {
  ASP_THS_RECEIPT_NOT_FOUND: 404,
  ASP_THS_UNKNOWN_PROVIDER: 404,
  ASP_THS_TRUSTED_BASE_MOVED: 409,
  ASP_AUTO_MODE_VERSION_NOT_FOUND: 404,
  ASP_AUTO_MODE_VERSION_AMBIGUOUS: 409,
  ASP_ROLLOUT_STAGE_DISABLED: 409,
};

/** Fastify's own error codes, mapped onto ours. */
const FASTIFY_CODES: Readonly<Record<string, ServerErrorCode>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: "ASP_SERVER_BODY_TOO_LARGE",
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "ASP_SERVER_UNSUPPORTED_MEDIA_TYPE",
  FST_ERR_CTP_EMPTY_JSON_BODY: "ASP_SERVER_BAD_REQUEST",
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: "ASP_SERVER_BAD_REQUEST",
  FST_ERR_VALIDATION: "ASP_SERVER_BAD_REQUEST",
};

/** The answer for any error: its status and `{ code, message }`, and nothing internal. */
export function answerOf(error: unknown): { status: number; body: { code: string; message: string } } {
  if (error instanceof ServerError) return { status: error.status, body: { code: error.code, message: error.message } };
  const fastify = error as { code?: unknown; validation?: unknown; statusCode?: unknown; message?: unknown };
  const mapped =
    typeof fastify.code === "string"
      ? FASTIFY_CODES[fastify.code]
      : fastify.validation !== undefined
        ? "ASP_SERVER_BAD_REQUEST"
        : undefined;
  // Any other client error Fastify raises (a JSON body that does not parse, a poisoned key) is a 400.
  const clientError =
    mapped === undefined &&
    typeof fastify.statusCode === "number" &&
    fastify.statusCode >= 400 &&
    fastify.statusCode < 500 &&
    !isAspError(error);
  if (mapped !== undefined || clientError) {
    const code = mapped ?? "ASP_SERVER_BAD_REQUEST";
    return { status: STATUS[code], body: { code, message: String(fastify.message ?? "bad request") } };
  }
  if (isAspError(error) && error.category === "input") {
    return { status: HOST_STATUS[error.code] ?? 400, body: { code: error.code, message: error.message } };
  }
  return {
    status: 500,
    body: { code: "ASP_SERVER_INTERNAL", message: "the host failed; the server's log says why" },
  };
}
