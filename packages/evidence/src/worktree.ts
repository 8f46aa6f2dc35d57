import {
  closeSync,
  constants,
  type Dirent,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
} from "node:fs";
import { resolve } from "node:path";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { EvidenceError } from "./errors.js";
import { type Digest, defaultHasher, digestBytes, type Hasher } from "./hash.js";
import { IgnoreRules } from "./ignore-rules.js";
import { encodeTree, type TreeEntry } from "./objects.js";
import { type DirRow, FileStatCache, type StatCache, type StatCacheData, type StatRow } from "./stat-cache.js";
import { STAT_MISSING, STAT_OK, type StatNumbers, StatQueue } from "./stat-pool.js";
import type { ObjectStore, StoredObject } from "./store.js";
import { nameText, readTrackedSet, type TrackedSet } from "./tracked.js";

/** Where a snapshot writes its objects: the object store and the id of the store it belongs to. */
export interface SnapshotTarget {
  readonly id: string;
  readonly objects: ObjectStore;
}

/** Options of {@link snapshotWorktree}. */
export interface SnapshotOptions {
  /** Host-configured excludes in gitignore syntax, relative to the root; a `.gitignore` cannot re-include them. */
  readonly excludes?: readonly string[];
  /** Honour `.gitignore` files (default true; with `tracked`, for untracked files only). */
  readonly gitignore?: boolean;
  /**
   * What the snapshot must hold whatever ignore files, excludes or nested `.git` markers say
   * (THREAT-MODEL invariant 11): `"index"` reads the tracked set from the git index of the folder
   * (a folder in no git work tree is then judged whole: its `.gitignore` files, which the
   * candidate writes, are not honoured, only the excludes); or a {@link TrackedSet} given.
   * Untracked paths left out are counted in {@link WorktreeSnapshot.leftOut}.
   */
  readonly tracked?: "index" | TrackedSet;
  /** Store every blob and tree not already there (a `Store` fits). Without it only the id is computed. */
  readonly store?: SnapshotTarget;
  /**
   * An on-disk stat cache (a path, or a handle from `createStatCache` to also keep it in memory
   * between snapshots): a re-snapshot reads and hashes only files whose (size, mtime, ctime,
   * inode, mode) changed, like git's index. Created when missing; a damaged cache is ignored
   * and rewritten.
   */
  readonly statCache?: string | StatCache;
  readonly hasher?: Hasher;
}

/** What {@link snapshotWorktree} found. */
export interface WorktreeSnapshot {
  /** The tree id of the directory (equal to `snapshotGitRevision` of the commit it equals). */
  readonly tree: Digest;
  /** Files and links in the tree. */
  readonly files: number;
  /** Files read and hashed (the rest came from the stat cache). */
  readonly hashed: number;
  /** Objects newly written to the store. */
  readonly stored: number;
  /**
   * Untracked files and folders left out by an ignore rule, an exclude or a nested repository
   * (with `tracked`; a folder counts once). Never a tracked path.
   */
  readonly leftOut: number;
  /** Tracked submodules (gitlinks): another repository's content, never in the tree (with `tracked`). */
  readonly submodules: readonly string[];
}

const FLUSH_BYTES = 32 * 1024 * 1024;
const NO_DIRS: ReadonlyMap<string, never> = new Map<string, never>();
const NO_NAMES: readonly string[] = [];
const NO_STAT_ROWS: readonly StatRow[] = [];
/** A vanished path is an answer (`undefined`), not an exception to build and catch. */
const LSTAT = { throwIfNoEntry: false } as const;
const { S_IFMT, S_IFREG, S_IFLNK, O_RDONLY, O_NOFOLLOW } = constants;
/** Read without following a link: a file swapped for a link after its lstat fails (ELOOP). */
const READ_FLAGS = O_RDONLY | (O_NOFOLLOW ?? 0);

function ioError(path: string, what: string, cause: unknown): EvidenceError {
  const code = (cause as NodeJS.ErrnoException)?.code ?? "error";
  return new EvidenceError("ASP_EVIDENCE_IO", `${what} ${path}: ${code}`, { cause, data: { path, errno: code } });
}

