/**
 * `@asp/protocol`: the one ASP protocol layer, between the shapes (`@asp/contracts`) and the
 * parties that speak them (the host `@asp/ths`, the provider SDK `@asp/sdk` and its test host,
 * the conformance kit `@asp/conformance`), the way vscode-languageserver-node layers
 * jsonrpc -> protocol -> client / server.
 *
 * - {@link METHODS} and {@link PROTOCOL_ERRORS}: the method names and every JSON-RPC error
 *   code, declared once; {@link RequestTypes} ties each method to its `@asp/contracts` params
 *   and result types,
 * - {@link ProviderConnection}: a provider child process (structured argv, no shell, explicit
 *   environment) and its LSP-framed JSON-RPC connection (vscode-jsonrpc), with a timeout on every
 *   call and a response-size bound judged on the framed `Content-Length` before parsing,
 * - {@link createStreamConnection}: the provider side of the same framing, over any pair of
 *   streams (stdio by default).
 *
 * @packageDocumentation
 */

export { PROTOCOL_VERSION } from "@asp/contracts";
export type { CallFailure, CallResult, ExitInfo, LaunchSpec, StreamFault } from "./connection.js";
export { ProviderConnection } from "./connection.js";
export type { Method, NotificationTypes, ParamsOf, ProtocolErrorCode, RequestTypes, ResultOf } from "./methods.js";
export { METHODS, PROTOCOL_ERRORS } from "./methods.js";
export type { CancellationToken, MessageConnection } from "./stream.js";
export { CancellationTokenSource, createStreamConnection, ResponseError } from "./stream.js";
