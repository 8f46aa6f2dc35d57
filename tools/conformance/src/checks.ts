/** The protocol suite, in the order it runs. Ids are stable public API (reports and tests name them). */
export const CHECKS = Object.freeze([
  { id: "transport", title: "speaks JSON-RPC with Content-Length framing on stdout, nothing else" },
  { id: "initialize", title: "answers initialize with a schema-valid result in time" },
  { id: "protocol-version", title: "speaks a protocol version compatible with the host's" },
  { id: "assess-deadline", title: "answers check/assess within its deadline and stays alive" },
  { id: "assess-shape", title: "answers check/assess with a schema-valid Assessment for its own request" },
  { id: "host-owned-fields", title: "returns no host-owned field (decision, verdict, grant, assurance ...)" },
  { id: "declared-sources", title: "reports only diagnostic sources it declared at initialize" },
  { id: "valid-as-of", title: "echoes baseline, changeset and exactly the blobs it read in validAsOf" },
  { id: "callback-reads", title: "reads changed content through host/readBlob with its own requestId" },
  { id: "reads-in-baseline", title: "reads only objects of the request's baseline and changeset" },
  { id: "callback-budget", title: "stays within the per-request callback budget" },
  { id: "response-size", title: "keeps its response within the size bound" },
  { id: "assess-status", title: "completes the synthetic assessment (status complete)" },
  { id: "cancellation", title: "answers a cancelled request within the bound" },
  { id: "unknown-method", title: "answers an unknown method with an error and keeps serving" },
  { id: "shutdown", title: "shuts down cleanly: shutdown answered, exit honoured, exit code 0" },
] as const);

/** One check id of the suite. */
export type CheckId = (typeof CHECKS)[number]["id"];

/** Version of the suite; part of the conformance digest, bumped when a check changes meaning. */
export const SUITE_VERSION = "asp.conformance/1";
