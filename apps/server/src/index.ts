/**
 * `@asp/server`: the HTTP face of one long-lived ASP trusted host (Fastify). Bearer tokens from
 * trusted configuration (by digest, with scopes), repositories by name (never a client-chosen
 * path), closed request schemas, `{ code, message }` errors, evaluations one at a time over the
 * host's store. `asp serve` runs it.
 *
 * @packageDocumentation
 */

export type { ServerToken } from "./auth.js";
export { authorize, tokenDigest } from "./auth.js";
export type { ServerAutoMode } from "./auto-routes.js";
export type { ServerErrorCode } from "./errors.js";
export { SERVER_ERROR_CODES, ServerError } from "./errors.js";
export { openApiDocument } from "./openapi.js";
export type { ServerRoute } from "./routes.js";
export { SERVER_ROUTES } from "./routes.js";
export type { ServerOptions } from "./server.js";
export { createServer } from "./server.js";
export type { StreamEvent, StreamEventType } from "./stream.js";
export { STREAM_EVENT_TYPES, streamEventOf } from "./stream.js";
