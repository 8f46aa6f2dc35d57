import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { resolve } from "node:path";
import { closedStdio } from "@asp/contracts";
import { type RunFileError, runFile } from "./child.js";
import { EvidenceError } from "./errors.js";
import { type Digest, defaultHasher, digestBytes, type Hasher } from "./hash.js";
import { encodeTree, type FileMode, type TreeEntry } from "./objects.js";
import type { StoredObject } from "./store.js";
import { gitEnv, nameText } from "./tracked.js";
import type { SnapshotTarget } from "./worktree.js";

/** Options of {@link snapshotGitRevision}. */
export interface GitSnapshotOptions {
  /**
   * Accepted for compatibility and ignored: every path a commit tracks is judged (THREAT-MODEL
   * invariant 11), and excludes only ever leave out untracked content, which a commit has none of.
   * @deprecated
   */
  readonly excludes?: readonly string[];
  /**
   * Accepted for compatibility and ignored: a commit's `.gitignore` files never hide what the
   * commit tracks (invariant 11).
   * @deprecated
   */
  readonly gitignore?: boolean;
  readonly store?: SnapshotTarget;
  readonly hasher?: Hasher;
  /** The git binary (default `git` on PATH). Always run with an argv array, never a shell. */
  readonly git?: string;
}

/** What {@link snapshotGitRevision} found. */
export interface GitSnapshot {
  readonly tree: Digest;
  /** The git object id of the revision's tree. */
  readonly gitTree: string;
  readonly files: number;
  readonly stored: number;
  /** Submodules (gitlinks) the revision tracks: another repository's content, never in the tree. */
  readonly submodules: readonly string[];
}

interface GitFile {
  readonly mode: FileMode;
  readonly oid: string;
}

interface Dir {
  readonly files: Map<string, GitFile>;
  readonly dirs: Map<string, Dir>;
}

const MAX_LIST = 512 * 1024 * 1024;

function gitError(repo: string, args: readonly string[], cause: unknown, stderr = ""): EvidenceError {
  const first = stderr.split("\n").find((l) => l.trim() !== "") ?? (cause as Error)?.message ?? "failed";
  return new EvidenceError("ASP_EVIDENCE_GIT_FAILED", `git ${args[0] ?? ""} in ${repo} failed: ${first.trim()}`, {
    cause,
    category: "input",
    data: { repo, command: args[0] ?? null },
  });
}

async function run(git: string, repo: string, args: readonly string[]): Promise<Buffer> {
  try {
    return (await runFile(git, args, { cwd: repo, maxBuffer: MAX_LIST, env: gitEnv() })).stdout;
  } catch (error) {
    throw gitError(repo, args, error, (error as RunFileError).stderr ?? "");
  }
}

/** Stream `git cat-file --batch` for `oids`; calls `onBlob` with each object's bytes in order. */
function catFile(
  git: string,
  repo: string,
  oids: readonly string[],
  onBlob: (oid: string, bytes: Buffer) => void,
): Promise<void> {
  return new Promise((done, fail) => {
    const args = ["cat-file", "--batch"];
    const child = spawn(git, args, {
      cwd: repo,
      stdio: closedStdio(fs) as ["pipe", "pipe", "pipe"],
      env: gitEnv(),
    });
    let buf: Buffer = Buffer.alloc(0);
    let stderr = "";
    let failed = false;
    const failWith = (e: EvidenceError): void => {
      if (failed) return;
      failed = true;
      child.kill();
      fail(e);
    };
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString("utf8");
    });
    child.stdout.on("data", (chunk: Buffer) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        const nl = buf.indexOf(10);
        if (nl < 0) return;
        const header = buf.subarray(0, nl).toString("utf8");
        const [oid, type, sizeText] = header.split(" ");
        if (type !== "blob" || oid === undefined || sizeText === undefined) {
          failWith(gitError(repo, args, new Error(header), `unexpected cat-file output: ${header}`));
          return;
        }
        const size = Number(sizeText);
        if (buf.length < nl + 1 + size + 1) return;
        onBlob(oid, buf.subarray(nl + 1, nl + 1 + size));
        buf = buf.subarray(nl + 1 + size + 1);
      }
    });
    child.on("error", (e) => failWith(gitError(repo, args, e)));
    child.on("close", (code) => {
      if (failed) return;
      if (code !== 0) failWith(gitError(repo, args, new Error(`exit ${code}`), stderr));
      else done();
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(oids.length === 0 ? "" : `${oids.join("\n")}\n`);
  });
}

function normalizeMode(mode: string): FileMode | "skip" | "submodule" {
  if (mode === "120000") return "120000";
  if (mode === "160000") return "submodule"; // another repository's content: reported, never judged
  if (mode.startsWith("100")) return (Number.parseInt(mode, 8) & 0o100) !== 0 ? "100755" : "100644";
  return "skip";
}

