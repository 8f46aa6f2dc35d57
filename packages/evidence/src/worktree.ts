import {
  type Dirent,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { resolve } from "node:path";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { EvidenceError } from "./errors.js";
import { type Digest, defaultHasher, digestBytes, type Hasher, isDigest } from "./hash.js";
import { IgnoreRules } from "./ignore-rules.js";
import { encodeTree, type FileMode, type TreeEntry } from "./objects.js";
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
   * Path of an on-disk stat cache (size, mtime, ctime, inode, mode per file), like git's index:
   * a re-snapshot reads and hashes only files whose stat changed. Created when missing; a
   * damaged cache is ignored and rewritten.
   */
  readonly statCache?: string;
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

/** One stat cache row: size, mtimeMs, ctimeMs, ino, st_mode, digest. */
type CacheRow = [number, number, number, number, number, Digest];

interface CacheFile {
  v: 1;
  hasher: string;
  store: string | null;
  entries: Record<string, CacheRow>;
}

interface LoadedCache {
  readonly rows: Map<string, CacheRow>;
  /** The cache file's own mtime: entries at or after it are "racily clean" and re-hashed (git's rule). */
  readonly writtenAtMs: number;
  readonly store: string | null;
}

const FLUSH_BYTES = 32 * 1024 * 1024;

function loadCache(path: string, hasher: Hasher): LoadedCache | undefined {
  try {
    const writtenAtMs = statSync(path).mtimeMs;
    const parsed = JSON.parse(readFileSync(path, "utf8")) as CacheFile;
    if (
      parsed?.v !== 1 ||
      parsed.hasher !== hasher.name ||
      typeof parsed.entries !== "object" ||
      parsed.entries === null
    )
      return undefined;
    const rows = new Map<string, CacheRow>();
    for (const [k, row] of Object.entries(parsed.entries)) {
      if (Array.isArray(row) && row.length === 6 && isDigest(row[5])) rows.set(k, row);
    }
    return { rows, writtenAtMs, store: typeof parsed.store === "string" ? parsed.store : null };
  } catch {
    return undefined;
  }
}

function saveCache(path: string, file: CacheFile): void {
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, JSON.stringify(file));
    renameSync(tmp, path);
  } catch (error) {
    throw ioError(path, "cannot write the stat cache", error);
  }
}

function ioError(path: string, what: string, cause: unknown): EvidenceError {
  const code = (cause as NodeJS.ErrnoException)?.code ?? "error";
  return new EvidenceError("ASP_EVIDENCE_IO", `${what} ${path}: ${code}`, { cause, data: { path, errno: code } });
}

