import { AspError, type AspErrorOptions } from "@asp/contracts";

/**
 * Every code `@asp/ths` throws. Stable public API: callers and tests switch on these, never on
 * message text. Provider failures are never thrown: they become typed degraded coverage.
 *
 * - `ASP_THS_BAD_CONFIG`: the trusted host configuration is unreadable or invalid (input).
 * - `ASP_THS_BAD_OPTIONS`: `composeHost` was given an option it does not know (`data.option`,
 *   `data.closest`), or options that are not an object (input).
 * - `ASP_THS_BAD_MANIFEST`: a trusted provider manifest is invalid: not absolute, not
 *   structured, a duplicate id (input).
 * - `ASP_THS_BAD_POLICY`: the trusted policy is unreadable or does not validate (input).
 * - `ASP_THS_BAD_REQUEST`: an evaluation was asked for with bad arguments (unknown call-site,
 *   missing repository directory) (input).
 * - `ASP_THS_CLOSED`: the host was used after `close()` (internal).
 * - `ASP_THS_RECEIPT_NOT_FOUND`: no receipt with that id in the store (input).
 * - `ASP_THS_UNKNOWN_PROVIDER`: `Host.resetQuarantine` was given a provider id the host does not
 *   run (`data.provider`, `data.known`) (input).
 * - `ASP_THS_BAD_RECEIPT`: a stored audit or apply receipt does not validate, so the dogfood report
 *   refuses rather than skip it (`asp receipts verify` says more) (input).
 * - `ASP_THS_BAD_LABELS`: a dogfood labelled set is not an object of `"tp"` / `"fp"` labels (input).
 * - `ASP_THS_BAD_BASELINE`: a dogfood baseline (parity, compatibility, release evidence) is not of
 *   its shape (input).
 * - `ASP_THS_DOGFOOD_BASELINE_MISSING`: a dogfood report was asked to name a reference engine
 *   without every baseline host §9 requires of such a report (`data.missing`, `data.nextStep`) (input).
 * - `ASP_THS_UNTRUSTED_LOCATION`: a trusted input (host configuration, policy, trust root,
 *   plugin folder, store, provider executable, argument or cwd) lies inside the repository
 *   being evaluated, after resolving symlinks (input).
 * - `ASP_THS_POLICY_REVISION_UNTRUSTED`: a base-revision policy (`policy: { git, path }`) names a
 *   revision the change under evaluation can write (`HEAD~1`, `@`, a local branch or tag,
 *   `FETCH_HEAD`, a short id …) instead of a full commit id or a `refs/remotes/…` ref of a
 *   protected branch (threat model invariant 14) (input).
 * - `ASP_THS_TRUSTED_BASE_MOVED`: a gate allow was about to move the repository's trusted base, but
 *   another host on the same store recorded one since this evaluation was bound (`data.repo`,
 *   `data.key`, `data.expected` and `data.actual` seqs): nothing was recorded and no decision is
 *   returned, so an allow decided on an older view never replaces a newer trusted base; run the
 *   gate again (internal).
 * - `ASP_THS_INTERNAL`: an invariant of the host itself broke, e.g. an envelope that does not
 *   validate against the verdict schema (internal; never returned as a decision).
 * - `ASP_THS_HOST_CHECKS_BAD_PATH`: a verifier asked the host's checks (`createHostChecks`) to lay a
 *   file at, or delete, an absolute, `..`, `.git`, `.asp` or non-normalized path, a path through a
 *   link / below a file of the base tree, or delete a folder; nothing is evaluated (input).
 * - `ASP_THS_HOST_CHECKS_BAD_FILES`: the host-checks request's `files` and `deleted` are not lists
 *   naming at most 10,000 distinct paths together, or a file names a blob the store does not hold;
 *   nothing is evaluated (input).
 * - `ASP_APPLY_UNKNOWN_PROPOSAL`: `Host.apply` was given a proposal id the store does not hold (input).
 * - `ASP_APPLY_CALL_SITE_REFUSED`: `Host.apply` (or `host/applyProposal`) was asked to validate at a
 *   call-site other than the gate: the requester never chooses how strictly it is judged (THREAT-MODEL
 *   invariant 15); nothing is evaluated or written (input).
 * - `ASP_APPLY_JOURNAL_DAMAGED`: the staged-apply journal of the repository cannot be recovered (not
 *   JSON, not this plugin's, unreadable): nothing is evaluated or applied until an operator runs the
 *   printed `asp edit discard-journal <dir>`; the failure is recorded in the log (integrity, exit 74).
 */
