import type { JsonValue } from "./canonical.js";
import type { Digest, Hasher } from "./hash.js";
import type { WaitProgress } from "./lock.js";
import type { Tree, TreeEntry } from "./objects.js";

/** Object kinds the {@link ObjectStore} keeps apart. */
export type ObjectKind = "blob" | "tree";

/** An object with its id and the exact bytes the id covers (what {@link ObjectStore.putMany} takes). */
export interface StoredObject {
  readonly kind: ObjectKind;
  readonly digest: Digest;
  readonly bytes: Uint8Array;
}

/**
 * Content-addressed blobs and trees (DI token `TOKENS.ObjectStore`). Writes are deduplicated by
 * id; every read re-hashes and fails closed, so a corrupted object is never returned.
 */
export interface ObjectStore {
  /** Store a blob; returns its id. Not synced by itself: the next synced fact log append makes it durable. */
  putBlob(bytes: Uint8Array): Promise<Digest>;
  /**
   * Store a tree; returns its id.
   * @throws EvidenceError `ASP_EVIDENCE_BAD_PATH`, `ASP_EVIDENCE_BAD_OBJECT`, `ASP_EVIDENCE_BAD_DIGEST` for bad entries.
   */
  putTree(entries: readonly TreeEntry[]): Promise<Digest>;
  /**
   * Store many objects in one batch, skipping those already present; returns how many were written.
   * @throws EvidenceError `ASP_EVIDENCE_INTEGRITY` when an object's bytes do not hash to its digest (nothing is written).
   */
  putMany(objects: readonly StoredObject[]): Promise<number>;
  /** True when the object is present (not verified). */
  has(kind: ObjectKind, digest: Digest): Promise<boolean>;
  /**
   * The blob's bytes, verified against its id.
   * @throws EvidenceError `ASP_EVIDENCE_NOT_FOUND`, `ASP_EVIDENCE_INTEGRITY`, `ASP_EVIDENCE_BAD_DIGEST`.
   */
  readBlob(digest: Digest): Promise<Uint8Array>;
  /**
   * The decoded tree, verified against its id.
   * @throws EvidenceError `ASP_EVIDENCE_NOT_FOUND`, `ASP_EVIDENCE_INTEGRITY`, `ASP_EVIDENCE_BAD_DIGEST`.
   */
  readTree(digest: Digest): Promise<Tree>;
}

/** A secondary index key of a fact: list facts by (name, value) later. */
export interface FactIndexKey {
  readonly name: string;
  readonly value: string;
}

/** What a caller appends. */
export interface FactInput {
  /** What the fact is, e.g. `rollout.selection` (1–128 of `A-Za-z0-9._:/-`, starting alphanumeric). */
  readonly kind: string;
  /** Any JSON value with a canonical form (see `canonicalize`). */
  readonly record: unknown;
  /** Secondary index keys (names like kinds; values up to 1024 chars, no NUL). */
  readonly index?: readonly FactIndexKey[];
  /** State keys this fact becomes the latest for (read back with {@link FactLog.latest}). */
  readonly state?: readonly string[];
}

/**
 * One precondition of a conditional append: the latest entry that named `key` in its `state`
 * must have exactly `seq`; `null` means no entry ever named `key`.
 */
export interface AppendCondition {
  /** A state key, as in {@link FactInput.state}. */
  readonly key: string;
  /** The seq the caller read for `key` (e.g. with {@link FactLog.latestSeq}), or `null` for none. */
  readonly seq: number | null;
}

/** Options of {@link FactLog.append}. */
export interface AppendOptions {
  /**
   * Commit only if every condition still holds when the batch is committed: checked inside the
   * same serialized step that assigns the seqs (on a shared store, inside the transaction that
   * holds the chain's write lock), after every call committed before it in the same group commit.
   * One state key at most once. When any fails, nothing of this call is written and it throws
   * `ASP_EVIDENCE_CONDITION_FAILED`; other calls are not affected.
   */
  readonly expect?: readonly AppendCondition[];
}

/** One committed, verified fact. `digest` covers every other field. */
export interface FactEntry {
  /** 1, 2, 3 ... without gaps. */
  readonly seq: number;
  readonly kind: string;
  readonly record: JsonValue;
  /** ISO 8601 time from the store's clock when it was appended. */
  readonly at: string;
  readonly index: readonly FactIndexKey[];
  readonly state: readonly string[];
  /** Digest of the previous entry; `null` for seq 1. */
  readonly prev: Digest | null;
  readonly digest: Digest;
}

/** The last entry of the log. */
export interface FactLogHead {
  readonly seq: number;
  readonly digest: Digest;
}

/** Filters for {@link FactLog.list}; `kind` and `index` are exclusive ways in, ordered by seq. */
export interface FactQuery {
  readonly kind?: string;
  readonly index?: FactIndexKey;
  /** Only entries with a larger seq (smaller when `reverse`). */
  readonly afterSeq?: number;
  readonly limit?: number;
  readonly reverse?: boolean;
}

/**
 * Outcome of {@link FactLog.verify}: either the whole chain holds (and reaches the anchored head
 * and the expected head, when there are ones), or the first bad seq and why.
 */
export type VerifyResult =
  | {
      readonly ok: true;
      readonly entries: number;
      readonly head: FactLogHead | null;
      /** The anchored head the chain was proven to reach (`null` in memory or for an empty log). */
      readonly anchored?: FactLogHead | null;
    }
  | { readonly ok: false; readonly entries: number; readonly seq: number; readonly reason: string };

/** Options of {@link FactLog.verify}. */
export interface VerifyOptions {
  /**
   * A head recorded elsewhere earlier (a CI log, a checkpoint): the chain must pass through it,
   * i.e. hold an entry at its seq with its digest. A store deleted and rebuilt, or a chain that
   * restarted, fails this even when its own chain verifies.
   */
  readonly expectHead?: FactLogHead;
}