const isMissing = (error: unknown): boolean => {
  const code = (error as NodeJS.ErrnoException)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
};

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
 * const { tree } = await snapshotWorktree("./repo", { excludes: [".asp/"], store, statCache: "./.asp/stat-cache.json" });
 * ```
 */
export async function snapshotWorktree(dir: string, options: SnapshotOptions = {}): Promise<WorktreeSnapshot> {
  const root = resolve(dir);
  const hasher = options.hasher ?? defaultHasher();
  const useGitignore = options.gitignore ?? true;
  const target = options.store;
  try {
    if (!statSync(root).isDirectory()) throw new Error("ENOTDIR");
  } catch (error) {
    throw ioError(root, "cannot snapshot", error);
  }

  const cache = options.statCache === undefined ? undefined : loadCache(options.statCache, hasher);
  // Cached digests only prove an object is stored when the cache was written for this store.
  const cacheStored = cache !== undefined && target !== undefined && cache.store === target.id;
  const trusted = cache !== undefined && (target === undefined || cacheStored) ? cache : undefined;
  const nextRows: Record<string, CacheRow> = {};
  let files = 0;
  let hashed = 0;
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

  const hashObject = (kind: "blob", bytes: Uint8Array): Digest => {
    const d = digestBytes(bytes, hasher);
    if (target !== undefined) {
      pending.push({ kind, digest: d, bytes });
      pendingBytes += bytes.byteLength;
    }
    return d;
  };

  /** Returns the directory's entries, or null when it must be left out (nested repository). */
  const walk = async (abs: string, rel: string, rules: IgnoreRules): Promise<TreeEntry[] | null> => {
    let dirents: Dirent[];
    try {
      dirents = readdirSync(abs, { withFileTypes: true });
    } catch (error) {
      if (rel !== "" && isMissing(error)) return [];
      throw ioError(abs, "cannot read directory", error);
    }
    if (rel !== "" && dirents.some((d) => d.name === ".git")) return null;
    if (useGitignore && dirents.some((d) => d.name === ".gitignore" && d.isFile())) {
      try {
        rules = rules.with(rel, readFileSync(`${abs}/.gitignore`, "utf8"));
      } catch (error) {
        if (!isMissing(error)) throw ioError(`${abs}/.gitignore`, "cannot read", error);
      }
    }
    const entries: TreeEntry[] = [];
    for (const d of dirents) {
      const name = d.name;
      if (name === ".git") continue;
      const childRel = rel === "" ? name : `${rel}/${name}`;
      const childAbs = `${abs}/${name}`;
      if (d.isDirectory()) {
        if (rules.ignores(childRel, true)) continue;
        const sub = await walk(childAbs, childRel, rules);
        if (sub === null || sub.length === 0) continue;
        const tree = encodeTree(sub, hasher);
        if (target !== undefined) pending.push({ kind: "tree", digest: tree.digest, bytes: tree.bytes });
        entries.push({ name, mode: "040000", digest: tree.digest });
        continue;
      }
      const link = d.isSymbolicLink();
      if (!link && !d.isFile()) continue; // sockets, fifos, devices: git does not track them either
      if (rules.ignores(childRel, false)) continue;
      let st: ReturnType<typeof lstatSync>;
      try {
        st = lstatSync(childAbs);
      } catch (error) {
        if (isMissing(error)) continue;
        throw ioError(childAbs, "cannot stat", error);
      }
      if (st === undefined) continue;
      const mode: FileMode = link ? "120000" : (st.mode & 0o100) !== 0 ? "100755" : "100644";
      const row = trusted?.rows.get(childRel);
      let digest: Digest;
      if (
        row !== undefined &&
        row[0] === st.size &&
        row[1] === st.mtimeMs &&
        row[2] === st.ctimeMs &&
        row[3] === st.ino &&
        row[4] === st.mode &&
        trusted !== undefined &&
        st.mtimeMs < trusted.writtenAtMs &&
        st.ctimeMs < trusted.writtenAtMs
      ) {
        digest = row[5];
      } else {
        let bytes: Uint8Array;
        try {
          bytes = link ? readlinkSync(childAbs, { encoding: "buffer" }) : readFileSync(childAbs);
        } catch (error) {
          if (isMissing(error)) continue;
          throw ioError(childAbs, "cannot read", error);
        }
        digest = hashObject("blob", bytes);
        hashed++;
      }
      nextRows[childRel] = [st.size, st.mtimeMs, st.ctimeMs, st.ino, st.mode, digest];
      entries.push({ name, mode, digest });
      files++;
    }
    if (pendingBytes >= FLUSH_BYTES) await flush();
    // Sync syscalls are much faster than their promise forms for many small files; yield now and
    // then so a host process stays responsive during a large snapshot.
    if (++visited % 64 === 0) await yieldToLoop();
    return entries;
  };

  const rootEntries = (await walk(root, "", IgnoreRules.root(options.excludes ?? []))) ?? [];
  const rootTree = encodeTree(rootEntries, hasher);
  if (target !== undefined) pending.push({ kind: "tree", digest: rootTree.digest, bytes: rootTree.bytes });
  await flush();
  if (options.statCache !== undefined) {
    saveCache(options.statCache, { v: 1, hasher: hasher.name, store: target?.id ?? null, entries: nextRows });
  }
  return { tree: rootTree.digest, files, hashed, stored };
}