export type ThsErrorCode =
  | "ASP_THS_BAD_CONFIG"
  | "ASP_THS_BAD_OPTIONS"
  | "ASP_THS_BAD_MANIFEST"
  | "ASP_THS_BAD_POLICY"
  | "ASP_THS_BAD_REQUEST"
  | "ASP_THS_CLOSED"
  | "ASP_THS_RECEIPT_NOT_FOUND"
  | "ASP_THS_UNKNOWN_PROVIDER"
  | "ASP_THS_BAD_LABELS"
  | "ASP_THS_BAD_RECEIPT"
  | "ASP_THS_BAD_BASELINE"
  | "ASP_THS_DOGFOOD_BASELINE_MISSING"
  | "ASP_THS_UNTRUSTED_LOCATION"
  | "ASP_THS_POLICY_REVISION_UNTRUSTED"
  | "ASP_THS_TRUSTED_BASE_MOVED"
  | "ASP_THS_INTERNAL"
  | "ASP_THS_HOST_CHECKS_BAD_PATH"
  | "ASP_THS_HOST_CHECKS_BAD_FILES"
  | "ASP_APPLY_UNKNOWN_PROPOSAL"
  | "ASP_APPLY_CALL_SITE_REFUSED"
  | "ASP_APPLY_JOURNAL_DAMAGED";

/** Every {@link ThsErrorCode}, for table tests and documentation. */
export const THS_ERROR_CODES: readonly ThsErrorCode[] = [
  "ASP_THS_BAD_CONFIG",
  "ASP_THS_BAD_OPTIONS",
  "ASP_THS_BAD_MANIFEST",
  "ASP_THS_BAD_POLICY",
  "ASP_THS_BAD_REQUEST",
  "ASP_THS_CLOSED",
  "ASP_THS_RECEIPT_NOT_FOUND",
  "ASP_THS_UNKNOWN_PROVIDER",
  "ASP_THS_BAD_LABELS",
  "ASP_THS_BAD_RECEIPT",
  "ASP_THS_BAD_BASELINE",
  "ASP_THS_DOGFOOD_BASELINE_MISSING",
  "ASP_THS_UNTRUSTED_LOCATION",
  "ASP_THS_POLICY_REVISION_UNTRUSTED",
  "ASP_THS_TRUSTED_BASE_MOVED",
  "ASP_THS_INTERNAL",
  "ASP_THS_HOST_CHECKS_BAD_PATH",
  "ASP_THS_HOST_CHECKS_BAD_FILES",
  "ASP_APPLY_UNKNOWN_PROPOSAL",
  "ASP_APPLY_CALL_SITE_REFUSED",
  "ASP_APPLY_JOURNAL_DAMAGED",
];

/**
 * Why a mediated apply (host §6) was refused: recorded in the proposal and the apply receipt,
 * never thrown. Stable public API: callers and tests switch on these, never on the detail text.
 *
 * Plan validation (the provider's `edit/propose` answer):
 * - `ASP_APPLY_NOT_A_PLAN`: not a structured EditPlan (schema), or one for another provider.
 * - `ASP_APPLY_SHELL_COMMAND`: a shell command (`command` string, `{op:"shell"|"exec"|"run"}`, `shell`).
 * - `ASP_APPLY_SCRIPT`: an arbitrary script (`script`, `{op:"script"}`).
 * - `ASP_APPLY_COMMAND_ARRAY`: a command array (`argv`, `commands`, a `command` array).
 * - `ASP_APPLY_PATCH_SHELLOUT`: a patch or diff to hand to a tool (`patch`, `diff`, `{op:"patch"}`).
 * - `ASP_APPLY_MISSING_PRECONDITION`: an operation's path has no precondition.
 * - `ASP_APPLY_MISSING_BLOB`: a precondition names a blob that is not in the baseline.
 * - `ASP_APPLY_UNSUPPORTED_OPERATION`: an operation outside the closed EditPlan vocabulary.
 * - `ASP_APPLY_STALE`: `validAsOf` does not echo the request (changeset, exact read set).
 * - `ASP_APPLY_BASELINE_MISMATCH`: `validAsOf.baseline` is not the baseline the host gave.
 * - `ASP_APPLY_PATH_DRIFT`: a precondition's path holds another blob (or none) in the baseline.
 * - `ASP_APPLY_HOST_OWNED_FIELD`: a host-owned decision field (`decision`, `verdict`, `applied`, ...).
 * - `ASP_APPLY_CLAIMED_GUARANTEE`: the provider claims a transaction guarantee or assurance.
 * - `ASP_APPLY_PATH_ESCAPE`: a path is absolute, has `..`, is under `.git/` or `.asp/`, or goes
 *   through a symbolic link in the baseline tree or the real worktree.
 * - `ASP_APPLY_BINARY_EDIT`: a text operation on a blob that is not UTF-8 text.
 * - `ASP_APPLY_OPERATION_FAILED`: an operation does not apply to the baseline (text not found, ...).
 * - `ASP_APPLY_PROVIDER_FAILED`: no usable answer (crash, timeout, error, no edit provider).
 *
 * Apply:
 * - `ASP_APPLY_DENIED` / `ASP_APPLY_INDETERMINATE`: the required checks over the hypothetical
 *   after-state did not allow it (nothing written).
 * - `ASP_APPLY_BASELINE_MOVED`: the worktree moved under a touched path, the change could not be
 *   merged, and re-proposals within `budgets.editRetries` did not succeed.
 * - `ASP_APPLY_CONFLICT`: another proposal touching the same blobs was applied first and the
 *   re-proposal was refused.
 * - `ASP_APPLY_ALREADY_APPLIED`: the proposal was applied before (a proposal applies at most once).
 * - `ASP_APPLY_WRITE_FAILED`: publishing the after-state failed (what was already written was restored).
 * - `ASP_APPLY_INTERRUPTED`: the host stopped (a crash, a kill) while publishing; recovery from the
 *   staging journal left the worktree at the baseline before, recorded on the next start.
 * - `ASP_APPLY_DISK_DRIFT`: a touched path's real state on disk (lstat'ed, never followed) is not its
 *   precondition, e.g. an ignored `.env` the judged tree does not show: nothing (more) is written.
 */