const isMissing = (error: unknown): boolean => {
  const code = (error as NodeJS.ErrnoException)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
};

/** A file's bytes, or null when it no longer exists. */
function readFile(abs: string): Uint8Array | null {
  let fd: number;
  try {
    fd = openSync(abs, READ_FLAGS);
  } catch (error) {
    if (isMissing(error)) return null;
    throw ioError(abs, "cannot read", error);
  }
  try {
    return readFileSync(fd);
  } catch (error) {
    throw ioError(abs, "cannot read", error);
  } finally {
    closeSync(fd);
  }
}

/** A link's target bytes, or null when it no longer exists. */
function readLink(abs: string): Uint8Array | null {
  try {
    return readlinkSync(abs, { encoding: "buffer" });
  } catch (error) {
    if (isMissing(error)) return null;
    throw ioError(abs, "cannot read", error);
  }
}

const treeMode = (mode: number): TreeEntry["mode"] =>
  (mode & S_IFMT) === S_IFLNK ? "120000" : (mode & 0o100) !== 0 ? "100755" : "100644";

/** lstat one path: undefined when it is gone; a typed error for anything else. */
function lstatOne(abs: string): StatNumbers | undefined {
  try {
    return lstatSync(abs, LSTAT);
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw ioError(abs, "cannot stat", error);
  }
}

/** One directory as listed, before its files are stat'ed. */
interface Listed {
  readonly name: string;
  readonly rel: string;
  readonly abs: string;
  /** What the cache remembers of it. */
  readonly before: DirRow | undefined;
  /** Index of its first file in the snapshot's list of paths to stat. */
  readonly first: number;
  /** Its files and links not ignored, and the cache's row for each. */
  readonly names: string[];
  readonly rows: Array<StatRow | undefined>;
  readonly subdirs: Listed[];
  /** The `.gitignore`, settled while listing: its index in `names`, row and freshly read bytes. */
  gitignoreAt?: number;
  readonly ignoreRow: StatRow | null | undefined;
  readonly ignoreBytes: Uint8Array | undefined;
}

interface Walked {
  readonly tree: Digest;
  readonly count: number;
  /** The tree id differs from the one the cache remembered for this directory. */
  readonly changed: boolean;
}

/**
 * Snapshot a directory into a content-addressed tree id. Honours `.gitignore` files and the
 * host's excludes, never enters `.git` or nested repositories, records symlinks as links (mode
 * `120000`, blob = target bytes; never followed), keeps the executable bit (`100755`), treats
 * every file as bytes, and leaves out empty directories (as git does).
 *
 * @throws EvidenceError `ASP_EVIDENCE_IO` when the root is not a readable directory or a file
 *   cannot be read; `ASP_EVIDENCE_BAD_PATH` for a name no normalized path can carry (backslash).
 * @example
 * ```ts
 * const cache = createStatCache("./.asp/stat-cache");
 * const { tree } = await snapshotWorktree("./repo", { excludes: [".asp/"], store, statCache: cache });
 * ```
 */
