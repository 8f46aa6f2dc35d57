import { Level } from "level";
import { EvidenceError } from "./errors.js";
import { type WaitProgress, waitForLock } from "./lock.js";

/**
 * The storage seam under the object store and the fact log: named keyspaces with string keys and
 * byte values, atomic multi-space batches, ordered iteration. The public seams are `ObjectStore`
 * and `FactLog`; this is what lets both run on level, in memory or on a shared database (a store
 * backend such as `@asp/store-postgres` implements a Kv and reuses `createKvFactLog` and
 * `createKvObjectStore`, so every backend writes the same chain format and digests).
 */
export type Space = "meta" | "log" | "blob" | "tree" | "digest" | "idx" | "state";

/** Every {@link Space}, in a fixed order. */
export const SPACES: readonly Space[] = ["meta", "log", "blob", "tree", "digest", "idx", "state"];

/** One write of a {@link Kv.batch}: put `value` at (`space`, `key`), or delete it. */
export interface KvOp {
  readonly type: "put" | "del";
  readonly space: Space;
  readonly key: string;
  readonly value?: Uint8Array;
}

/** Bounds of an ordered {@link Kv.entries} walk (keys compare as UTF-8 bytes). */
export interface KvRange {
  readonly gt?: string;
  readonly gte?: string;
  readonly lt?: string;
  readonly lte?: string;
  readonly reverse?: boolean;
  readonly limit?: number;
}

/**
 * The storage seam a store backend implements (see {@link Space}). Methods of a closed Kv throw
 * `ASP_EVIDENCE_STORE_CLOSED`.
 */
export interface Kv {
  /** Absolute directory of a level store, `memory:` for the in-memory one. */
  readonly location: string;
  get(space: Space, key: string): Promise<Uint8Array | undefined>;
  hasMany(space: Space, keys: readonly string[]): Promise<boolean[]>;
  /** All ops commit or none; with `sync` it resolves only after the write is on disk. */
  batch(ops: readonly KvOp[], sync: boolean): Promise<void>;
  entries(space: Space, range?: KvRange): AsyncIterable<[string, Uint8Array]>;
  /** Keys only, in order (cheaper than {@link entries} when the values are not needed). */
  keys(space: Space, range?: KvRange): AsyncIterable<string>;
  clear(space: Space): Promise<void>;
  /** True when the database holds any key at all, in any space or outside them. */
  hasAnyKey(): Promise<boolean>;
  close(): Promise<void>;
}

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
  const kv: Kv = {
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
    async *keys(s, range = {}) {
      for await (const [k] of kv.entries(s, range)) yield k;
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
  return kv;
}

type Db = Level<string, Uint8Array>;
type Sub = ReturnType<Db["sublevel"]>;

function codeOf(error: unknown): string | undefined {
  const e = error as { code?: unknown; cause?: { code?: unknown } } | null;
  const cause = e?.cause?.code;
  if (typeof cause === "string") return cause;
  return typeof e?.code === "string" ? e.code : undefined;
}

/** Options of {@link openLevelKv}. */
export interface LevelKvOptions {
  /** Create the database when it does not exist (a new or unborn store only). */
  readonly create: boolean;
  /** How long to wait for a store another process holds (ms); 0 fails at once. */
  readonly waitMs: number;
  readonly onWait?: ((progress: WaitProgress) => void) | undefined;
  /** The path errors and `location` name, when the database is a private copy of that store. */
  readonly label?: string;
  /** Runs right before each open attempt (a check that must see the files before level does). */
  readonly beforeAttempt?: () => Promise<void>;
}

function corruptOpen(location: string, error: unknown): EvidenceError {
  const code = codeOf(error);
  const detail = (error as { cause?: { message?: unknown } } | null)?.cause?.message;
  return new EvidenceError(
    "ASP_EVIDENCE_STORE_CORRUPT",
    `the evidence store at ${location} cannot be opened (${code ?? "unknown error"}${typeof detail === "string" ? `: ${detail}` : ""})`,
    {
      cause: error,
      data: {
        path: location,
        levelCode: code ?? null,
        reason: `the database does not open${typeof detail === "string" ? ` (${detail})` : ""}`,
      },
    },
  );
}

/**
 * Open the level database at `location` (an absolute path the caller classified with
 * `inspectDir`). While another process holds it, wait up to `waitMs`.
 *
 * @throws EvidenceError `ASP_EVIDENCE_STORE_LOCKED` (with the holder's pid) once the wait runs
 *   out, `ASP_EVIDENCE_STORE_CORRUPT` when level refuses the database.
 */
export async function openLevelKv(dbDir: string, options: LevelKvOptions): Promise<Kv> {
  const location = options.label ?? dbDir;
  const db = await waitForLock(
    dbDir,
    async () => {
      await options.beforeAttempt?.();
      const candidate: Db = new Level<string, Uint8Array>(dbDir, {
        keyEncoding: "utf8",
        valueEncoding: "view",
        createIfMissing: options.create,
        errorIfExists: false,
      });
      try {
        await candidate.open();
        return candidate;
      } catch (error) {
        if (codeOf(error) === "LEVEL_LOCKED") return "locked" as const;
        throw corruptOpen(location, error);
      }
    },
    options.waitMs,
    options.onWait,
  );
  return levelKv(location, db);
}

/**
 * LevelDB's own repair (`RepairDB`: rebuild the manifest from every table and log it can read).
 * Only ever run on a private copy of a store, never on the store itself.
 */
export async function repairLevel(location: string): Promise<void> {
  await (Level as unknown as { repair(location: string): Promise<void> }).repair(location);
}

function levelRange(range: KvRange): Record<string, unknown> {
  const opts: Record<string, unknown> = {};
  for (const k of ["gt", "gte", "lt", "lte", "reverse", "limit"] as const)
    if (range[k] !== undefined) opts[k] = range[k];
  return opts;
}

function levelKv(location: string, db: Db): Kv {
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
      const code = codeOf(error);
      // Reads hit a damaged or cut table file: level says CORRUPTION or IO_ERROR (e.g. a table
      // shorter than its footer). Both are damage to the store, never a value to go on with.
      if (code === "LEVEL_CORRUPTION" || code === "LEVEL_IO_ERROR") {
        const detail = (error as { cause?: { message?: unknown }; message?: unknown }).cause?.message;
        const why = `level could not read the database (${String(detail ?? (error as Error).message)})`;
        throw new EvidenceError("ASP_EVIDENCE_STORE_CORRUPT", `the evidence store at ${location} is damaged: ${why}`, {
          cause: error,
          data: { path: location, reason: why, levelCode: code },
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
      const it = sub(s).iterator(levelRange(range));
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
    async *keys(s, range = {}) {
      const it = sub(s).keys(levelRange(range));
      try {
        for (;;) {
          const batch = (await wrap(() => it.nextv(1000))) as string[];
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