export type ApplyRejectionCode =
  | "ASP_APPLY_NOT_A_PLAN"
  | "ASP_APPLY_SHELL_COMMAND"
  | "ASP_APPLY_SCRIPT"
  | "ASP_APPLY_COMMAND_ARRAY"
  | "ASP_APPLY_PATCH_SHELLOUT"
  | "ASP_APPLY_MISSING_PRECONDITION"
  | "ASP_APPLY_MISSING_BLOB"
  | "ASP_APPLY_UNSUPPORTED_OPERATION"
  | "ASP_APPLY_STALE"
  | "ASP_APPLY_BASELINE_MISMATCH"
  | "ASP_APPLY_PATH_DRIFT"
  | "ASP_APPLY_HOST_OWNED_FIELD"
  | "ASP_APPLY_CLAIMED_GUARANTEE"
  | "ASP_APPLY_PATH_ESCAPE"
  | "ASP_APPLY_BINARY_EDIT"
  | "ASP_APPLY_OPERATION_FAILED"
  | "ASP_APPLY_PROVIDER_FAILED"
  | "ASP_APPLY_DENIED"
  | "ASP_APPLY_INDETERMINATE"
  | "ASP_APPLY_BASELINE_MOVED"
  | "ASP_APPLY_CONFLICT"
  | "ASP_APPLY_ALREADY_APPLIED"
  | "ASP_APPLY_WRITE_FAILED"
  | "ASP_APPLY_INTERRUPTED"
  | "ASP_APPLY_DISK_DRIFT";

/** Every {@link ApplyRejectionCode}, for table tests and documentation. */
export const APPLY_REJECTION_CODES: readonly ApplyRejectionCode[] = [
  "ASP_APPLY_NOT_A_PLAN",
  "ASP_APPLY_SHELL_COMMAND",
  "ASP_APPLY_SCRIPT",
  "ASP_APPLY_COMMAND_ARRAY",
  "ASP_APPLY_PATCH_SHELLOUT",
  "ASP_APPLY_MISSING_PRECONDITION",
  "ASP_APPLY_MISSING_BLOB",
  "ASP_APPLY_UNSUPPORTED_OPERATION",
  "ASP_APPLY_STALE",
  "ASP_APPLY_BASELINE_MISMATCH",
  "ASP_APPLY_PATH_DRIFT",
  "ASP_APPLY_HOST_OWNED_FIELD",
  "ASP_APPLY_CLAIMED_GUARANTEE",
  "ASP_APPLY_PATH_ESCAPE",
  "ASP_APPLY_BINARY_EDIT",
  "ASP_APPLY_OPERATION_FAILED",
  "ASP_APPLY_PROVIDER_FAILED",
  "ASP_APPLY_DENIED",
  "ASP_APPLY_INDETERMINATE",
  "ASP_APPLY_BASELINE_MOVED",
  "ASP_APPLY_CONFLICT",
  "ASP_APPLY_ALREADY_APPLIED",
  "ASP_APPLY_WRITE_FAILED",
  "ASP_APPLY_INTERRUPTED",
  "ASP_APPLY_DISK_DRIFT",
];

/** Thrown by `@asp/ths`. */
export class ThsError extends AspError<ThsErrorCode> {
  constructor(code: ThsErrorCode, message: string, options: AspErrorOptions = {}) {
    super(code, message, {
      ...options,
      category:
        options.category ??
        (code === "ASP_THS_CLOSED" || code === "ASP_THS_INTERNAL" || code === "ASP_THS_TRUSTED_BASE_MOVED"
          ? "internal"
          : "input"),
    });
  }
}
