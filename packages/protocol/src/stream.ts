import {
  type CancellationToken,
  CancellationTokenSource,
  createMessageConnection,
  type MessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
} from "vscode-jsonrpc/node";

export type { CancellationToken, MessageConnection };
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
