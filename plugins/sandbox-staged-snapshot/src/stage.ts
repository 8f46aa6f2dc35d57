// stage(): check, journal the intent, stage every after-state file durably, commit (the journal
// says `committed`), publish with per-file renames, mark done, clean up.
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import type { AbortSignalLike, StageRequest, StageResult } from "@asp/contracts";
import { StagedError } from "./errors.js";
import { fsyncDir, lstatOrNull, removeTree, writeFileDurable } from "./fsx.js";
import {
  hasJournal,
  JOURNAL_FILE,
  JOURNAL_FORMAT,
  type Journal,
  type JournalStep,
  removeJournal,
  stagingFor,
  writeJournal,
} from "./journal.js";
import { assertExpected, type Plan, planStage } from "./paths.js";
import { publishJournal, type StepReporter } from "./publish.js";

class Aborted extends Error {}

function throwIfAborted(signal: AbortSignalLike | undefined): void {
  if (signal?.aborted === true) throw new Aborted("aborted before the commit point");
}

/** The journal steps of a plan: deletes first (a delete may free a path a write needs), then writes. */
export function stepsOf(plan: Plan): JournalStep[] {
  const steps: JournalStep[] = [];
  for (const path of plan.deletes) steps.push({ n: steps.length + 1, op: "delete", path, away: `old/${steps.length}` });
  for (const w of plan.writes)
    steps.push({ n: steps.length + 1, op: "write", path: w.path, staged: `new/${steps.length}` });
  return steps;
}

/** Create the staging base folder and check it shares the root's filesystem. */
function prepareStagingBase(staging: string, dev: number): void {
  const base = dirname(staging);
  mkdirSync(base, { recursive: true, mode: 0o700 });
  const st = lstatOrNull(base);
  if (st === null || st.isSymbolicLink() || !st.isDirectory()) {
    throw new StagedError("ASP_STAGED_BAD_REQUEST", `staging folder ${base} is not a folder`, { data: { base } });
  }
  if (st.dev !== dev) {
    throw new StagedError("ASP_STAGED_CROSS_DEVICE", `staging folder ${base} is on another filesystem than the root`, {
      data: { base },
    });
  }
}

/** Write every staged copy durably (before the commit point: the worktree is untouched). */
function writeStaged(plan: Plan, journal: Journal, report: StepReporter, signal: AbortSignalLike | undefined): void {
  mkdirSync(journal.staging, { mode: 0o700 });
  mkdirSync(join(journal.staging, "new"));
  mkdirSync(join(journal.staging, "old"));
  const byPath = new Map(plan.writes.map((w) => [w.path, w]));
  for (const step of journal.steps) {
    if (step.op !== "write") continue;
    throwIfAborted(signal);
    const w = byPath.get(step.path);
    if (w === undefined) throw new Error(`internal: no write for ${step.path}`);
    writeFileDurable(join(journal.staging, step.staged), w.content, w.mode);
    report(`stage:${step.n}`);
  }
  fsyncDir(join(journal.staging, "new"));
  fsyncDir(journal.staging);
  fsyncDir(dirname(journal.staging));
  report("stage:synced");
  throwIfAborted(signal);
}

/** Finish after publishing: mark done, remove the staging folder, remove the journal. */
function finish(journal: Journal, journalDir: string | undefined, report: StepReporter): void {
  if (journalDir !== undefined) {
    writeJournal(journalDir, { ...journal, state: "done" }, false);
    report("journal:done");
  }
  removeTree(journal.staging);
  fsyncDir(dirname(journal.staging));
  report("cleanup");
  if (journalDir !== undefined) {
    removeJournal(journalDir);
    report("journal:removed");
  }
}

const reason = (error: unknown): string =>
  `${(error as { code?: unknown }).code ?? "ERROR"}: ${(error as Error).message ?? String(error)}`.slice(0, 500);

/**
 * Apply `request` through a staged copy (see the package README for the protocol and journal).
 * A request that cannot be applied as asked is refused before anything is written; a failure
 * before the commit point rolls back (`applied: false`, the worktree provably at B); after it,
 * publishing continues, and what it cannot finish stays journalled for {@link recoverStaged}.
 *
 * @throws StagedError `ASP_STAGED_BAD_REQUEST`, `ASP_STAGED_PATH_ESCAPE`, `ASP_STAGED_PATH_CONFLICT`,
 *   `ASP_STAGED_CROSS_DEVICE`, `ASP_STAGED_PENDING_JOURNAL`, `ASP_STAGED_PRECONDITION_FAILED` (a
 *   write's `before` is not what the disk holds, when planned or right before the commit point):
 *   refused, nothing written.
 */
