import type { Readable, Writable } from "node:stream";
import { createStreamConnection, METHODS, type MessageConnection } from "@asp/protocol";
import type { Host } from "./host.js";

/**
 * Answer `host/status` and `host/capabilities` for a client over JSON-RPC (DESIGN §5, client ->
 * host), e.g. on a socket or a child's stdio. Dispose the returned connection to stop.
 */
export function serveHost(
  host: Pick<Host, "status" | "capabilities">,
  input: Readable,
  output: Writable,
): MessageConnection {
  const connection = createStreamConnection(input, output);
  connection.onRequest(METHODS.hostStatus, () => host.status());
  connection.onRequest(METHODS.hostCapabilities, () => host.capabilities());
  connection.listen();
  return connection;
}
