/**
 * `@asp/sandbox-staged-snapshot`: a sandbox plugin that publishes an apply through a staged copy
 * on the worktree's filesystem, a journal and per-file atomic renames, so a crash at any instant
 * leaves the worktree at B or B' once `recover` has run (`staged_snapshot`).
 *
 * The plugin entry is `dist/main.js`; this module is the logic, for tests and reuse.
 *
 * @packageDocumentation
 */

export type { StagedErrorCode } from "./errors.js";
export { StagedError } from "./errors.js";
export type { Journal, JournalState, JournalStep } from "./journal.js";
export { checkJournal, JOURNAL_FILE, JOURNAL_FORMAT, stagingFor } from "./journal.js";
export { PLUGIN_ID, stagedSnapshotPlugin } from "./plugin.js";
export type { StagedSnapshotOptions, StagedSnapshotSandbox, StagedStep } from "./sandbox.js";
export { createStagedSnapshot } from "./sandbox.js";
