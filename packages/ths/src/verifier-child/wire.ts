/** The verifier wire (ADR 0011), shared by the host (`launchVerifier`) and its child entry. */

/** The method names of the verifier wire, declared once for the child and the host. */
export const VERIFIER_METHODS = Object.freeze({
  describe: "verifier/describe",
  init: "verifier/init",
  verify: "verifier/verify",
  contentRead: "host/content.read",
  checksEvaluate: "host/checks.evaluate",
  httpPost: "host/http.post",
  shutdown: "shutdown",
  exit: "exit",
} as const);

/** The JSON-RPC error code of a plugin's own failure (its `init` or `verify` threw). */
export const VERIFIER_FAILED = -32050;
