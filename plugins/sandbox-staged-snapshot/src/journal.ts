// The apply journal: one JSON file in the host-owned journal folder, replaced atomically (write a
// temp file, fsync, rename or link, fsync the folder) at each state change. Its `state` is the
// commit point: `prepared` rolls back, `committed` and `done` roll forward.
import { linkSync, lstatSync, readdirSync, readFileSync, renameSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { StagedError } from "./errors.js";
import { fsyncDir, lstatOrNull, unlinkIfPresent, writeFileDurable } from "./fsx.js";
import { pathSegments } from "./paths.js";

/** The journal's file name inside the journal folder. */
export const JOURNAL_FILE = "asp-staged-journal.json";

/** The `format` every journal carries (bump on an incompatible change). */
export const JOURNAL_FORMAT = "asp.staged-snapshot.journal/v1";

const TMP_PREFIX = `${JOURNAL_FILE}.tmp-`;
const ID = /^[0-9a-f]{32}$/;

/** Where an apply is: before the commit point (`prepared`), after it (`committed`), published (`done`). */
export type JournalState = "prepared" | "committed" | "done";

/**
 * One publish step, in order: deletes (rename the file into staging as `away`, then remove it),
 * then writes (rename the staged copy `staged` onto `path`). Staging names are relative to the
 * journal's `staging` folder.
 */
export type JournalStep =
  | { readonly n: number; readonly op: "delete"; readonly path: string; readonly away: string }
  | { readonly n: number; readonly op: "write"; readonly path: string; readonly staged: string };

/** The journal of one apply. */
export interface Journal {
  readonly format: typeof JOURNAL_FORMAT;
  readonly id: string;
  /** The real root the apply publishes into. */
  readonly root: string;
  /** The staging folder (same filesystem as the root, outside the tracked tree). */
  readonly staging: string;
  readonly state: JournalState;
  readonly steps: readonly JournalStep[];
}

/**
 * The staging folder of apply `id` under `root`: `<root>/.git/asp-staging/<id>` when `.git` is a
 * real folder, else `<parent>/.asp-staging.<name>/<id>` beside the root. Never inside the tracked
 * tree, so a snapshot of the worktree never sees it.
 */
export function stagingFor(root: string, id: string): string {
  const git = lstatOrNull(join(root, ".git"));
  const base = git?.isDirectory()
    ? join(root, ".git", "asp-staging")
    : join(dirname(root), `.asp-staging.${basename(root)}`);
  return join(base, id);
}

function invalid(why: string, data: Record<string, unknown> = {}): StagedError {
  return new StagedError("ASP_STAGED_JOURNAL_INVALID", `journal: ${why}`, { data });
}

/**
 * Write `journal` durably. `create`: publish it with `link`, which refuses when a journal is
 * already there; otherwise replace the current one with `rename`.
 *
 * @throws StagedError `ASP_STAGED_PENDING_JOURNAL` when creating over an existing journal.
 */
export function writeJournal(dir: string, journal: Journal, create: boolean): void {
  const final = join(dir, JOURNAL_FILE);
  const tmp = join(dir, `${TMP_PREFIX}${journal.id}-${journal.state}`);
  unlinkIfPresent(tmp);
  writeFileDurable(tmp, new TextEncoder().encode(`${JSON.stringify(journal, null, 2)}\n`), 0o600);
  if (create) {
    try {
      linkSync(tmp, final);
    } catch (error) {
      unlinkIfPresent(tmp);
      if ((error as NodeJS.ErrnoException).code === "EEXIST") {
        throw new StagedError("ASP_STAGED_PENDING_JOURNAL", `${final} holds an interrupted apply: recover first`, {
          data: { journal: final },
        });
      }
      throw error;
    }
    unlinkIfPresent(tmp);
  } else {
    renameSync(tmp, final);
  }
  fsyncDir(dir);
}

/** Remove the journal and any temp file a crash left beside it, durably (idempotent). */
export function removeJournal(dir: string): void {
  unlinkIfPresent(join(dir, JOURNAL_FILE));
  removeJournalTemps(dir);
  fsyncDir(dir);
}

/** Remove temp files a crash left in the journal folder: never a journal, only its drafts. */
export function removeJournalTemps(dir: string): void {
  for (const name of readdirSync(dir)) if (name.startsWith(TMP_PREFIX)) unlinkIfPresent(join(dir, name));
}

/** True when the journal folder holds a journal. */
export function hasJournal(dir: string): boolean {
  return lstatOrNull(join(dir, JOURNAL_FILE)) !== null;
}

/**
 * Read and check the journal in `dir` for `root` (a real path): the shape, the root, the staging
 * folder this plugin would use, step numbering and order, paths that stay inside the root, and
 * staging names it would write. Null when there is no journal.
 *
 * @throws StagedError `ASP_STAGED_JOURNAL_INVALID` for anything else.
 */
export function readJournal(dir: string, root: string): Journal | null {
  const path = join(dir, JOURNAL_FILE);
  const st = lstatOrNull(path);
  if (st === null) return null;
  if (!lstatSync(path).isFile()) throw invalid("not a regular file", { path });
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new StagedError("ASP_STAGED_JOURNAL_INVALID", "journal: not JSON", { cause: error, data: { path } });
  }
  return checkJournal(value, root);
}

const KEYS = ["format", "id", "root", "staging", "state", "steps"].sort().join(",");

/**
 * Check a parsed journal value (what `readJournal` reads from the journal folder).
 *
 * @throws StagedError `ASP_STAGED_JOURNAL_INVALID`.
 */
export function checkJournal(value: unknown, root: string): Journal {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid("not an object");
  const j = value as Record<string, unknown>;
  if (Object.keys(j).sort().join(",") !== KEYS) throw invalid("unexpected fields");
  if (j.format !== JOURNAL_FORMAT) throw invalid("unknown format", { format: String(j.format).slice(0, 100) });
  if (typeof j.id !== "string" || !ID.test(j.id)) throw invalid("bad id");
  if (j.root !== root)
    throw invalid("written for another root", { root: String(j.root).slice(0, 300), expected: root });
  if (j.staging !== stagingFor(root, j.id)) throw invalid("names a staging folder this plugin never uses");
  if (j.state !== "prepared" && j.state !== "committed" && j.state !== "done") throw invalid("unknown state");
  if (!Array.isArray(j.steps)) throw invalid("steps must be an array");
  let writes = false;
  const seen = new Set<string>();
  j.steps.forEach((s: unknown, i: number) => {
    const step = s as Record<string, unknown>;
    const ok =
      typeof s === "object" &&
      s !== null &&
      step.n === i + 1 &&
      ((step.op === "delete" && step.away === `old/${i}` && Object.keys(step).length === 4) ||
        (step.op === "write" && step.staged === `new/${i}` && Object.keys(step).length === 4));
    if (!ok) throw invalid(`step ${i + 1} is malformed`);
    if (step.op === "write") writes = true;
    else if (writes) throw invalid("a delete after a write");
    let path: string;
    try {
      path = pathSegments(step.path).join("/");
    } catch (error) {
      throw new StagedError("ASP_STAGED_JOURNAL_INVALID", `journal: step ${i + 1} path escapes the root`, {
        cause: error,
      });
    }
    if (path !== step.path || seen.has(path)) throw invalid(`step ${i + 1} path is not normalized or repeats`);
    seen.add(path);
  });
  return j as unknown as Journal;
}