export async function snapshotWorktree(dir: string, options: SnapshotOptions = {}): Promise<WorktreeSnapshot> {
  const root = resolve(dir);
  const hasher = options.hasher ?? defaultHasher();
  const excludes = options.excludes ?? [];
  const target = options.store;
  try {
    if (!statSync(root).isDirectory()) throw Object.assign(new Error("not a directory"), { code: "ENOTDIR" });
  } catch (error) {
    throw ioError(root, "cannot snapshot", error);
  }
  const tracked: TrackedSet | null | undefined =
    options.tracked === "index" ? await readTrackedSet(root) : options.tracked;
  // A folder in no work tree has no tracked set: its .gitignore files are the candidate's, so only
  // the trusted excludes apply.
  const useGitignore = tracked === null ? false : (options.gitignore ?? true);
  const trackedFiles = tracked?.files;
  const trackedDirs = tracked?.dirs;
  let leftOut = 0;

  const cache =
    options.statCache === undefined
      ? undefined
      : options.statCache instanceof FileStatCache
        ? options.statCache
        : new FileStatCache(typeof options.statCache === "string" ? options.statCache : options.statCache.path);
  const rules = JSON.stringify({
    excludes,
    gitignore: useGitignore,
    // The cache's "not ignored then, not ignored now" shortcut holds only for the same tracked set.
    tracked:
      tracked === undefined || tracked === null
        ? (tracked ?? "none")
        : digestBytes(new TextEncoder().encode([...tracked.files].sort().join("\0")), hasher),
  });
  const loaded = cache?.load();
  // Cached ids only prove an object is stored when the cache was written for this very store.
  const prev: StatCacheData | undefined =
    loaded !== undefined && loaded.hasher === hasher.name && (target === undefined || loaded.store === target.id)
      ? loaded
      : undefined;
  const prevDirs: ReadonlyMap<string, DirRow> = prev?.dirs ?? NO_DIRS;
  const writtenAtMs = prev?.writtenAtMs ?? 0;
  const nextDirs = new Map<string, DirRow>();
  const nextIgnores = new Map<string, string>();

  let files = 0;
  let hashed = 0;
  let changedRows = 0;
  let reused = 0;
  let stored = 0;
  let pending: StoredObject[] = [];
  let pendingBytes = 0;
  let visited = 0;

  const flush = async (): Promise<void> => {
    if (target === undefined || pending.length === 0) return;
    const batch = pending;
    pending = [];
    pendingBytes = 0;
    stored += await target.objects.putMany(batch);
  };

  /** The bytes {@link settle} read for the row it returned; undefined when the cached row held. */
  let fresh: Uint8Array | undefined;

  /**
   * Decide one file or link from its lstat (`size`... `mode`, or undefined when it is gone): the
   * cached row when git's clean rule holds (same size, mtime, ctime, inode and mode, and both
   * times before the cache was written), else a fresh row over its bytes read now (left in
   * `fresh`). Null when it is gone or no longer a file or a link: the lstat, newer than the
   * directory listing, decides.
   */
  const settle = (abs: string, row: StatRow | undefined, st: StatNumbers | undefined): StatRow | null => {
    fresh = undefined;
    if (st === undefined) return null;
    const { size, mtimeMs, ctimeMs, ino, mode } = st;
    if (
      row !== undefined &&
      row.size === size &&
      row.mtimeMs === mtimeMs &&
      row.ctimeMs === ctimeMs &&
      row.ino === ino &&
      row.mode === mode &&
      mtimeMs < writtenAtMs &&
      ctimeMs < writtenAtMs
    )
      return row;
    const type = mode & S_IFMT;
    if (type !== S_IFREG && type !== S_IFLNK) return null; // replaced by a folder, fifo, socket or device
    const bytes = type === S_IFLNK ? readLink(abs) : readFile(abs);
    if (bytes === null) return null;
    fresh = bytes;
    return { size, mtimeMs, ctimeMs, ino, mode, digest: digestBytes(bytes, hasher) };
  };

  /** Count a freshly read file and queue its blob. */
  const record = (bytes: Uint8Array, row: StatRow): void => {
    hashed++;
    changedRows++;
    if (target !== undefined) {
      pending.push({ kind: "blob", digest: row.digest, bytes });
      pendingBytes += bytes.byteLength;
    }
  };

  // Phase 1, `list`: read every directory, apply the ignore rules, and queue the files to stat
  // (with the row the cache has for each); in a large tree a helper thread starts on them at
  // once. Phase 2, `queue.finish()`: the main thread stats what the helper has not. Phase 3,
  // `build`: compare, read what changed, and encode the trees.
  const queue = new StatQueue();

  /**
   * List one directory. `sameRules`: every `.gitignore` from the root down to here (and the
   * excludes) equals what the cache saw, so a cached file is known not to be ignored.
   * Returns null for a nested repository.
   */
  const list = async (
    abs: string,
    name: string,
    rel: string,
    rules: IgnoreRules,
    sameRules: boolean,
    /** Listed only for the tracked paths under it (an ignored folder, or a nested repository's). */
    onlyTracked = false,
  ): Promise<Listed | null> => {
    let dirents: Dirent[];
    try {
      dirents = readdirSync(abs, { withFileTypes: true });
    } catch (error) {
      if (rel !== "" && isMissing(error)) return null;
      throw ioError(abs, "cannot read directory", error);
    }
    // Node decodes a name that is not UTF-8 with U+FFFD, a path no open() finds again: a file
    // the snapshot would silently lose. Check the raw bytes whenever the replacement appears.
    if (dirents.some((d) => d.name.includes("\uFFFD"))) {
      for (const raw of readdirSync(abs, { encoding: "buffer" })) nameText(raw, rel === "" ? "the root folder" : rel);
    }
    const isTracked = (path: string): boolean => trackedFiles?.has(path) === true;
    const holdsTracked = (path: string): boolean => trackedDirs?.has(path) === true;
    const before = prevDirs.get(rel);
    const prevNames = before?.names ?? NO_NAMES;
    const prevRows = before?.rows ?? NO_STAT_ROWS;
    // An unchanged directory lists its names in the same order as last time, so the next row is
    // almost always the one after the last hit; a name map is built only when that fails.
    let cursor = 0;
    let byName: Map<string, number> | undefined;
    const rowOf = (name: string): StatRow | undefined => {
      if (prevNames[cursor] === name) return prevRows[cursor++];
      if (prevNames.length === 0) return undefined;
      if (byName === undefined) {
        byName = new Map();
        for (let i = 0; i < prevNames.length; i++) byName.set(prevNames[i] as string, i);
      }
      const i = byName.get(name);
      if (i === undefined) return undefined;
      cursor = i + 1;
      return prevRows[i];
    };

    // The .gitignore first: its rules apply to its siblings. Its text is decoded from the very
    // bytes its row was hashed from, so when that row still holds, the cached text is current.
    let gitignore: string | undefined;
    let ignoreRow: StatRow | null | undefined;
    let ignoreBytes: Uint8Array | undefined;
    for (const d of dirents) {
      if (d.name === ".git" && rel !== "" && !onlyTracked) {
        // A nested repository: its content is not this change's, except what this index tracks.
        if (!holdsTracked(rel)) {
          leftOut++;
          return null;
        }
        onlyTracked = true;
      }
      if (useGitignore && d.name === ".gitignore" && d.isFile()) {
        const path = `${abs}/.gitignore`;
        const at = prevNames.indexOf(".gitignore");
        const cachedText = prev?.ignores.get(rel);
        // Without its text the cached row is no use here: read the file afresh.
        ignoreRow = settle(path, at >= 0 && cachedText !== undefined ? prevRows[at] : undefined, lstatOne(path));
        ignoreBytes = fresh;
        if (ignoreRow === null || (ignoreRow.mode & S_IFMT) !== S_IFREG) continue; // gone, or now a link
        gitignore = ignoreBytes === undefined ? cachedText : Buffer.from(ignoreBytes).toString("utf8");
      }
    }
    if (gitignore !== undefined) {
      rules = rules.with(rel, gitignore);
      nextIgnores.set(rel, gitignore);
    }
    sameRules = sameRules && gitignore === prev?.ignores.get(rel);

    if (++visited % 64 === 0) await yieldToLoop();
    const dir: Listed = {
      name,
      rel,
      abs,
      before,
      first: queue.size,
      names: [],
      rows: [],
      subdirs: [],
      ignoreRow,
      ignoreBytes,
    };
    const folders: string[] = [];
    const folderOnlyTracked: boolean[] = [];
    for (const d of dirents) {
      const name = d.name;
      if (name === ".git") continue;
      const childRel = rel === "" ? name : `${rel}/${name}`;
      if (d.isDirectory()) {
        // A folder the cache walked under the same rules was not ignored then and is not now.
        const ignored = onlyTracked || (!(sameRules && prevDirs.has(childRel)) && rules.ignores(childRel, true));
        if (ignored && !holdsTracked(childRel)) {
          leftOut++;
          continue;
        }
        folders.push(name);
        folderOnlyTracked.push(ignored);
        continue;
      }
      if (!d.isSymbolicLink() && !d.isFile()) continue; // sockets, fifos, devices: git does not track them either
      const row = rowOf(name);
      const ignored = onlyTracked || (!(sameRules && row !== undefined) && rules.ignores(childRel, false));
      if (ignored && !isTracked(childRel)) {
        leftOut++;
        continue;
      }
      if (ignoreRow !== undefined && name === ".gitignore") dir.gitignoreAt = dir.names.length; // settled above
      queue.add(`${abs}/${name}`);
      dir.names.push(name);
      dir.rows.push(row);
    }
    // Only now the subfolders, so this folder's paths are one run from `first`.
    for (const [i, name] of folders.entries()) {
      const childRel = rel === "" ? name : `${rel}/${name}`;
      const sub = await list(`${abs}/${name}`, name, childRel, rules, sameRules, folderOnlyTracked[i] === true);
      if (sub !== null) dir.subdirs.push(sub);
    }
    return dir;
  };

  /** Reused for every path: `settle` copies what it keeps. */
  const scratch = { size: 0, mtimeMs: 0, ctimeMs: 0, ino: 0, mode: 0 };
  const statAt = (i: number): StatNumbers | undefined => {
    const status = queue.read(i, scratch);
    if (status === STAT_OK) return scratch;
    if (status === STAT_MISSING) return undefined;
    return lstatOne(queue.path(i)); // reports the error itself (or the path went away meanwhile)
  };

  /** Settle a listed directory's files, build its subtrees, and encode its tree if it changed. */
  const build = async (dir: Listed): Promise<Walked | null> => {
    const { rel, abs, before } = dir;
    const names: string[] = [];
    const rows: StatRow[] = [];
    const entries: TreeEntry[] = [];
    let dirty = false;
    for (const sub of dir.subdirs) {
      const walked = await build(sub);
      if (walked === null) continue;
      if (walked.changed) dirty = true;
      entries.push({ name: sub.name, mode: "040000", digest: walked.tree });
    }
    for (let k = 0; k < dir.names.length; k++) {
      const name = dir.names[k] as string;
      const row = dir.rows[k];
      let next: StatRow | null;
      if (k === dir.gitignoreAt) {
        next = dir.ignoreRow ?? null;
        fresh = dir.ignoreBytes;
      } else next = settle(`${abs}/${name}`, row, statAt(dir.first + k));
      if (next === null) continue;
      if (fresh !== undefined) {
        record(fresh, next);
        if (row === undefined || row.digest !== next.digest || row.mode !== next.mode) dirty = true;
      } else reused++;
      names.push(name);
      rows.push(next);
    }
    files += rows.length;
    if (pendingBytes >= FLUSH_BYTES) await flush();
    // Sync syscalls are much faster than their promise forms for many small files; yield now and
    // then so a host process stays responsive during a large snapshot.
    if (++visited % 64 === 0) await yieldToLoop();

    const count = rows.length + entries.length;
    if (count === 0 && rel !== "") return null;
    let tree: Digest;
    if (!dirty && before !== undefined && before.count === count) {
      // Same names (every file hit the cache, the count matches) and no subtree changed.
      tree = before.tree;
    } else {
      for (let i = 0; i < rows.length; i++) {
        const r = rows[i] as StatRow;
        entries.push({ name: names[i] as string, mode: treeMode(r.mode), digest: r.digest });
      }
      const encoded = encodeTree(entries, hasher);
      tree = encoded.digest;
      if (target !== undefined) pending.push({ kind: "tree", digest: tree, bytes: encoded.bytes });
    }
    nextDirs.set(rel, { tree, count, names, rows });
    return { tree, count, changed: tree !== before?.tree };
  };

  const listed = await list(root, "", "", IgnoreRules.root(excludes), prev !== undefined && prev.rules === rules);
  await queue.finish();
  const top = listed === null ? null : await build(listed);
  const tree = top?.tree ?? encodeTree([], hasher).digest;
  await flush();
  // Removed files count as drift too.
  changedRows += Math.max(0, (prev?.files ?? 0) - reused);
  const data = {
    hasher: hasher.name,
    store: target?.id ?? null,
    rules,
    ignores: nextIgnores,
    dirs: nextDirs,
    files,
  };
  // A path option has no memory between calls: always write. A handle may defer small drift.
  if (cache !== undefined) {
    if (typeof options.statCache === "string") cache.write(data);
    else cache.save(data, changedRows);
  }
  return { tree, files, hashed, stored, leftOut, submodules: tracked?.submodules ?? [] };
}
