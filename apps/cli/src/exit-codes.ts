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
 * | 74 | `storeDamaged` | the evidence store is damaged or could not be written (EX_IOERR): `ASP_EVIDENCE_STORE_CORRUPT` (its log does not reach the anchored head, a file is damaged or missing), `ASP_EVIDENCE_CHAIN_BROKEN`, `ASP_EVIDENCE_INTEGRITY`, `ASP_EVIDENCE_WRITE_FAILED` (disk full); nothing was decided or appended; `store check` found fatal damage; `ASP_APPLY_JOURNAL_DAMAGED` (the staged-apply journal cannot be recovered: recorded, nothing decided; `asp edit discard-journal DIR` as printed). See docs/store.md |
 * | 75 | `storeBusy` | another process held the evidence store for longer than `--wait` (EX_TEMPFAIL, `ASP_EVIDENCE_STORE_LOCKED`, naming its pid), or a PostgreSQL store could not be reached (`ASP_PGSTORE_UNAVAILABLE`), or another host moved the repository's trusted base while this gate ran (`ASP_THS_TRUSTED_BASE_MOVED`: nothing recorded): try again |
 */
export const EXIT = Object.freeze({
  ok: 0,
  allow: 0,
  deny: 1,
  indeterminate: 2,
  verificationFailed: 3,
  usage: 64,
  internal: 70,
  storeDamaged: 74,
  storeBusy: 75,
} as const);

/** Error codes with an exit code of their own (every other error: 64 for input, 70 otherwise). */
export const EXIT_OF_CODE: Readonly<Record<string, ExitCode>> = Object.freeze({
  ASP_EVIDENCE_STORE_CORRUPT: EXIT.storeDamaged,
  ASP_EVIDENCE_CHAIN_BROKEN: EXIT.storeDamaged,
  ASP_EVIDENCE_INTEGRITY: EXIT.storeDamaged,
  ASP_EVIDENCE_WRITE_FAILED: EXIT.storeDamaged,
  // The store's staged-apply journal folder (`<store>.journal`) cannot be recovered (issue 32 hole 12).
  ASP_APPLY_JOURNAL_DAMAGED: EXIT.storeDamaged,
  ASP_EVIDENCE_STORE_LOCKED: EXIT.storeBusy,
  ASP_PGSTORE_UNAVAILABLE: EXIT.storeBusy,
  // Another host on a shared store recorded a gate allow while this one ran: nothing was
  // recorded and no decision returned; the same gate run again decides against the new base.
  ASP_THS_TRUSTED_BASE_MOVED: EXIT.storeBusy,
});

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
  "  74  the evidence store is damaged or could not be written: nothing was decided (asp store check)",
  "  75  try again: the evidence store was held by another process for longer than --wait, its database was unreachable, or another host moved the trusted base during the gate",
].join("\n");
