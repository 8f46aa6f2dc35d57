import { AspError } from "@asp/contracts";

/**
 * Every code `@asp/sandbox-staged-snapshot` raises. Stable public API: switch on these, never on text.
 *
 * - `ASP_STAGED_BAD_REQUEST`: the request is not the documented shape (root not an absolute
 *   folder, `journalDir` not absolute or inside the worktree, a path given twice, a delete with a mode, content that is not bytes ...). Nothing written.
 * - `ASP_STAGED_PATH_ESCAPE`: a path would land outside the root: absolute, `..`, a `.git`
 *   segment, or through a symlink on disk. Nothing written.
 * - `ASP_STAGED_PATH_CONFLICT`: the worktree does not have the shape the writes assume (a write
 *   onto a folder, a parent that is a file, a delete of a path that is not a file). Nothing written.
 * - `ASP_STAGED_CROSS_DEVICE`: the staging folder or a target folder is on another filesystem
 *   than the root, so a rename could not be atomic. Nothing written.
 * - `ASP_STAGED_PENDING_JOURNAL`: the journal folder already holds an interrupted apply: run
 *   `recover` first. Nothing written.
 * - `ASP_STAGED_PRECONDITION_FAILED`: a write's `before` (what the host judged the path to hold) is
 *   not what the disk holds, when the plan is made or right before the commit point. Nothing published.
 * - `ASP_STAGED_JOURNAL_INVALID`: a journal is not one this plugin wrote for this root (bad
 *   shape, another root, a staging folder or path it would never name). Recovery does nothing.
 */
export type StagedErrorCode =
  | "ASP_STAGED_BAD_REQUEST"
  | "ASP_STAGED_PATH_ESCAPE"
  | "ASP_STAGED_PATH_CONFLICT"
  | "ASP_STAGED_CROSS_DEVICE"
  | "ASP_STAGED_PENDING_JOURNAL"
  | "ASP_STAGED_PRECONDITION_FAILED"
  | "ASP_STAGED_JOURNAL_INVALID";

/** Thrown by `@asp/sandbox-staged-snapshot`; the data names paths, never file content. */
export class StagedError extends AspError<StagedErrorCode> {}
