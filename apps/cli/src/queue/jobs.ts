import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { readFileSync, statSync } from "node:fs";
import { isAbsolute, normalize } from "node:path";
import { closedStdio } from "@asp/contracts";
import { UsageError } from "../errors.js";

/** The pg-boss queue every `asp sweep --queue` job goes to. */
export const SWEEP_QUEUE = "asp-sweep";

/** What one queued sweep job carries: the repository, the commit it was enqueued at, its key. */
export interface SweepJob {
  /** Absolute path of the repository (as written in the repositories file). */
  readonly repo: string;
  /** The repository's HEAD commit when it was enqueued. */
  readonly head: string;
  /** {@link jobKey} of (repo, head): the job's idempotency key, in the queue and in the fact log. */
  readonly key: string;
}

/** Largest repositories file read (bytes) and the most lines it may hold: the parser stays bounded. */
const MAX_FILE_BYTES = 16 * 1024 * 1024;
const MAX_REPOS = 100_000;

/**
 * The idempotency key of sweeping `repo` at commit `head`: sha256 over both, hex. The same
 * repository at the same commit is the same job however often it is enqueued.
 */
export function jobKey(repo: string, head: string): string {
  return createHash("sha256")
    .update(JSON.stringify(["asp-sweep-job/1", repo, head]))
    .digest("hex");
}

/**
 * The pg-boss job id of a key: a UUID made of the key's first 128 bits. pg-boss inserts a job
 * with `ON CONFLICT DO NOTHING`, so a second enqueue of the same key is refused by the database
 * while the first job is kept (queued, active, completed or failed), and is counted a duplicate.
 */
export function jobId(key: string): string {
  const h = key.slice(0, 32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** The fact log state key a job's receipt is written under (read back with `FactLog.latest`). */
export function jobStateKey(key: string): string {
  return `queue-job:${key}`;
}

/**
 * The commit `HEAD` names in `repo` (`git rev-parse --verify HEAD^{commit}`), or `null` when it
 * is not a git repository with a commit. No hook or configuration of the repository runs.
 */
export function repoHead(repo: string): string | null {
  try {
    const out = execFileSync("git", ["-C", repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"], {
      encoding: "utf8",
      stdio: closedStdio(fs, ["ignore", "pipe", "ignore"]) as ["ignore", "pipe", "ignore"],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", GIT_CONFIG_NOSYSTEM: "1", GIT_TERMINAL_PROMPT: "0" },
    }).trim();
    return /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(out) ? out : null;
  } catch {
    return null;
  }
}

/** One bad line of a repositories file. */
export interface ReposFileProblem {
  /** 1-based line number. */
  readonly line: number;
  readonly problem: string;
}

/**
 * Read a repositories file (one absolute path of a git repository per line; blank lines are
 * skipped) into one {@link SweepJob} each. Every line is checked before anything is returned:
 * one bad line and nothing is enqueued.
 * @throws UsageError `ASP_CLI_BAD_INPUT` when the file cannot be read or is too large,
 *   `ASP_CLI_QUEUE_BAD_REPOS_FILE` naming every bad line in `data.problems` (not absolute, not
 *   normalized, control characters, missing, not a folder, not a git repository with a commit,
 *   listed twice, too many lines).
 */
export function readReposFile(path: string): SweepJob[] {
  let text: string;
  try {
    if (statSync(path).size > MAX_FILE_BYTES) {
      throw new UsageError(
        "ASP_CLI_BAD_INPUT",
        `the repositories file ${path} is larger than ${MAX_FILE_BYTES} bytes`,
        {
          data: { path },
        },
      );
    }
    text = readFileSync(path, "utf8");
  } catch (cause) {
    if (cause instanceof UsageError) throw cause;
    throw new UsageError("ASP_CLI_BAD_INPUT", `cannot read the repositories file ${path}`, { cause, data: { path } });
  }
  const problems: ReposFileProblem[] = [];
  const jobs: SweepJob[] = [];
  const seen = new Map<string, number>();
  const lines = text.split("\n");
  lines.forEach((raw, i) => {
    const line = i + 1;
    const repo = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (repo.trim() === "") return;
    if (jobs.length + problems.length >= MAX_REPOS) {
      if (jobs.length + problems.length === MAX_REPOS) problems.push({ line, problem: `more than ${MAX_REPOS} lines` });
      return;
    }
    const problem = repoProblem(repo, seen);
    if (problem !== null) {
      problems.push({ line, problem });
      return;
    }
    seen.set(repo, line);
    const head = repoHead(repo);
    if (head === null) {
      problems.push({ line, problem: "not a git repository with a commit" });
      return;
    }
    jobs.push({ repo, head, key: jobKey(repo, head) });
  });
  if (problems.length > 0) {
    throw new UsageError(
      "ASP_CLI_QUEUE_BAD_REPOS_FILE",
      `${problems.length} bad line(s) in ${path}, nothing enqueued: ${problems
        .slice(0, 5)
        .map((p) => `line ${p.line}: ${p.problem}`)
        .join("; ")}`,
      { data: { path, problems: problems.slice(0, 1000) } },
    );
  }
  return jobs;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function repoProblem(repo: string, seen: ReadonlyMap<string, number>): string | null {
  if (repo.length > 4096) return "longer than 4096 characters";
  if (CONTROL.test(repo)) return "holds a control character";
  if (!isAbsolute(repo)) return "not an absolute path";
  if (normalize(repo) !== repo || (repo.length > 1 && repo.endsWith("/"))) return "not a normalized path";
  const first = seen.get(repo);
  if (first !== undefined) return `listed twice (first on line ${first})`;
  try {
    if (!statSync(repo).isDirectory()) return "not a folder";
  } catch {
    return "no such folder";
  }
  return null;
}

/**
 * The job data as queued, checked: what a worker evaluates must be what was enqueued, and its
 * key must be the key of its repository and commit.
 * @throws UsageError `ASP_CLI_QUEUE_BAD_JOB`.
 */
export function checkJobData(data: unknown): SweepJob {
  const d = data as Partial<Record<keyof SweepJob, unknown>> | null;
  if (
    typeof d !== "object" ||
    d === null ||
    typeof d.repo !== "string" ||
    typeof d.head !== "string" ||
    typeof d.key !== "string" ||
    !isAbsolute(d.repo) ||
    jobKey(d.repo, d.head) !== d.key
  ) {
    throw new UsageError("ASP_CLI_QUEUE_BAD_JOB", "the job's data is not a sweep job this host enqueued");
  }
  return { repo: d.repo, head: d.head, key: d.key };
}
