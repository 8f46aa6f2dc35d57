import { createHash } from "node:crypto";
import { lstatSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { EvidenceError } from "./errors.js";
import { type Digest, defaultHasher, type Hasher } from "./hash.js";
import { encodeTree, type TreeEntry } from "./objects.js";
import { assertPath } from "./paths.js";
import { type SnapshotTarget, snapshotWorktree } from "./worktree.js";

/** Options of {@link snapshotEnvironment}. */
export interface EnvironmentOptions {
  /** Where the trees and blobs go (a `Store` fits). */
  readonly store: SnapshotTarget;
  /**
   * A folder for one stat cache per root (created when missing): a re-snapshot reads and hashes
   * only files whose stat changed. Without it every file is read.
   */
  readonly statCacheDir?: string;
  /** Excludes inside each root, gitignore syntax (default `[".cache/"]`: tool caches churn). */
  readonly excludes?: readonly string[];
  readonly hasher?: Hasher;
}

/** What {@link snapshotEnvironment} found. */
export interface EnvironmentSnapshot {
  /** Id of the environment tree: the roots at their repository paths, nothing else. */
  readonly tree: Digest;
  /** The roots that exist as real folders (missing ones and links are left out), sorted. */
  readonly roots: readonly string[];
  /** Files and links in the environment. */
  readonly files: number;
  /** Files read and hashed (the rest came from the stat caches). */
  readonly hashed: number;
  /** Objects newly written to the store. */
  readonly stored: number;
}

/**
 * Snapshot a repository's dependency roots (such as `node_modules`) into one environment tree laid
 * out at repository paths (host §5, §9). Each root is snapshotted whole, read-only and without
 * `.gitignore` rules (dependencies are usually ignored, that is why they are here); links are kept
 * as links, never followed. A root that is missing, not a folder, a link, or reached through a
 * link (any folder above it inside the repository is one) is left out, so a candidate cannot
 * graft a folder from outside the repository into the environment; returns null when no root
 * exists.
 *
 * @throws EvidenceError `ASP_EVIDENCE_BAD_PATH` when a root is not a normalized relative path or
 *   two roots nest; `ASP_EVIDENCE_IO` when a root cannot be read.
 */
export async function snapshotEnvironment(
  repo: string,
  roots: readonly string[],
  options: EnvironmentOptions,
): Promise<EnvironmentSnapshot | null> {
  const base = resolve(repo);
  const hasher = options.hasher ?? defaultHasher();
  const wanted = [...new Set(roots)].sort();
  for (const r of wanted) assertPath(r);
  for (const a of wanted)
    for (const b of wanted)
      if (a !== b && b.startsWith(`${a}/`))
        throw new EvidenceError("ASP_EVIDENCE_BAD_PATH", `environment roots nest: ${a} holds ${b}`, { data: { a, b } });

  if (options.statCacheDir !== undefined) {
    try {
      mkdirSync(options.statCacheDir, { recursive: true });
    } catch (error) {
      throw new EvidenceError("ASP_EVIDENCE_IO", `cannot create the stat cache folder ${options.statCacheDir}`, {
        cause: error,
        data: { path: options.statCacheDir },
      });
    }
  }
  const present: { path: string; tree: Digest }[] = [];
  let files = 0;
  let hashed = 0;
  let stored = 0;
  for (const root of wanted) {
    if (!realFolder(base, root)) continue;
    const cacheName = createHash("sha256").update(root).digest("hex").slice(0, 32);
    const snap = await snapshotWorktree(join(base, root), {
      excludes: options.excludes ?? [".cache/"],
      gitignore: false,
      store: options.store,
      hasher,
      ...(options.statCacheDir === undefined ? {} : { statCache: join(options.statCacheDir, cacheName) }),
    });
    present.push({ path: root, tree: snap.tree });
    files += snap.files;
    hashed += snap.hashed;
    stored += snap.stored;
  }
  if (present.length === 0) return null;

  // Graft each root's tree at its path: build the folders above them bottom-up.
  interface Dir {
    readonly dirs: Map<string, Dir>;
    readonly leaves: Map<string, Digest>;
  }
  const top: Dir = { dirs: new Map(), leaves: new Map() };
  for (const { path, tree } of present) {
    const parts = path.split("/");
    let at = top;
    for (const part of parts.slice(0, -1)) {
      let next = at.dirs.get(part);
      if (next === undefined) {
        next = { dirs: new Map(), leaves: new Map() };
        at.dirs.set(part, next);
      }
      at = next;
    }
    at.leaves.set(parts[parts.length - 1] as string, tree);
  }
  const write = async (dir: Dir): Promise<Digest> => {
    const entries: TreeEntry[] = [];
    for (const [name, sub] of dir.dirs) entries.push({ name, mode: "040000", digest: await write(sub) });
    for (const [name, digest] of dir.leaves) entries.push({ name, mode: "040000", digest });
    const encoded = encodeTree(entries, hasher);
    stored += await options.store.objects.putMany([{ kind: "tree", digest: encoded.digest, bytes: encoded.bytes }]);
    return encoded.digest;
  };
  const tree = await write(top);
  return { tree, roots: present.map((p) => p.path), files, hashed, stored };
}

/**
 * True when `root` and every folder above it, up to the repository, is a real folder (lstat,
 * never followed): a link anywhere on the way could point outside the repository.
 */
function realFolder(base: string, root: string): boolean {
  let at = base;
  for (const part of root.split("/")) {
    at = join(at, part);
    try {
      if (!lstatSync(at).isDirectory()) return false;
    } catch {
      return false;
    }
  }
  return true;
}
