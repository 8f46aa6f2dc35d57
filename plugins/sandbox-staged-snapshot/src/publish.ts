// Publishing a committed journal: the one roll-forward path, run by stage after its commit point
// and by recover after a crash. Every step is idempotent: it looks at the disk and does only what
// is left, so a crash anywhere (including during recovery) can run it again.
import { mkdirSync, renameSync, rmdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { StagedError } from "./errors.js";
import { fsyncDir, lstatOrNull, unlinkIfPresent } from "./fsx.js";
import type { Journal } from "./journal.js";
import { assertNoSymlinkParent } from "./paths.js";

/** Called after each named step; only fault injection listens (see `StagedSnapshotOptions.faultHook`). */
export type StepReporter = (name: string) => void;

/** Every existing folder from `root` down to the parent of `path`. */
function foldersOn(root: string, path: string): string[] {
  const out = [root];
  const parts = path.split("/").slice(0, -1);
  let dir = root;
  for (const p of parts) {
    dir = join(dir, p);
    if (lstatOrNull(dir)?.isDirectory() !== true) break;
    out.push(dir);
  }
  return out;
}

/** Create the missing folders on the way to `path` (the parents were checked: no symlink). */
function makeParents(root: string, path: string): void {
  let dir = root;
  for (const p of path.split("/").slice(0, -1)) {
    dir = join(dir, p);
    const st = lstatOrNull(dir);
    if (st === null) mkdirSync(dir);
    else if (!st.isDirectory()) {
      throw new StagedError("ASP_STAGED_PATH_CONFLICT", `${path}: a parent is not a folder`, { data: { path } });
    }
  }
}

/** Remove the folders a delete left empty, up to (never including) the root. */
function pruneEmpty(root: string, path: string): void {
  let dir = dirname(join(root, path));
  while (dir !== root && dir.startsWith(`${root}/`)) {
    try {
      rmdirSync(dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") {
        dir = dirname(dir);
        continue;
      }
      if (code === "ENOTEMPTY" || code === "EEXIST" || code === "ENOTDIR") return;
      throw error;
    }
    dir = dirname(dir);
  }
}

/**
 * Publish a committed journal into its root: deletes (rename away into staging, remove), prune
 * the folders they emptied, writes (rename each staged copy onto its path, parents created),
 * then fsync every folder on the way so the renames are durable before the journal says `done`.
 *
 * @throws StagedError `ASP_STAGED_PATH_ESCAPE` when a parent became a symlink since the plan was
 *   checked, `ASP_STAGED_JOURNAL_INVALID` when a write is neither staged nor published (the disk
 *   does not match the journal), `ASP_STAGED_PATH_CONFLICT`; I/O errors propagate.
 */
export function publishJournal(journal: Journal, report: StepReporter): void {
  const { root, staging } = journal;
  const deleted: string[] = [];
  for (const step of journal.steps) {
    if (step.op !== "delete") continue;
    assertNoSymlinkParent(root, step.path.split("/"));
    const target = join(root, step.path);
    const away = join(staging, step.away);
    // A folder there now means this delete already ran and a later write made the folder.
    const st = lstatOrNull(target);
    if (st !== null && !st.isDirectory()) renameSync(target, away);
    unlinkIfPresent(away);
    deleted.push(step.path);
    report(`publish:${step.n}`);
  }
  for (const path of deleted) pruneEmpty(root, path);
  for (const step of journal.steps) {
    if (step.op !== "write") continue;
    assertNoSymlinkParent(root, step.path.split("/"));
    const staged = join(staging, step.staged);
    if (lstatOrNull(staged) !== null) {
      makeParents(root, step.path);
      renameSync(staged, join(root, step.path));
    } else if (lstatOrNull(join(root, step.path)) === null) {
      throw new StagedError("ASP_STAGED_JOURNAL_INVALID", `${step.path} is neither staged nor published`, {
        data: { path: step.path },
      });
    }
    report(`publish:${step.n}`);
  }
  const folders = new Set<string>();
  for (const step of journal.steps) for (const f of foldersOn(root, step.path)) folders.add(f);
  for (const sub of ["new", "old"]) if (lstatOrNull(join(staging, sub)) !== null) folders.add(join(staging, sub));
  for (const f of [...folders].sort().reverse()) fsyncDir(f);
  report("publish:synced");
}
