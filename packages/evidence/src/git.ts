import { execFile, spawn } from "node:child_process";
import { resolve } from "node:path";
import { EvidenceError } from "./errors.js";
import { type Digest, defaultHasher, digestBytes, type Hasher } from "./hash.js";
import { IgnoreRules } from "./ignore-rules.js";
import { encodeTree, type FileMode, type TreeEntry } from "./objects.js";
import type { StoredObject } from "./store.js";
import type { SnapshotTarget } from "./worktree.js";

/** Options of {@link snapshotGitRevision}. */
export interface GitSnapshotOptions {
  /** Same meaning as for `snapshotWorktree`, so both give the same id for the same content. */
  readonly excludes?: readonly string[];
  /** Apply the revision's own `.gitignore` files, as a checkout then `snapshotWorktree` would (default true). */
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

function run(git: string, repo: string, args: readonly string[]): Promise<Buffer> {
  return new Promise((done, fail) => {
    execFile(
      git,
      [...args],
      { cwd: repo, encoding: "buffer", maxBuffer: MAX_LIST, env: { ...process.env, GIT_OPTIONAL_LOCKS: "0" } },
      (error, stdout, stderr) => {
        if (error) fail(gitError(repo, args, error, stderr.toString("utf8")));
        else done(stdout);
      },
    );
  });
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
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, GIT_OPTIONAL_LOCKS: "0" },
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

function normalizeMode(mode: string): FileMode | "skip" {
  if (mode === "120000") return "120000";
  if (mode === "160000") return "skip"; // submodule: the worktree snapshot skips nested repositories too
  if (mode.startsWith("100")) return (Number.parseInt(mode, 8) & 0o100) !== 0 ? "100755" : "100644";
  return "skip";
}

/**
 * The tree id of a git revision, computed from the real `git` binary (structured argv, never a
 * shell). Equals `snapshotWorktree` of a checkout of that revision: same blobs (raw bytes, no
 * filters), modes, link handling, `.gitignore` and excludes.
 *
 * @throws EvidenceError `ASP_EVIDENCE_GIT_FAILED` when git fails or the revision does not exist,
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
  for (const rec of listing.toString("utf8").split("\0")) {
    if (rec === "") continue;
    const tab = rec.indexOf("\t");
    const [mode, type, oid] = rec.slice(0, tab).split(" ");
    const path = rec.slice(tab + 1);
    const m = normalizeMode(mode ?? "");
    if (m === "skip" || type !== "blob" || oid === undefined) continue;
    const parts = path.split("/");
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
  const gitignores = new Map<string, string>();
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
  const ignoreOids = new Set<string>();
  const collectIgnores = (d: Dir): void => {
    const f = d.files.get(".gitignore");
    if (f !== undefined && f.mode !== "120000") ignoreOids.add(f.oid);
    for (const sub of d.dirs.values()) collectIgnores(sub);
  };
  if (options.gitignore ?? true) collectIgnores(root);
  const blobs: Array<{ digest: Digest; bytes: Buffer }> = [];
  await catFile(git, dir, [...oids], (oid, bytes) => {
    const digest = digestBytes(bytes, hasher);
    digests.set(oid, digest);
    if (ignoreOids.has(oid)) gitignores.set(oid, bytes.toString("utf8"));
    if (target !== undefined) {
      blobs.push({ digest, bytes: Buffer.from(bytes) });
      pendingBytes += bytes.length;
    }
  });
  for (const b of blobs) pending.push({ kind: "blob", digest: b.digest, bytes: b.bytes });
  blobs.length = 0;
  if (pendingBytes > 0) await flush();

  let files = 0;
  const build = (d: Dir, rel: string, rules: IgnoreRules): TreeEntry[] => {
    const gi = d.files.get(".gitignore");
    if (gi !== undefined && gi.mode !== "120000") {
      const text = gitignores.get(gi.oid);
      if (text !== undefined) rules = rules.with(rel, text);
    }
    const entries: TreeEntry[] = [];
    for (const [name, sub] of d.dirs) {
      const childRel = rel === "" ? name : `${rel}/${name}`;
      if (name === ".git" || rules.ignores(childRel, true)) continue;
      const subEntries = build(sub, childRel, rules);
      if (subEntries.length === 0) continue;
      const tree = encodeTree(subEntries, hasher);
      if (target !== undefined) pending.push({ kind: "tree", digest: tree.digest, bytes: tree.bytes });
      entries.push({ name, mode: "040000", digest: tree.digest });
    }
    for (const [name, f] of d.files) {
      const childRel = rel === "" ? name : `${rel}/${name}`;
      if (name === ".git" || rules.ignores(childRel, false)) continue;
      entries.push({ name, mode: f.mode, digest: digests.get(f.oid) as Digest });
      files++;
    }
    return entries;
  };
  const rootTree = encodeTree(build(root, "", IgnoreRules.root(options.excludes ?? [])), hasher);
  if (target !== undefined) pending.push({ kind: "tree", digest: rootTree.digest, bytes: rootTree.bytes });
  await flush();
  return { tree: rootTree.digest, gitTree, files, stored };
}
