import { mkdir, open as openFile, readdir, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { Level } from "level";
import { EvidenceError } from "./errors.js";

/**
 * The storage seam under the object store and the fact log: named keyspaces with string keys and
 * byte values, atomic multi-space batches, ordered iteration. Internal: the public seams are
 * `ObjectStore` and `FactLog`; this is what lets both run on level or in memory with one logic.
 */
export type Space = "meta" | "log" | "blob" | "tree" | "digest" | "idx" | "state";

export const SPACES: readonly Space[] = ["meta", "log", "blob", "tree", "digest", "idx", "state"];

export interface KvOp {
  readonly type: "put" | "del";
  readonly space: Space;
  readonly key: string;
  readonly value?: Uint8Array;
}

export interface KvRange {
  readonly gt?: string;
  readonly gte?: string;
  readonly lt?: string;
  readonly lte?: string;
  readonly reverse?: boolean;
  readonly limit?: number;
}

export interface Kv {
  /** Absolute directory of a level store, `memory:` for the in-memory one. */
  readonly location: string;
  get(space: Space, key: string): Promise<Uint8Array | undefined>;
  hasMany(space: Space, keys: readonly string[]): Promise<boolean[]>;
  /** All ops commit or none; with `sync` it resolves only after the write is on disk. */
  batch(ops: readonly KvOp[], sync: boolean): Promise<void>;
  entries(space: Space, range?: KvRange): AsyncIterable<[string, Uint8Array]>;
  clear(space: Space): Promise<void>;
  /** True when the database holds any key at all, in any space or outside them. */
  hasAnyKey(): Promise<boolean>;
  close(): Promise<void>;
}

/** The file that marks a directory as an evidence store (written before the database). */
export const MARKER_FILE = "ASP-EVIDENCE-STORE.json";
/** Store format this code writes and reads. */
export const STORE_FORMAT = "@asp/evidence-store";
export const STORE_VERSION = 1;

const utf8 = new TextEncoder();
const EMPTY = new Uint8Array();
export const toBytes = (s: string): Uint8Array => utf8.encode(s);
export const toText = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("utf8");

function closedError(location: string): EvidenceError {
  return new EvidenceError("ASP_EVIDENCE_STORE_CLOSED", `the evidence store at ${location} is closed`, {
    data: { path: location },
  });
}

/** The in-memory Kv: sorted maps, copies on the way in and out so callers cannot alias stored bytes. */
export function createMemoryKv(): Kv {
  const spaces = new Map<Space, Map<string, Uint8Array>>(SPACES.map((s) => [s, new Map()]));
  let closed = false;
  const space = (s: Space): Map<string, Uint8Array> => {
    if (closed) throw closedError("memory:");
    return spaces.get(s) as Map<string, Uint8Array>;
  };
  return {
    location: "memory:",
    async get(s, key) {
      const v = space(s).get(key);
      return v === undefined ? undefined : v.slice();
    },
    async hasMany(s, keys) {
      const m = space(s);
      return keys.map((k) => m.has(k));
    },
    async batch(ops) {
      for (const op of ops) space(op.space);
      for (const op of ops) {
        const m = space(op.space);
        if (op.type === "put") m.set(op.key, (op.value ?? new Uint8Array()).slice());
        else m.delete(op.key);
      }
    },
    async *entries(s, range = {}) {
      const m = space(s);
      const keys = [...m.keys()]
        .filter(
          (k) =>
            (range.gt === undefined || k > range.gt) &&
            (range.gte === undefined || k >= range.gte) &&
            (range.lt === undefined || k < range.lt) &&
            (range.lte === undefined || k <= range.lte),
        )
        .sort();
      if (range.reverse) keys.reverse();
      const limited = range.limit === undefined ? keys : keys.slice(0, range.limit);
      for (const k of limited) {
        const v = m.get(k);
        if (v !== undefined) yield [k, v.slice()];
      }
    },
    async clear(s) {
      space(s).clear();
    },
    async hasAnyKey() {
      return SPACES.some((s) => space(s).size > 0);
    },
    async close() {
      closed = true;
    },
  };
}

type Db = Level<string, Uint8Array>;
type Sub = ReturnType<Db["sublevel"]>;

async function dirEntries(dir: string): Promise<string[] | undefined> {
  try {
    return await readdir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ENOTDIR") {
      throw new EvidenceError("ASP_EVIDENCE_NOT_A_STORE", `${dir} is a file, not an evidence store directory`, {
        data: { path: dir },
      });
    }
    throw new EvidenceError("ASP_EVIDENCE_IO", `cannot read ${dir}: ${code ?? "error"}`, {
      cause: error,
      data: { path: dir },
    });
  }
}

