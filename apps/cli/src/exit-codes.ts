/**
 * The `asp` exit-code convention. Scripts and CI read these; they never change meaning.
 *
 * | code | name | meaning |
 * |---|---|---|
 * | 0 | `ok` / `allow` | allow, or the command succeeded |
 * | 1 | `deny` | the decision is deny (`gate`, `check`, `sweep`); also a refused plugin (`plugin verify`), a failed conformance run, a self-authorizing candidate (`policy diff`) |
 * | 2 | `indeterminate` | the decision is indeterminate: required coverage is missing or degraded |
 * | 3 | `verificationFailed` | `receipts verify` found a broken hash chain or a receipt that does not match its envelope: the audit trail itself is in doubt, which is not a decision about any change |
 * | 64 | `usage` | bad usage or input (EX_USAGE): unknown option, invalid policy or configuration, no host configuration, trusted configuration inside the repository |
 * | 70 | `internal` | internal error (EX_SOFTWARE) |
 */
export const EXIT = Object.freeze({
  ok: 0,
  allow: 0,
  deny: 1,
  indeterminate: 2,
  verificationFailed: 3,
  usage: 64,
  internal: 70,
} as const);

/** One of the {@link EXIT} codes. */
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The exit codes as `asp --help` prints them. */
export const EXIT_HELP = [
  "Exit codes:",
  "  0   allow / ok",
  "  1   deny (gate, check, sweep); plugin refused; conformance failed; policy diff self-authorizes",
  "  2   indeterminate: required coverage missing or degraded",
  "  3   verification failed: receipts verify found a broken chain or receipt",
  "  64  bad usage or input (no host configuration, trusted configuration inside the repository, invalid file)",
  "  70  internal error",
].join("\n");
