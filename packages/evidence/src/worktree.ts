import { type Dirent, lstatSync, readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { EvidenceError } from "./errors.js";
import { type Digest, defaultHasher, digestBytes, type Hasher } from "./hash.js";
import { IgnoreRules } from "./ignore-rules.js";
import { encodeTree, type FileMode, type TreeEntry } from "./objects.js";
import { type DirRow, FileStatCache, type StatCache, type StatCacheData, type StatRow } from "./stat-cache.js";
import type { ObjectStore, StoredObject } from "./store.js";

/** Where a snapshot writes its objects: the object store and the id of the store it belongs to. */
export interface SnapshotTarget {
  readonly id: string;
  readonly objects: ObjectStore;
}

/** Options of {@link snapshotWorktree}. */
export interface SnapshotOptions {
  /** Host-configured excludes in gitignore syntax, relative to the root; a `.gitignore` cannot re-include them. */
  readonly excludes?: readonly string[];
  /** Honour `.gitignore` files (default true). */
  readonly gitignore?: boolean;
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
}

const FLUSH_BYTES = 32 * 1024 * 1024;
const NO_ROWS: ReadonlyMap<string, never> = new Map<string, never>();

function ioError(path: string, what: string, cause: unknown): EvidenceError {
  const code = (cause as NodeJS.ErrnoException)?.code ?? "error";
  return new EvidenceError("ASP_EVIDENCE_IO", `${what} ${path}: ${code}`, { cause, data: { path, errno: code } });
}

const isMissing = (error: unknown): boolean => {
  const code = (error as NodeJS.ErrnoException)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
};

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
  const useGitignore = options.gitignore ?? true;
  const excludes = options.excludes ?? [];
  const target = options.store;
  try {
    if (!statSync(root).isDirectory()) throw Object.assign(new Error("not a directory"), { code: "ENOTDIR" });
  } catch (error) {
    throw ioError(root, "cannot snapshot", error);
  }

  const cache =
    options.statCache === undefined
      ? undefined
      : options.statCache instanceof FileStatCache
        ? options.statCache
        : new FileStatCache(typeof options.statCache === "string" ? options.statCache : options.statCache.path);
  const rules = JSON.stringify({ excludes, gitignore: useGitignore });
  const loaded = cache?.load();
  // Cached ids only prove an object is stored when the cache was written for this very store.
  const prev: StatCacheData | undefined =
    loaded !== undefined && loaded.hasher === hasher.name && (target === undefined || loaded.store === target.id)
      ? loaded
      : undefined;
  const prevRows: ReadonlyMap<string, StatRow> = prev?.rows ?? NO_ROWS;
  const prevDirs: ReadonlyMap<string, DirRow> = prev?.dirs ?? NO_ROWS;
  const writtenAtMs = prev?.writtenAtMs ?? 0;
  const nextRows = new Map<string, StatRow>();
  const nextDirs = new Map<string, DirRow>();
  const nextIgnores = new Map<string, string>();

  let files = 0;
  let hashed = 0;
  let changedRows = 0;
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

  /**
   * Walk one directory. `sameRules`: every `.gitignore` from the root down to here (and the
   * excludes) equals what the cache saw, so a cached file is known not to be ignored.
   * Returns null for a nested repository or a directory with nothing to track.
   */
  const walk = async (abs: string, rel: string, rules: IgnoreRules, sameRules: boolean): Promise<Walked | null> => {
    let dirents: Dirent[];
    try {
      dirents = readdirSync(abs, { withFileTypes: true });
    } catch (error) {
      if (rel !== "" && isMissing(error)) return null;
      throw ioError(abs, "cannot read directory", error);
    }
    let gitignore: string | undefined;
    for (const d of dirents) {
      if (d.name === ".git" && rel !== "") return null;
      if (useGitignore && d.name === ".gitignore" && d.isFile()) {
        try {
          gitignore = readFileSync(`${abs}/.gitignore`, "utf8");
        } catch (error) {
          if (!isMissing(error)) throw ioError(`${abs}/.gitignore`, "cannot read", error);
        }
      }
    }
    if (gitignore !== undefined) {
      rules = rules.with(rel, gitignore);
      nextIgnores.set(rel, gitignore);
    }
    sameRules = sameRules && gitignore === prev?.ignores.get(rel);

    const entries: TreeEntry[] = [];
    let dirty = false;
    for (const d of dirents) {
      const name = d.name;
      if (name === ".git") continue;
      const childRel = rel === "" ? name : `${rel}/${name}`;
      const childAbs = `${abs}/${name}`;
      if (d.isDirectory()) {
        if (rules.ignores(childRel, true)) continue;
        const sub = await walk(childAbs, childRel, rules, sameRules);
        if (sub === null) continue;
        if (sub.changed) dirty = true;
        entries.push({ name, mode: "040000", digest: sub.tree });
        continue;
      }
      const link = d.isSymbolicLink();
      if (!link && !d.isFile()) continue; // sockets, fifos, devices: git does not track them either
      const row = prevRows.get(childRel);
      if (!(sameRules && row !== undefined) && rules.ignores(childRel, false)) continue;
      let st: ReturnType<typeof lstatSync>;
      try {
        st = lstatSync(childAbs);
      } catch (error) {
        if (isMissing(error)) continue;
        throw ioError(childAbs, "cannot stat", error);
      }
      if (st === undefined) continue;
      const mode: FileMode = link ? "120000" : (st.mode & 0o100) !== 0 ? "100755" : "100644";
      let next: StatRow;
      if (
        row !== undefined &&
        row.size === st.size &&
        row.mtimeMs === st.mtimeMs &&
        row.ctimeMs === st.ctimeMs &&
        row.ino === st.ino &&
        row.mode === st.mode &&
        st.mtimeMs < writtenAtMs &&
        st.ctimeMs < writtenAtMs
      ) {
        next = row;
      } else {
        let bytes: Uint8Array;
        try {
          bytes = link ? readlinkSync(childAbs, { encoding: "buffer" }) : readFileSync(childAbs);
        } catch (error) {
          if (isMissing(error)) continue;
          throw ioError(childAbs, "cannot read", error);
        }
        const digest = digestBytes(bytes, hasher);
        hashed++;
        if (target !== undefined) {
          pending.push({ kind: "blob", digest, bytes });
          pendingBytes += bytes.byteLength;
        }
        if (row === undefined || row.digest !== digest || row.mode !== st.mode) dirty = true;
        changedRows++;
        next = { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, mode: st.mode, digest };
      }
      nextRows.set(childRel, next);
      entries.push({ name, mode, digest: next.digest });
      files++;
    }
    if (pendingBytes >= FLUSH_BYTES) await flush();
    // Sync syscalls are much faster than their promise forms for many small files; yield now and
    // then so a host process stays responsive during a large snapshot.
    if (++visited % 64 === 0) await yieldToLoop();

    if (entries.length === 0 && rel !== "") return null;
    const before = prevDirs.get(rel);
    let tree: Digest;
    if (!dirty && before !== undefined && before.count === entries.length) {
      // Same names (every file hit the cache, the count matches) and no subtree changed.
      tree = before.tree;
    } else {
      const encoded = encodeTree(entries, hasher);
      tree = encoded.digest;
      if (target !== undefined) pending.push({ kind: "tree", digest: tree, bytes: encoded.bytes });
    }
    nextDirs.set(rel, { tree, count: entries.length });
    return { tree, count: entries.length, changed: tree !== before?.tree };
  };

  const top = await walk(root, "", IgnoreRules.root(excludes), prev !== undefined && prev.rules === rules);
  const tree = top?.tree ?? encodeTree([], hasher).digest;
  await flush();
  // Removed files count as drift too.
  changedRows += Math.max(0, prevRows.size - (nextRows.size - changedRows));
  const data = {
    hasher: hasher.name,
    store: target?.id ?? null,
    rules,
    ignores: nextIgnores,
    dirs: nextDirs,
    rows: nextRows,
  };
  // A path option has no memory between calls: always write. A handle may defer small drift.
  if (cache !== undefined) {
    if (typeof options.statCache === "string") cache.write(data);
    else cache.save(data, changedRows);
  }
  return { tree, files, hashed, stored };
}