async function writeMarker(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const fh = await openFile(join(dir, MARKER_FILE), "wx");
  try {
    await fh.writeFile(`${JSON.stringify({ format: STORE_FORMAT, version: STORE_VERSION })}\n`);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function checkMarker(dir: string): Promise<void> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(join(dir, MARKER_FILE), "utf8"));
  } catch (cause) {
    throw new EvidenceError("ASP_EVIDENCE_STORE_CORRUPT", `the store marker ${MARKER_FILE} in ${dir} is unreadable`, {
      cause,
      data: { path: dir },
    });
  }
  const m = parsed as { format?: unknown; version?: unknown } | null;
  if (m === null || typeof m !== "object" || m.format !== STORE_FORMAT || typeof m.version !== "number") {
    throw new EvidenceError(
      "ASP_EVIDENCE_NOT_A_STORE",
      `${dir} has a ${MARKER_FILE} that is not an evidence store marker`,
      {
        data: { path: dir },
      },
    );
  }
  if (m.version > STORE_VERSION) {
    throw new EvidenceError(
      "ASP_EVIDENCE_UNSUPPORTED_FORMAT",
      `the evidence store at ${dir} has format version ${m.version}; this build reads up to ${STORE_VERSION}: upgrade @asp/evidence`,
      { data: { path: dir, version: m.version } },
    );
  }
}

/**
 * Check LevelDB's CURRENT -> MANIFEST pointer before LevelDB sees the directory, so a store
 * whose pointer is gone or garbage is refused without LevelDB touching any file in it.
 */
async function checkCurrent(dir: string, entries: readonly string[]): Promise<void> {
  const corrupt = (why: string, cause?: unknown): never => {
    throw new EvidenceError(
      "ASP_EVIDENCE_STORE_CORRUPT",
      `the evidence store at ${dir} is damaged (${why}); it was left untouched`,
      {
        ...(cause === undefined ? {} : { cause }),
        data: { path: dir, reason: why },
      },
    );
  };
  if (!entries.includes("CURRENT")) corrupt("CURRENT is missing");
  let current = "";
  try {
    current = await readFile(join(dir, "CURRENT"), "utf8");
  } catch (cause) {
    corrupt("CURRENT is unreadable", cause);
  }
  const m = /^(MANIFEST-\d+)\n$/.exec(current);
  if (m === null) corrupt("CURRENT does not name a manifest");
  else if (!entries.includes(m[1] as string)) corrupt(`${m[1]} is missing`);
}

function codeOf(error: unknown): string | undefined {
  const e = error as { code?: unknown; cause?: { code?: unknown } } | null;
  const cause = e?.cause?.code;
  if (typeof cause === "string") return cause;
  return typeof e?.code === "string" ? e.code : undefined;
}

/**
 * Open (or create) the level database at `dir`. A missing or empty directory becomes a new store
 * (marker file first, then the database). A non-empty directory must carry the marker; it is
 * never re-created or truncated.
 */