export function stageRequest(request: StageRequest, report: StepReporter): StageResult {
  const plan = planStage(request);
  const { journalDir, signal } = request;
  // Without a journal a crash during publishing cannot be finished: claim no more than that.
  const guarantee = journalDir === undefined ? "rollback_attempted" : "staged_snapshot";
  if (plan.writes.length + plan.deletes.length === 0) return { applied: true, guarantee, detail: "nothing to write" };
  if (journalDir !== undefined) {
    assertOutsideTree(plan.root, journalDir);
    mkdirSync(journalDir, { recursive: true, mode: 0o700 });
    assertOutsideTree(plan.root, realpathSync(journalDir));
    if (hasJournal(journalDir)) throw pending(journalDir);
  }
  if (signal?.aborted === true) return { applied: false, guarantee, detail: "aborted before staging began" };
  const id = randomBytes(16).toString("hex");
  const staging = stagingFor(plan.root, id);
  prepareStagingBase(staging, plan.dev);
  const journal: Journal = {
    format: JOURNAL_FORMAT,
    id,
    root: plan.root,
    staging,
    state: "prepared",
    steps: stepsOf(plan),
  };

  // Before the commit point: any failure removes the staging folder and the journal.
  try {
    if (journalDir !== undefined) {
      writeJournal(journalDir, journal, true);
      report("journal:prepared");
    }
    writeStaged(plan, journal, report, signal);
    // Staging took time: the disk is checked against the request once more, last thing before the
    // commit point (issue 32 hole 5), so a file that appeared meanwhile is never replaced.
    assertExpected(plan);
  } catch (error) {
    if (error instanceof StagedError && error.code === "ASP_STAGED_PENDING_JOURNAL") throw error;
    rollBack(journal, journalDir);
    if (error instanceof StagedError && error.code === "ASP_STAGED_PRECONDITION_FAILED") throw error;
    return {
      applied: false,
      guarantee: "staged_snapshot",
      detail: `rolled back before the commit point: ${reason(error)}`,
    };
  }

  const committed: Journal = { ...journal, state: "committed" };
  if (journalDir !== undefined) {
    try {
      writeJournal(journalDir, committed, false);
    } catch (error) {
      // The rename is the commit point: if the journal still says prepared, roll back.
      if (!journalSays(journalDir, "committed")) {
        rollBack(journal, journalDir);
        return {
          applied: false,
          guarantee: "staged_snapshot",
          detail: `rolled back at the commit point: ${reason(error)}`,
        };
      }
    }
    report("journal:committed");
  }

  try {
    publishJournal(committed, report);
  } catch (error) {
    // Past the commit point the worktree is between B and B': say so. The journal stays, and
    // recover() finishes the remaining renames.
    return {
      applied: false,
      guarantee: "none",
      detail: `publishing failed after the commit point (${reason(error)}); recover() finishes it from the journal`,
    };
  }
  try {
    finish(committed, journalDir, report);
  } catch (error) {
    return { applied: true, guarantee, detail: `published; cleanup failed (${reason(error)}), recover() finishes it` };
  }
  return journalDir === undefined
    ? { applied: true, guarantee, detail: "no journal folder: a crash while publishing could not be recovered" }
    : { applied: true, guarantee };
}

/** The journal must not be part of the tree it describes (the host's snapshot would see it). */
function assertOutsideTree(root: string, journalDir: string): void {
  if (typeof journalDir !== "string" || !isAbsolute(journalDir)) {
    throw new StagedError("ASP_STAGED_BAD_REQUEST", "journalDir must be an absolute path");
  }
  const dir = resolve(journalDir);
  if (dir === root || (dir.startsWith(`${root}/`) && !dir.startsWith(`${root}/.git/`))) {
    throw new StagedError("ASP_STAGED_BAD_REQUEST", `journalDir ${dir} is inside the worktree`, {
      data: { journalDir },
    });
  }
}

function pending(journalDir: string): StagedError {
  return new StagedError("ASP_STAGED_PENDING_JOURNAL", `${journalDir} holds an interrupted apply: recover first`, {
    data: { journalDir },
  });
}

function journalSays(journalDir: string, state: string): boolean {
  try {
    return (JSON.parse(readFileSync(join(journalDir, JOURNAL_FILE), "utf8")) as { state?: unknown }).state === state;
  } catch {
    return false;
  }
}

/**
 * Undo everything before the commit point. The worktree was never touched, so it is at B
 * whatever happens here; a leftover staging folder or journal is removed by the next recover().
 */
function rollBack(journal: Journal, journalDir: string | undefined): void {
  try {
    removeTree(journal.staging);
    if (journalDir !== undefined) removeJournal(journalDir);
  } catch {
    // Best effort: see above.
  }
}
