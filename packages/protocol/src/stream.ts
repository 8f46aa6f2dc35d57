import {
  CancellationTokenSource,
  createMessageConnection,
  type MessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
} from "vscode-jsonrpc/node";

export type { MessageConnection };

/**
 * What a request handler is given to learn of `$/cancelRequest`: the part of vscode-jsonrpc's
 * `CancellationToken` a handler uses (the token a handler receives is one).
 */
export interface CancellationToken {
  readonly isCancellationRequested: boolean;
  onCancellationRequested(listener: () => void): { dispose(): void };
}
export { CancellationTokenSource, ResponseError };

/**
 * An LSP-framed JSON-RPC connection over a pair of streams: the provider side of the protocol
 * (a provider reads its stdin and writes its stdout). Not yet listening: register handlers,
 * then call `listen()`.
 *
 * @example
 * ```ts
 * const connection = createStreamConnection(process.stdin, process.stdout);
 * connection.onRequest(METHODS.shutdown, () => null);
 * connection.listen();
 * ```
 */
export function createStreamConnection(input: NodeJS.ReadableStream, output: NodeJS.WritableStream): MessageConnection {
  return createMessageConnection(new StreamMessageReader(input), new StreamMessageWriter(output));
}