/**
 * The durable, append-only, hash-chained fact log (DI token `TOKENS.FactLog`, DESIGN §8).
 * Every read is verified; nothing unverifiable is ever returned.
 */
export interface FactLog {
  /**
   * Append entries, their index rows and state rows in one atomic batch with `sync: true`, then
   * make the new head the anchored head (level stores); resolves only once both are durable,
   * with the committed entries. Calls made while a batch is in flight are committed together.
   * @throws EvidenceError `ASP_EVIDENCE_BAD_OBJECT` (bad kind/index/state), `ASP_EVIDENCE_NON_CANONICAL_VALUE`
   *   (record), `ASP_EVIDENCE_STORE_CLOSED`, `ASP_EVIDENCE_READ_ONLY`; nothing is written when any
   *   entry is bad. `ASP_EVIDENCE_WRITE_FAILED` when the batch or the anchor could not be made
   *   durable (disk full, I/O error): not acknowledged, and the handle takes no more appends.
   *   `ASP_EVIDENCE_CONDITION_FAILED` when an `options.expect` condition does not hold at commit
   *   (`data: { key, expected, actual }`): nothing of this call is written; re-read and decide again.
   * @example
   * ```ts
   * const seq = await log.latestSeq("run/r1"); // read the head of the state key...
   * // ...decide from what it said, then append only if nobody moved it meanwhile:
   * await log.append([{ kind: "run.verified", record: { of: seq }, state: ["run/r1"] }], {
   *   expect: [{ key: "run/r1", seq }],
   * });
   * ```
   */
  append(entries: readonly FactInput[], options?: AppendOptions): Promise<FactEntry[]>;
  /**
   * The entry at `seq`, verified (own digest and the link from its successor or the head).
   * @throws EvidenceError `ASP_EVIDENCE_NOT_FOUND`, `ASP_EVIDENCE_CHAIN_BROKEN`.
   */
  read(seq: number): Promise<FactEntry>;
  /**
   * The entry with this digest, verified.
   * @throws EvidenceError `ASP_EVIDENCE_NOT_FOUND`, `ASP_EVIDENCE_CHAIN_BROKEN`, `ASP_EVIDENCE_BAD_DIGEST`.
   */
  readByDigest(digest: Digest): Promise<FactEntry>;
  /**
   * The latest entry that named `key` in its `state`, verified; `undefined` when none did.
   * @throws EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN`.
   */
  latest(key: string): Promise<FactEntry | undefined>;
  /**
   * The seq of {@link FactLog.latest}`(key)`, or `null` when no entry named `key`: what a conditional
   * append ({@link AppendOptions.expect}) compares with.
   * @throws EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN`.
   */
  latestSeq(key: string): Promise<number | null>;
  /**
   * Entries by kind, by index key, or all, ordered by seq; each verified.
   * @throws EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN`.
   */
  list(query?: FactQuery): Promise<FactEntry[]>;
  /** The last committed entry, or `null` for an empty log. */
  head(): Promise<FactLogHead | null>;
  /**
   * Walk the whole chain, re-hashing every entry; check it reaches the anchored head and, when
   * given, `expectHead`. Names the first bad seq. Never throws for a broken chain.
   */
  verify(options?: VerifyOptions): Promise<VerifyResult>;
  /**
   * Drop and rebuild every secondary index (kind, index keys, state, digest) from the log.
   * @throws EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN` when the log does not verify (indexes stay marked stale),
   *   `ASP_EVIDENCE_READ_ONLY`.
   */
  rebuildIndexes(): Promise<void>;
  /** Close the store this log belongs to (the object store closes with it). */
  close(): Promise<void>;
}

/** The clock port (DI token `TOKENS.Clock`); facts carry its time. */
export interface Clock {
  now(): Date;
}

/** The fact log and object store of one store, opened together. */
export interface Store {
  /** Absolute directory, or `memory:`. */
  readonly location: string;
  /** Random id of this store, fixed at creation. */
  readonly id: string;
  /**
   * Opened read-only: a private snapshot of the store, taken without its lock (a writer is never
   * blocked); writes fail with `ASP_EVIDENCE_READ_ONLY`.
   */
  readonly readOnly: boolean;
  readonly log: FactLog;
  readonly objects: ObjectStore;
  readonly hasher: Hasher;
  /** Close the database; later calls fail with `ASP_EVIDENCE_STORE_CLOSED`. Idempotent. */
  close(): Promise<void>;
}

/** Options of `openStore` and `createMemoryStore`. */
export interface StoreOptions {
  /** Defaults to the system clock. */
  readonly clock?: Clock;
  /** Defaults to the `node:crypto` hasher. */
  readonly hasher?: Hasher;
}

/** Options of `openStore`. */
export interface OpenStoreOptions extends StoreOptions {
  /**
   * Open a private snapshot of the store without taking its lock, so a writer is never blocked
   * (ADR 0003). The snapshot is proven against the anchored head read before it was taken;
   * writes through it fail with `ASP_EVIDENCE_READ_ONLY`. Default false.
   */
  readonly readOnly?: boolean;
  /**
   * How long a writable open waits for a store another process holds, in ms (default 30,000;
   * 0 fails at once). Ignored when `readOnly`.
   */
  readonly waitMs?: number;
  /** Called about once a second while waiting, with the holder's pid when known. */
  readonly onWait?: (progress: WaitProgress) => void;
}

/** A typed DI token: a symbol that remembers the type it resolves to (tsyringe accepts symbols). */
export type InjectionToken<T> = symbol & { readonly __type?: T };