/**
 * The tree id of a git revision, computed from the real `git` binary (structured argv, never a
 * shell, no inherited descriptor). It holds every path the revision tracks (THREAT-MODEL
 * invariant 11): no `.gitignore`, exclude or folder name hides one; submodules are reported in
 * `submodules`. Equals `snapshotWorktree(..., { tracked: "index" })` of a clean checkout of it:
 * same blobs (raw bytes, no filters), modes and link handling.
 *
 * @throws EvidenceError `ASP_EVIDENCE_GIT_FAILED` when git fails or the revision does not exist,
 *   `ASP_EVIDENCE_UNREPRESENTABLE_NAME` for a tracked name that is not UTF-8 or lies inside `.git`,
 *   `ASP_EVIDENCE_BAD_OBJECT` for a revision that looks like an option.
 * @example
 * ```ts
 * const { tree } = await snapshotGitRevision("./repo", "HEAD");
 * ```
 */
export async function snapshotGitRevision(
  repo: string,
  rev: string,
  options: GitSnapshotOptions = {},
): Promise<GitSnapshot> {
  const dir = resolve(repo);
  const git = options.git ?? "git";
  const hasher = options.hasher ?? defaultHasher();
  if (typeof rev !== "string" || rev === "" || rev.startsWith("-") || /[\0\n\r]/.test(rev)) {
    throw new EvidenceError(
      "ASP_EVIDENCE_BAD_OBJECT",
      "a git revision must be a non-empty name that does not start with '-'",
      {
        data: { rev: String(rev).slice(0, 200) },
      },
    );
  }
  const gitTree = (await run(git, dir, ["rev-parse", "--verify", "--quiet", "--end-of-options", `${rev}^{tree}`]))
    .toString("utf8")
    .trim();
  if (!/^[0-9a-f]{40,64}$/.test(gitTree))
    throw gitError(dir, ["rev-parse"], new Error("no tree"), `unexpected rev-parse output`);
  const listing = await run(git, dir, ["ls-tree", "-r", "-z", "--full-tree", gitTree]);

  const root: Dir = { files: new Map(), dirs: new Map() };
  const oids = new Set<string>();
  const submodules: string[] = [];
  for (let at = 0; at < listing.length; ) {
    const end = listing.indexOf(0, at);
    const raw = listing.subarray(at, end < 0 ? listing.length : end);
    at = end < 0 ? listing.length : end + 1;
    if (raw.length === 0) continue;
    const tab = raw.indexOf(9);
    const [mode, type, oid] = raw.subarray(0, tab).toString("latin1").split(" ");
    // Names are bytes in git: one the tree format cannot hold fails the snapshot (invariant 11).
    const path = nameText(raw.subarray(tab + 1), `revision ${rev}`);
    const m = normalizeMode(mode ?? "");
    if (m === "submodule") {
      submodules.push(path);
      continue;
    }
    if (m === "skip" || type !== "blob" || oid === undefined) continue;
    const parts = path.split("/");
    if (parts.some((p) => p.toLowerCase() === ".git")) {
      throw new EvidenceError(
        "ASP_EVIDENCE_UNREPRESENTABLE_NAME",
        `revision ${rev} tracks ${JSON.stringify(path)}, a path inside a .git folder that no checkout can hold: the host judges nothing rather than leave it out`,
        { category: "input", data: { rev, path } },
      );
    }
    const name = parts.pop() as string;
    let d = root;
    for (const p of parts) {
      let next = d.dirs.get(p);
      if (next === undefined) {
        next = { files: new Map(), dirs: new Map() };
        d.dirs.set(p, next);
      }
      d = next;
    }
    d.files.set(name, { mode: m, oid });
    oids.add(oid);
  }

  const digests = new Map<string, Digest>();
  const target = options.store;
  let pending: StoredObject[] = [];
  let pendingBytes = 0;
  let stored = 0;
  const flush = async (): Promise<void> => {
    if (target === undefined || pending.length === 0) return;
    const batch = pending;
    pending = [];
    pendingBytes = 0;
    stored += await target.objects.putMany(batch);
  };
  const blobs: Array<{ digest: Digest; bytes: Buffer }> = [];
  await catFile(git, dir, [...oids], (oid, bytes) => {
    const digest = digestBytes(bytes, hasher);
    digests.set(oid, digest);
    if (target !== undefined) {
      blobs.push({ digest, bytes: Buffer.from(bytes) });
      pendingBytes += bytes.length;
    }
  });
  for (const b of blobs) pending.push({ kind: "blob", digest: b.digest, bytes: b.bytes });
  blobs.length = 0;
  if (pendingBytes > 0) await flush();

  let files = 0;
  const build = (d: Dir): TreeEntry[] => {
    const entries: TreeEntry[] = [];
    for (const [name, sub] of d.dirs) {
      const subEntries = build(sub);
      if (subEntries.length === 0) continue;
      const tree = encodeTree(subEntries, hasher);
      if (target !== undefined) pending.push({ kind: "tree", digest: tree.digest, bytes: tree.bytes });
      entries.push({ name, mode: "040000", digest: tree.digest });
    }
    for (const [name, f] of d.files) {
      entries.push({ name, mode: f.mode, digest: digests.get(f.oid) as Digest });
      files++;
    }
    return entries;
  };
  const rootTree = encodeTree(build(root), hasher);
  if (target !== undefined) pending.push({ kind: "tree", digest: rootTree.digest, bytes: rootTree.bytes });
  await flush();
  return { tree: rootTree.digest, gitTree, files, stored, submodules: submodules.sort() };
}
