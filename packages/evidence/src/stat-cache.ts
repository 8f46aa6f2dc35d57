import { readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { EvidenceError } from "./errors.js";
import type { Digest } from "./hash.js";

/** What a stat cache remembers about one file (git's index entry, minus the path). */
export interface StatRow {
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
  readonly ino: number;
  readonly mode: number;
  readonly digest: Digest;
}

/**
 * What it remembers about one non-empty directory: its tree id and entry count, and the rows of
 * the files and links it tracks, `names[i]` owning `rows[i]`, in the order the directory listed
 * them. A re-snapshot walks the same listing in the same order, so it finds each row by position
 * (a string comparison) instead of building the file's path and hashing it into a map.
 */
export interface DirRow {
  readonly tree: Digest;
  readonly count: number;
  readonly names: readonly string[];
  readonly rows: readonly StatRow[];
}

/** The whole cache as one snapshot left it. */
export interface StatCacheData {
  readonly hasher: string;
  /** Id of the store the snapshot wrote every object to, or null. */
  readonly store: string | null;
  /** Excludes and options the rows were filtered with. */
  readonly rules: string;
  /** `.gitignore` text per directory that had one. */
  readonly ignores: ReadonlyMap<string, string>;
  /** Per directory (relative path, "" for the root). */
  readonly dirs: ReadonlyMap<string, DirRow>;
  /** Rows over all directories. */
  readonly files: number;
  /** The cache file's own mtime: rows at or after it are "racily clean" and re-hashed (git's rule). */
  readonly writtenAtMs: number;
}

/**
 * An on-disk stat cache, like git's index: a re-snapshot reads and hashes only files whose
 * (size, mtime, ctime, inode, mode) changed, and re-encodes only directories that changed.
 * Keep one handle for a long-lived process: it also remembers the last state in memory and
 * re-reads the file only when someone else rewrote it.
 */
export interface StatCache {
  /** The cache file. */
  readonly path: string;
  /** Forget the in-memory copy; the next snapshot reads the file. */
  reset(): void;
}

const MAGIC = Buffer.from("ASPSTAT\x03", "latin1");
/** Name length, size, mtime, ctime, inode, mode, digest. */
const ROW_FIXED = 2 + 8 * 4 + 4 + 32;

interface Fingerprint {
  readonly mtimeMs: number;
  readonly size: number;
  readonly ino: number;
}

interface Header {
  hasher: string;
  store: string | null;
  rules: string;
  ignores: Array<[string, string]>;
  /** [path, tree, entry count, rows]; the rows follow the header in this order. */
  dirs: Array<[string, string, number, number]>;
}

/**
 * Format 3: magic, u32 header length, JSON header, then every row as (u16 name length, UTF-8
 * name, f64 size, mtime, ctime, inode, u32 mode, 32 digest bytes), directory by directory.
 */
function decode(buf: Buffer, writtenAtMs: number): StatCacheData | undefined {
  if (buf.length < MAGIC.length + 4 || !buf.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
  let o = MAGIC.length;
  const headerLen = buf.readUInt32LE(o);
  o += 4;
  if (o + headerLen > buf.length) return undefined;
  const header = JSON.parse(buf.toString("utf8", o, o + headerLen)) as Header;
  o += headerLen;
  const dirs = new Map<string, DirRow>();
  let files = 0;
  for (const [path, tree, count, n] of header.dirs) {
    const names: string[] = new Array(n);
    const rows: StatRow[] = new Array(n);
    for (let i = 0; i < n; i++) {
      if (o + ROW_FIXED > buf.length) return undefined;
      const len = buf.readUInt16LE(o);
      o += 2;
      if (o + len + ROW_FIXED - 2 > buf.length) return undefined;
      names[i] = buf.toString("utf8", o, o + len);
      o += len;
      rows[i] = {
        size: buf.readDoubleLE(o),
        mtimeMs: buf.readDoubleLE(o + 8),
        ctimeMs: buf.readDoubleLE(o + 16),
        ino: buf.readDoubleLE(o + 24),
        mode: buf.readUInt32LE(o + 32),
        digest: `sha256:${buf.toString("hex", o + 36, o + 68)}`,
      };
      o += 36 + 32;
    }
    files += n;
    dirs.set(path, { tree: tree as Digest, count, names, rows });
  }
  if (o !== buf.length) return undefined;
  return {
    hasher: header.hasher,
    store: header.store,
    rules: header.rules,
    ignores: new Map(header.ignores),
    dirs,
    files,
    writtenAtMs,
  };
}

function encode(data: Omit<StatCacheData, "writtenAtMs">): Buffer {
  const dirs: Header["dirs"] = [];
  let size = 0;
  for (const [path, d] of data.dirs) {
    // A name is one path segment (at most 255 bytes on every supported system); a longer one
    // would not fit its length field, so that directory's rows are simply not cached.
    let n = d.names.length;
    let bytes = 0;
    for (const name of d.names) {
      const len = Buffer.byteLength(name, "utf8");
      if (len > 0xffff) n = 0;
      bytes += ROW_FIXED + len;
    }
    if (n > 0) size += bytes;
    dirs.push([path, d.tree, d.count, n]);
  }
  const header = Buffer.from(
    JSON.stringify({
      hasher: data.hasher,
      store: data.store,
      rules: data.rules,
      ignores: [...data.ignores],
      dirs,
    } satisfies Header),
    "utf8",
  );
  const buf = Buffer.allocUnsafe(MAGIC.length + 4 + header.length + size);
  let o = MAGIC.copy(buf, 0);
  o = buf.writeUInt32LE(header.length, o);
  o += header.copy(buf, o);
  let i = 0;
  for (const d of data.dirs.values()) {
    const n = (dirs[i++] as Header["dirs"][number])[3];
    for (let k = 0; k < n; k++) {
      const len = buf.write(d.names[k] as string, o + 2, "utf8");
      buf.writeUInt16LE(len, o);
      o += 2 + len;
      const r = d.rows[k] as StatRow;
      o = buf.writeDoubleLE(r.size, o);
      o = buf.writeDoubleLE(r.mtimeMs, o);
      o = buf.writeDoubleLE(r.ctimeMs, o);
      o = buf.writeDoubleLE(r.ino, o);
      o = buf.writeUInt32LE(r.mode, o);
      o += buf.write(r.digest.slice(7), o, "hex");
    }
  }
  return buf.subarray(0, o);
}

/** The implementation behind {@link createStatCache}; internal to the package. */
export class FileStatCache implements StatCache {
  readonly path: string;
  #memo: { data: StatCacheData; file: Fingerprint } | undefined;
  /** Rows changed since the file was last written (kept in memory only). */
  #drift = 0;

  constructor(path: string) {
    this.path = resolve(path);
  }

  reset(): void {
    this.#memo = undefined;
    this.#drift = 0;
  }

  /** The cache as last written, or undefined when missing, damaged or of another format. */
  load(): StatCacheData | undefined {
    let st: Fingerprint;
    try {
      st = statSync(this.path);
    } catch {
      this.#memo = undefined;
      this.#drift = 0;
      return undefined;
    }
    const memo = this.#memo;
    if (memo && memo.file.mtimeMs === st.mtimeMs && memo.file.size === st.size && memo.file.ino === st.ino)
      return memo.data;
    this.#drift = 0;
    try {
      const data = decode(readFileSync(this.path), st.mtimeMs);
      this.#memo = data && { data, file: { mtimeMs: st.mtimeMs, size: st.size, ino: st.ino } };
      return data;
    } catch {
      this.#memo = undefined;
      return undefined;
    }
  }

  /**
   * Record the state a snapshot saw. `changed` rows differ from what was loaded. While the
   * drift from the file stays small (at most 1/64 of the rows, and the store and rules are the
   * same) only the in-memory copy is updated: the file still describes an older state, so a
   * process that reads it merely re-hashes those few files (as git skips rewriting its index).
   */
  save(data: Omit<StatCacheData, "writtenAtMs">, changed: number): void {
    const memo = this.#memo;
    if (
      memo !== undefined &&
      memo.data.store === data.store &&
      memo.data.rules === data.rules &&
      memo.data.hasher === data.hasher &&
      (this.#drift + changed) * 64 <= data.files
    ) {
      this.#drift += changed;
      this.#memo = { data: { ...data, writtenAtMs: memo.data.writtenAtMs }, file: memo.file };
      return;
    }
    this.write(data);
  }

  /** Write atomically (temp file + rename) and remember what was written. */
  write(data: Omit<StatCacheData, "writtenAtMs">): void {
    const tmp = `${this.path}.${process.pid}.tmp`;
    try {
      writeFileSync(tmp, encode(data));
      renameSync(tmp, this.path);
      const st = statSync(this.path);
      this.#memo = {
        data: { ...data, writtenAtMs: st.mtimeMs },
        file: { mtimeMs: st.mtimeMs, size: st.size, ino: st.ino },
      };
      this.#drift = 0;
    } catch (cause) {
      this.#memo = undefined;
      this.#drift = 0;
      const code = (cause as NodeJS.ErrnoException)?.code ?? "error";
      throw new EvidenceError("ASP_EVIDENCE_IO", `cannot write the stat cache ${this.path}: ${code}`, {
        cause,
        data: { path: this.path, errno: code },
      });
    }
  }
}

/**
 * A stat cache handle for `snapshotWorktree({ statCache })`. The file is created on the first
 * snapshot; a missing or damaged file just means a full re-read.
 *
 * @example
 * ```ts
 * const cache = createStatCache("./.asp/stat-cache");
 * await snapshotWorktree(".", { statCache: cache }); // reads every file
 * await snapshotWorktree(".", { statCache: cache }); // reads only what changed
 * ```
 */
export function createStatCache(path: string): StatCache {
  return new FileStatCache(path);
}
