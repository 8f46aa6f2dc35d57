// recover(): finish or undo the apply a crash interrupted, from its journal. Every path through
// here is idempotent, so a crash during recovery is recovered by the next recovery.
import { dirname } from "node:path";
import type { RecoverRequest, RecoverResult } from "@asp/contracts";
import { StagedError } from "./errors.js";
import { fsyncDir, lstatOrNull, removeTree } from "./fsx.js";
import { readJournal, removeJournal, removeJournalTemps, writeJournal } from "./journal.js";
import { realRoot } from "./paths.js";
import { publishJournal, type StepReporter } from "./publish.js";

/** Remove a staging folder and make its removal durable. */
function dropStaging(staging: string): void {
  removeTree(staging);
  if (lstatOrNull(dirname(staging)) !== null) fsyncDir(dirname(staging));
}

/**
 * Recover the root from the journal in `journalDir`: none there -> `none` (stray journal drafts
 * removed); `prepared` (before the commit point) -> remove the staging folder, `rolled_back`, the
 * worktree at B; `committed` -> finish the remaining renames, `rolled_forward`, the worktree at
 * B'; `done` -> clean up, `rolled_forward`.
 *
 * @throws StagedError `ASP_STAGED_BAD_REQUEST` (root or journal folder not absolute folders),
 *   `ASP_STAGED_JOURNAL_INVALID` (a journal this plugin did not write for this root: nothing is
 *   touched), `ASP_STAGED_PATH_ESCAPE` (a parent became a symlink); I/O errors propagate and a
 *   later recover() resumes.
 */
export function recoverRequest(request: RecoverRequest, report: StepReporter): RecoverResult {
  const { root } = realRoot(request.root);
  const dir = request.journalDir;
  if (typeof dir !== "string" || !dir.startsWith("/")) {
    throw new StagedError("ASP_STAGED_BAD_REQUEST", "journalDir must be an absolute path");
  }
  const st = lstatOrNull(dir);
  if (st === null) return { outcome: "none" };
  if (!st.isDirectory()) throw new StagedError("ASP_STAGED_BAD_REQUEST", `${dir} is not a folder`, { data: { dir } });
  const journal = readJournal(dir, root);
  if (journal === null) {
    removeJournalTemps(dir);
    return { outcome: "none" };
  }
  if (journal.state === "prepared") {
    dropStaging(journal.staging);
    report("recover:cleanup");
    removeJournal(dir);
    report("recover:journal:removed");
    return { outcome: "rolled_back", detail: `apply ${journal.id} was interrupted before its commit point` };
  }
  if (journal.state === "committed") {
    publishJournal(journal, (name) => report(`recover:${name}`));
    writeJournal(dir, { ...journal, state: "done" }, false);
    report("recover:journal:done");
  }
  dropStaging(journal.staging);
  report("recover:cleanup");
  removeJournal(dir);
  report("recover:journal:removed");
  return { outcome: "rolled_forward", detail: `apply ${journal.id} was past its commit point: published` };
}
