import type { Readable, Writable } from "node:stream";
import { validate } from "@asp/contracts";
import { createStreamConnection, METHODS, type MessageConnection, PROTOCOL_ERRORS, ResponseError } from "@asp/protocol";
import type { Host } from "./host.js";

/** What {@link serveHost} needs of a host: status, capabilities and (when served) apply. */
export type ServedHost = Pick<Host, "status" | "capabilities"> & Partial<Pick<Host, "apply">>;

/** Options of {@link serveHost}. */
export interface ServeHostOptions {
  /**
   * The repository `host/applyProposal` applies to. Fixed by whoever serves the host (trusted
   * configuration), never chosen by the client. Without it, `host/applyProposal` is not served.
   */
  readonly repo?: string;
  /** The repository-relative path of its candidate policy file (host §7), passed to every apply. */
  readonly candidatePolicyPath?: string | readonly string[];
}

/**
 * Answer a client's JSON-RPC requests (DESIGN §5, client -> host), e.g. on a socket or a child's
 * stdio: `host/status`, `host/capabilities` and, with `options.repo` and a host that applies,
 * `host/applyProposal`. Apply happens only on that explicit request (host §6): a
 * `host/applyProposal` notification, or anything a provider sends, is never an apply intent.
 * Dispose the returned connection to stop.
 */
export function serveHost(
  host: ServedHost,
  input: Readable,
  output: Writable,
  options: ServeHostOptions = {},
): MessageConnection {
  const connection = createStreamConnection(input, output);
  connection.onRequest(METHODS.hostStatus, () => host.status());
  connection.onRequest(METHODS.hostCapabilities, () => host.capabilities());
  const { repo, candidatePolicyPath } = options;
  const apply = host.apply?.bind(host);
  if (repo !== undefined && apply !== undefined) {
    // Requests on one connection are applied one after the other, in the order they arrived.
    let queue: Promise<unknown> = Promise.resolve();
    connection.onRequest(METHODS.applyProposal, (params: unknown) => {
      const valid = validate("protocol-apply-proposal-params", params);
      if (!valid.ok) {
        const e = valid.errors[0];
        throw new ResponseError(
          PROTOCOL_ERRORS.invalidParams,
          `invalid host/applyProposal params: ${e?.pointer || "/"} ${e?.message ?? ""}`,
        );
      }
      const { proposalId, callSite } = valid.value;
      const run = queue.then(() =>
        apply({
          repo,
          proposalId,
          ...(callSite === undefined ? {} : { callSite }),
          ...(candidatePolicyPath === undefined ? {} : { candidatePolicyPath }),
        }),
      );
      queue = run.catch(() => undefined);
      return run.catch((error: unknown) => {
        const code = (error as { code?: unknown }).code;
        throw new ResponseError(PROTOCOL_ERRORS.internalError, (error as Error).message, {
          code: typeof code === "string" ? code : "ASP_THS_INTERNAL",
        });
      });
    });
  }
  connection.listen();
  return connection;
}