export async function openLevelKv(dir: string): Promise<Kv> {
  const location = resolve(dir);
  const entries = await dirEntries(location);
  let create = false;
  if (entries === undefined || entries.length === 0) {
    await writeMarker(location);
    create = true;
  } else if (!entries.includes(MARKER_FILE)) {
    throw new EvidenceError(
      "ASP_EVIDENCE_NOT_A_STORE",
      `${location} is not empty and is not an evidence store (no ${MARKER_FILE}); refusing to open it. Point the store at an empty or new directory`,
      { data: { path: location } },
    );
  } else {
    await checkMarker(location);
    // Only our marker: a creation that was interrupted before the database existed.
    create = entries.length === 1;
    if (!create) await checkCurrent(location, entries);
  }
  const db: Db = new Level<string, Uint8Array>(location, {
    keyEncoding: "utf8",
    valueEncoding: "view",
    createIfMissing: create,
    errorIfExists: false,
  });
  try {
    await db.open();
  } catch (error) {
    const code = codeOf(error);
    if (code === "LEVEL_LOCKED") {
      throw new EvidenceError(
        "ASP_EVIDENCE_STORE_LOCKED",
        `the evidence store at ${location} is locked by another process (or another open handle); close it first`,
        { cause: error, data: { path: location } },
      );
    }
    throw new EvidenceError(
      "ASP_EVIDENCE_STORE_CORRUPT",
      `the evidence store at ${location} cannot be opened (${code ?? "unknown error"}); it was left untouched`,
      { cause: error, data: { path: location, levelCode: code ?? null } },
    );
  }
  const subs = new Map<Space, Sub>();
  for (const s of SPACES) {
    subs.set(s, db.sublevel<string, Uint8Array>(s, { keyEncoding: "utf8", valueEncoding: "view" }) as unknown as Sub);
  }
  let closed = false;
  const sub = (s: Space): Sub => {
    if (closed) throw closedError(location);
    return subs.get(s) as Sub;
  };
  const wrap = async <T>(p: () => Promise<T>): Promise<T> => {
    try {
      return await p();
    } catch (error) {
      if (closed) throw closedError(location);
      if (codeOf(error) === "LEVEL_CORRUPTION") {
        throw new EvidenceError("ASP_EVIDENCE_STORE_CORRUPT", `the evidence store at ${location} reported corruption`, {
          cause: error,
          data: { path: location },
        });
      }
      throw error;
    }
  };
  return {
    location,
    get: (s, key) => wrap(async () => (await sub(s).get(key)) as Uint8Array | undefined),
    hasMany: (s, keys) => wrap(() => sub(s).hasMany([...keys])),
    batch: (ops, sync) =>
      wrap(() => {
        if (closed) throw closedError(location);
        // A chained batch on the root with sublevel-prefixed keys (the bytes `sublevel` writes):
        // per-op sublevel routing and array-batch cloning cost more than the rest of a small
        // synced append.
        const batch = db.batch();
        for (const op of ops) {
          if (op.type === "put") batch.put(`!${op.space}!${op.key}`, op.value ?? EMPTY);
          else batch.del(`!${op.space}!${op.key}`);
        }
        return batch.write({ sync });
      }),
    async *entries(s, range = {}) {
      const opts: Record<string, unknown> = {};
      for (const k of ["gt", "gte", "lt", "lte", "reverse", "limit"] as const)
        if (range[k] !== undefined) opts[k] = range[k];
      const it = sub(s).iterator(opts);
      try {
        for (;;) {
          const batch = (await wrap(() => it.nextv(1000))) as Array<[string, Uint8Array]>;
          if (batch.length === 0) break;
          yield* batch;
        }
      } finally {
        await it.close();
      }
    },
    clear: (s) => wrap(() => sub(s).clear()),
    hasAnyKey: () =>
      wrap(async () => {
        if (closed) throw closedError(location);
        const it = db.keys({ limit: 1 });
        try {
          return (await it.next()) !== undefined;
        } finally {
          await it.close();
        }
      }),
    async close() {
      if (closed) return;
      closed = true;
      await db.close();
    },
  };
}
