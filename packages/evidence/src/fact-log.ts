import type { Anchor, AnchorRecord } from "./anchor.js";
import { canonicalize, type JsonValue, parseCanonical } from "./canonical.js";
import { EvidenceError } from "./errors.js";
import { assertDigest, type Digest, digestBytes, type Hasher, isDigest } from "./hash.js";
import { type Kv, type KvOp, toBytes, toText } from "./kv.js";
import type {
  AppendCondition,
  AppendOptions,
  Clock,
  FactEntry,
  FactIndexKey,
  FactInput,
  FactLog,
  FactLogHead,
  FactQuery,
  VerifyOptions,
  VerifyResult,
} from "./store.js";

const KIND_RE = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
const MAX_KEY = 1024;
const SEQ_WIDTH = 16;
const ENTRY_VERSION = 1;

/** Fixed-width decimal, so level's byte order is seq order. */
export const seqKey = (seq: number): string => String(seq).padStart(SEQ_WIDTH, "0");
const kindKey = (kind: string, seq: number): string => `k\0${kind}\0${seqKey(seq)}`;
const indexKey = (k: FactIndexKey, seq: number): string => `i\0${k.name}\0${k.value}\0${seqKey(seq)}`;
const EMPTY = new Uint8Array();

function bad(message: string, data: Record<string, unknown>): never {
  throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", message, { data });
}

function broken(seq: number, reason: string, location: string): EvidenceError {
  return new EvidenceError(
    "ASP_EVIDENCE_CHAIN_BROKEN",
    `fact log entry ${seq} in ${location} fails verification: ${reason}`,
    {
      data: { seq, reason, path: location },
    },
  );
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkKey(value: unknown, what: string, i: number): string {
  if (
    typeof value !== "string" ||
    value.length === 0 ||
    value.length > MAX_KEY ||
    value.includes("\0") ||
    LONE_SURROGATE.test(value)
  ) {
    bad(`${what} must be a non-empty string of at most ${MAX_KEY} chars without NUL or lone surrogates`, {
      entry: i,
      what,
    });
  }
  return value;
}

export interface Prepared {
  readonly kind: string;
  readonly record: JsonValue;
  readonly recordText: string;
  readonly index: FactIndexKey[];
  readonly state: string[];
}

function prepare(input: FactInput, i: number): Prepared {
  if (input === null || typeof input !== "object")
    bad("a fact must be an object { kind, record, index?, state? }", { entry: i });
  if (typeof input.kind !== "string" || !KIND_RE.test(input.kind)) {
    bad("fact kind must be 1-128 of A-Za-z0-9._:/- starting with a letter or digit", {
      entry: i,
      kind: String(input.kind).slice(0, 200),
    });
  }
  const recordText = canonicalize(input.record);
  const index = (input.index ?? []).map((k) => {
    if (typeof k?.name !== "string" || !KIND_RE.test(k.name))
      bad("index name must look like a kind", { entry: i, name: String(k?.name) });
    if (
      typeof k.value !== "string" ||
      k.value.length > MAX_KEY ||
      k.value.includes("\0") ||
      LONE_SURROGATE.test(k.value)
    ) {
      bad(`index value must be a string of at most ${MAX_KEY} chars without NUL`, { entry: i, name: k.name });
    }
    return { name: k.name, value: k.value };
  });
  const state = (input.state ?? []).map((k) => checkKey(k, "state key", i));
  if (new Set(state).size !== state.length) bad("state keys of one fact must be unique", { entry: i });
  return { kind: input.kind, record: JSON.parse(recordText) as JsonValue, recordText, index, state };
}

/** The hashed body of an entry: every field but the digest, in canonical JSON. */
function bodyText(
  seq: number,
  at: string,
  p: { kind: string; recordText: string; index: readonly FactIndexKey[]; state: readonly string[] },
  prev: Digest | null,
): string {
  // Keys in canonical (sorted) order. recordText is canonical already; every other string was
  // checked free of lone surrogates, so JSON.stringify is its RFC 8785 form (and much cheaper).
  const index = JSON.stringify(p.index.map((k) => [k.name, k.value]));
  return `{"at":${JSON.stringify(at)},"index":${index},"kind":${JSON.stringify(p.kind)},"prev":${JSON.stringify(prev)},"record":${p.recordText},"seq":${seq},"state":${JSON.stringify(p.state)},"v":${ENTRY_VERSION}}`;
}

/** The stored form: the body with its digest added, still canonical JSON. */
function storedText(body: string, digest: Digest): string {
  // "digest" sorts between "at" and "index".
  const at = body.indexOf(',"index":');
  return `${body.slice(0, at)},"digest":"${digest}"${body.slice(at)}`;
}

/** Decode and self-verify a stored entry; throws CHAIN_BROKEN naming `seq` on any mismatch. */
export function decodeEntry(bytes: Uint8Array, seq: number, hasher: Hasher, location: string): FactEntry {
  let value: JsonValue;
  try {
    value = parseCanonical(bytes, "fact log entry");
  } catch (cause) {
    throw new EvidenceError("ASP_EVIDENCE_CHAIN_BROKEN", `fact log entry ${seq} in ${location} is not canonical JSON`, {
      cause,
      data: { seq, reason: "not canonical JSON", path: location },
    });
  }
  const v = value as Record<string, JsonValue>;
  const ok =
    typeof v === "object" &&
    v !== null &&
    !Array.isArray(v) &&
    v.v === ENTRY_VERSION &&
    v.seq === seq &&
    typeof v.kind === "string" &&
    typeof v.at === "string" &&
    isDigest(v.digest) &&
    (v.prev === null || isDigest(v.prev)) &&
    Array.isArray(v.index) &&
    v.index.every((k) => Array.isArray(k) && k.length === 2 && typeof k[0] === "string" && typeof k[1] === "string") &&
    Array.isArray(v.state) &&
    v.state.every((k) => typeof k === "string") &&
    "record" in v &&
    Object.keys(v).length === 9;
  if (!ok) throw broken(seq, "entry shape or seq does not match its key", location);
  const entry: FactEntry = {
    seq,
    kind: v.kind as string,
    record: v.record as JsonValue,
    at: v.at as string,
    index: (v.index as string[][]).map(([name, value]) => ({ name: name as string, value: value as string })),
    state: v.state as string[],
    prev: v.prev as Digest | null,
    digest: v.digest as Digest,
  };
  const body = bodyText(seq, entry.at, { ...entry, recordText: canonicalize(entry.record) }, entry.prev);
  const actual = digestBytes(toBytes(body), hasher);
  if (actual !== entry.digest)
    throw broken(seq, "content does not hash to its digest (edited after the fact)", location);
  return entry;
}

interface Meta {
  head: FactLogHead | null;
}

/** Rows an entry contributes to the secondary indexes (identical for append, rebuild and salvage). */
export function indexOps(e: {
  seq: number;
  kind: string;
  index: readonly FactIndexKey[];
  state: readonly string[];
  digest: Digest;
}): KvOp[] {
  const seqBytes = toBytes(seqKey(e.seq));
  const ops: KvOp[] = [
    { type: "put", space: "idx", key: kindKey(e.kind, e.seq), value: EMPTY },
    { type: "put", space: "digest", key: e.digest, value: seqBytes },
  ];
  for (const k of e.index) ops.push({ type: "put", space: "idx", key: indexKey(k, e.seq), value: EMPTY });
  for (const s of e.state) ops.push({ type: "put", space: "state", key: s, value: seqBytes });
  return ops;
}

export const headOp = (head: FactLogHead): KvOp => ({
  type: "put",
  space: "meta",
  key: "head",
  value: toBytes(canonicalize(head)),
});
const INDEXES_STALE: KvOp = { type: "put", space: "meta", key: "indexes", value: toBytes('"rebuilding"') };
const INDEXES_OK: KvOp = { type: "put", space: "meta", key: "indexes", value: toBytes('"valid"') };

/**
 * Chain one prepared fact at `seq` after `prev`: the entry and every row it writes (the log row,
 * its index and state rows). The one encoder of entries, for appends and salvage.
 */
export function chainEntry(
  seq: number,
  at: string,
  p: Prepared,
  prev: Digest | null,
  hasher: Hasher,
): { entry: FactEntry; ops: KvOp[] } {
  const body = bodyText(seq, at, p, prev);
  const digest = digestBytes(toBytes(body), hasher);
  const entry: FactEntry = { seq, kind: p.kind, record: p.record, at, index: p.index, state: p.state, prev, digest };
  return {
    entry,
    ops: [
      { type: "put", space: "log", key: seqKey(seq), value: toBytes(storedText(body, digest)) },
      ...indexOps(entry),
    ],
  };
}

/** Validate a fact for {@link chainEntry} (what `append` does to each input). */
export const prepareFact = (input: FactInput): Prepared => prepare(input, 0);

/** Read the head pointer, validating its shape. */
export async function readHead(kv: Kv): Promise<FactLogHead | null> {
  const raw = await kv.get("meta", "head");
  if (raw === undefined) return null;
  const v = parseCanonical(raw, "log head") as { seq?: unknown; digest?: unknown };
  if (typeof v?.seq !== "number" || !Number.isSafeInteger(v.seq) || v.seq < 1 || !isDigest(v.digest)) {
    throw new EvidenceError("ASP_EVIDENCE_CHAIN_BROKEN", `the fact log head in ${kv.location} is malformed`, {
      data: { path: kv.location, reason: "malformed head" },
    });
  }
  return { seq: v.seq, digest: v.digest };
}

/** What the proof found missing or wrong; `missing` is a seq range that is gone. */
export interface LogDamage {
  readonly reason: string;
  readonly seq?: number;
  readonly missing?: { readonly from: number; readonly to: number };
}

/**
 * Prove the log still reaches `anchor`: its keys are exactly 1..last with no gap, `last` is at
 * or beyond the anchored seq and matches the head pointer, the entry at the anchored seq has the
 * anchored digest (a chain that restarted or was replaced does not), and every entry after it
 * links up to the head. Reads only keys plus the few entries from the anchor on, so it is cheap
 * enough for every open; `verify()` re-hashes everything.
 */
export async function proveLog(
  kv: Kv,
  hasher: Hasher,
  head: FactLogHead | null,
  anchor: AnchorRecord,
): Promise<LogDamage | null> {
  let expected = 1;
  for await (const key of kv.keys("log")) {
    const seq = Number(key);
    if (!/^\d{16}$/.test(key) || seq < expected)
      return { reason: `the log holds a malformed key ${JSON.stringify(key)}` };
    if (seq > expected) {
      return {
        reason: `entries ${range(expected, seq - 1)} are missing from the log`,
        missing: { from: expected, to: seq - 1 },
      };
    }
    expected = seq + 1;
  }
  const last = expected - 1;
  if (anchor.seq > last) {
    return {
      reason: `the log ends at seq ${last}, before the anchored head seq ${anchor.seq} (entries ${range(last + 1, anchor.seq)} are missing)`,
      missing: { from: last + 1, to: anchor.seq },
    };
  }
  if ((head?.seq ?? 0) !== last) {
    return { reason: `the log's head pointer (seq ${head?.seq ?? 0}) does not match its last entry (seq ${last})` };
  }
  let prev: Digest | null = null;
  if (anchor.seq > 0) {
    const at = await readVerified(kv, hasher, anchor.seq);
    if ("reason" in at) return at;
    if (at.digest !== anchor.digest) {
      return {
        reason: `entry ${anchor.seq} is not the anchored head (the chain was restarted or replaced)`,
        seq: anchor.seq,
      };
    }
    prev = at.digest;
  }
  for (let seq = anchor.seq + 1; seq <= last; seq++) {
    const e = await readVerified(kv, hasher, seq);
    if ("reason" in e) return e;
    if (seq > 1 && e.prev !== prev) return { reason: `entry ${seq} does not link to entry ${seq - 1}`, seq };
    prev = e.digest;
  }
  if (head !== null && head.digest !== prev)
    return { reason: `the head pointer's digest differs from entry ${last}`, seq: last };
  return null;
}

const range = (from: number, to: number): string => (from === to ? `${from}` : `${from}-${to}`);

async function readVerified(kv: Kv, hasher: Hasher, seq: number): Promise<FactEntry | LogDamage> {
  const bytes = await kv.get("log", seqKey(seq));
  if (bytes === undefined) return { reason: `entry ${seq} is missing`, seq, missing: { from: seq, to: seq } };
  try {
    return decodeEntry(bytes, seq, hasher, kv.location);
  } catch (error) {
    return { reason: `entry ${seq} is damaged (${(error as EvidenceError).data?.reason ?? "unreadable"})`, seq };
  }
}

/** Map a failed durable write to `ASP_EVIDENCE_WRITE_FAILED`, naming the errno when one can be told. */
function writeFailed(error: unknown, stage: "log" | "anchor", location: string): EvidenceError {
  const e = error as { code?: unknown; message?: unknown; cause?: { message?: unknown } } | null;
  const text = `${String(e?.message ?? "")} ${String(e?.cause?.message ?? "")}`;
  const errno =
    typeof e?.code === "string" && /^E[A-Z]+$/.test(e.code)
      ? e.code
      : /No space left/i.test(text)
        ? "ENOSPC"
        : /File too large/i.test(text)
          ? "EFBIG"
          : /I\/O error|Input\/output/i.test(text)
            ? "EIO"
            : null;
  return new EvidenceError(
    "ASP_EVIDENCE_WRITE_FAILED",
    `an append to the evidence store at ${location} could not be made durable (${stage}: ${errno ?? "write failed"}); it was not acknowledged, and this handle takes no more appends: reopen the store`,
    { cause: error, data: { path: location, stage, errno } },
  );
}

/**
 * A Kv many processes write at once (a shared database): the fact log runs each append in
 * {@link SharedKv.exclusive} (one transaction holding the chain's write lock, reading the head
 * inside it) and each read on one {@link SharedKv.snapshot}, so N writers make one chain.
 */
export interface SharedKv {
  /** Run `fn` in one transaction that holds the chain's write lock; commit durably when it resolves. */
  exclusive<T>(fn: (kv: Kv) => Promise<T>): Promise<T>;
  /** Run `fn` on one consistent, read-only snapshot. */
  snapshot<T>(fn: (kv: Kv) => Promise<T>): Promise<T>;
}

/** Options of {@link createKvFactLog}. */
export interface KvFactLogOptions {
  /** Other processes append to the same Kv: serialize through it, never trust a cached head. */
  readonly shared?: SharedKv;
  /** The anchor to advance after every durable append (level stores only; none elsewhere). @internal */
  readonly anchor?: Anchor;
  /** Refuse appends and index rebuilds (`ASP_EVIDENCE_READ_ONLY`). */
  readonly readOnly?: boolean;
}

/** Most append calls committed together in one batch (group commit). */
const MAX_GROUP = 256;

interface PendingAppend {
  readonly prepared: Prepared[];
  readonly at: string;
  /** The call's conditions (validated), checked at commit. */
  readonly expect: readonly AppendCondition[];
  readonly resolve: (entries: FactEntry[]) => void;
  readonly reject: (error: unknown) => void;
}

/** Validate `options.expect` of an append (before anything is queued). */
function checkConditions(options: AppendOptions | undefined): AppendCondition[] {
  if (options === undefined) return [];
  if (options === null || typeof options !== "object") bad("append options must be an object { expect? }", {});
  const expect = options.expect;
  if (expect === undefined) return [];
  if (!Array.isArray(expect)) bad("append options.expect must be an array of { key, seq }", {});
  const out = expect.map((c: AppendCondition, i: number) => {
    if (c === null || typeof c !== "object")
      bad("an append condition must be an object { key, seq }", { condition: i });
    const key = checkKey(c.key, "condition key", i);
    if (c.seq !== null && !(Number.isSafeInteger(c.seq) && c.seq >= 1))
      bad("an append condition's seq must be a positive integer or null", { condition: i, key });
    return { key, seq: c.seq };
  });
  if (new Set(out.map((c) => c.key)).size !== out.length)
    bad("an append names each condition key at most once", { keys: out.map((c) => c.key) });
  return out;
}

function conditionFailed(key: string, expected: number | null, actual: number | null, location: string): EvidenceError {
  const at = (seq: number | null): string => (seq === null ? "no entry" : `seq ${seq}`);
  return new EvidenceError(
    "ASP_EVIDENCE_CONDITION_FAILED",
    `nothing was appended to the evidence store at ${location}: state key ${JSON.stringify(key)} was expected at ${at(expected)} but is at ${at(actual)} (another writer appended under it first); read it again with latest(key) and decide again`,
    { data: { key, expected, actual } },
  );
}

/**
 * The {@link FactLog} over a Kv. `onClose` closes the shared store. On level, the database lock
 * makes this the only writer across processes; on a shared database (`options.shared`), every
 * append reads the head and writes the next entries in one transaction holding the chain's write
 * lock. In process, appends are group-committed: calls that arrive while a batch is being made
 * durable go together into the next batch, so concurrent callers share one sync.
 * @throws EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN` when the head is malformed or an interrupted
 *   index rebuild cannot finish.
 */
export async function createKvFactLog(
  kv: Kv,
  hasher: Hasher,
  clock: Clock,
  onClose: () => Promise<void>,
  options: KvFactLogOptions = {},
): Promise<FactLog> {
  const meta: Meta = { head: await readHead(kv) };
  const loc = kv.location;
  const anchor = options.anchor;
  let queue: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = queue.then(fn, fn);
    queue = run.catch(() => undefined);
    return run;
  };
  const readOnly = (what: string): EvidenceError =>
    new EvidenceError("ASP_EVIDENCE_READ_ONLY", `cannot ${what}: the evidence store at ${loc} was opened read-only`, {
      data: { path: loc },
    });

  const shared = options.shared;
  /**
   * Set while a committed batch may already be readable but `meta.head` does not name it yet
   * (between the batch and the head update): a read in that gap can meet entries beyond its head.
   */
  let landing: Promise<void> | null = null;
  /**
   * Run a read on one view: the cached head alone, or a fresh snapshot (and its head) when shared.
   * In process, a read that met an entry beyond its head while an append of this handle was
   * landing (an index or state row naming an entry of that batch) is read again once the batch's
   * head is in place; an entry beyond the head with no append landing is still a broken chain.
   */
  const view = async <T>(fn: (kv: Kv, head: FactLogHead | null) => Promise<T>): Promise<T> => {
    if (shared !== undefined) return shared.snapshot(async (tx) => fn(tx, await readHead(tx)));
    for (let attempt = 0; ; attempt += 1) {
      const head = meta.head;
      try {
        return await fn(kv, head);
      } catch (error) {
        const e = error as EvidenceError;
        const seq = (e.data as { seq?: unknown } | undefined)?.seq;
        const beyond = e.code === "ASP_EVIDENCE_CHAIN_BROKEN" && typeof seq === "number" && seq > (head?.seq ?? 0);
        const moved = landing !== null || (meta.head?.seq ?? 0) > (head?.seq ?? 0);
        if (!beyond || !moved || attempt >= 8) throw error;
        await landing;
      }
    }
  };

  /** Read with the link check: the successor's `prev` (or the head) must name this digest. */
  const readIn = async (kv: Kv, head: FactLogHead | null, seq: number): Promise<FactEntry> => {
    if (!Number.isSafeInteger(seq) || seq < 1) bad("seq must be a positive integer", { seq });
    const bytes = await kv.get("log", seqKey(seq));
    const entry = bytes === undefined ? undefined : decodeEntry(bytes, seq, hasher, loc);
    if (entry === undefined) {
      if (head !== null && seq <= head.seq) throw broken(seq, "entry is missing below the head", loc);
      throw new EvidenceError("ASP_EVIDENCE_NOT_FOUND", `no fact log entry ${seq} in ${loc}`, { data: { seq } });
    }
    if (head === null || seq > head.seq) throw broken(seq, "entry lies beyond the head", loc);
    if (seq === head.seq) {
      if (head.digest !== entry.digest) throw broken(seq, "digest differs from the head", loc);
    } else {
      const next = await kv.get("log", seqKey(seq + 1));
      let nextPrev: unknown;
      try {
        nextPrev = next === undefined ? undefined : (JSON.parse(toText(next)) as { prev?: unknown }).prev;
      } catch {
        nextPrev = undefined;
      }
      if (nextPrev !== entry.digest) throw broken(seq, "the next entry does not link to it", loc);
    }
    return entry;
  };

  const latestIn = async (kv: Kv, head: FactLogHead | null, key: string): Promise<FactEntry | undefined> => {
    checkKey(key, "state key", 0);
    const raw = await kv.get("state", key);
    if (raw === undefined) return undefined;
    const entry = await readIn(kv, head, Number(toText(raw)));
    if (!entry.state.includes(key))
      throw broken(entry.seq, `the state index points at an entry that does not name ${key}`, loc);
    return entry;
  };

  const rebuildIn = async (kv: Kv, head: FactLogHead | null): Promise<void> => {
    await kv.batch([INDEXES_STALE], true);
    await kv.clear("idx");
    await kv.clear("state");
    await kv.clear("digest");
    let ops: KvOp[] = [];
    let expected = 1;
    let prev: Digest | null = null;
    for await (const [key, bytes] of kv.entries("log")) {
      const seq = Number(key);
      if (seq !== expected) throw broken(expected, "entry is missing", loc);
      const e = decodeEntry(bytes, seq, hasher, loc);
      if (e.prev !== prev) throw broken(seq, "prev does not match the previous entry", loc);
      ops.push(...indexOps(e));
      prev = e.digest;
      expected++;
      if (ops.length >= 5000) {
        await kv.batch(ops, false);
        ops = [];
      }
    }
    if ((head?.seq ?? 0) !== expected - 1 || (head?.digest ?? null) !== prev)
      throw broken(expected - 1, "log end does not match the head", loc);
    ops.push(INDEXES_OK);
    await kv.batch(ops, true);
  };

  const rebuild = (): Promise<void> =>
    shared === undefined
      ? serial(() => rebuildIn(kv, meta.head))
      : shared.exclusive(async (tx) => rebuildIn(tx, await readHead(tx)));

  const indexState = await kv.get("meta", "indexes");
  if (indexState !== undefined && toText(indexState) !== '"valid"') await rebuild();

  let failure: EvidenceError | undefined;
  /**
   * Commit a group of append calls in one synced batch, then anchor its head; one result per
   * call: its entries, or the error of a condition that failed (that call wrote nothing).
   */
  const commit = (group: readonly PendingAppend[]): Promise<Array<FactEntry[] | EvidenceError>> => {
    if (failure !== undefined) return Promise.reject(failure);
    // Shared: the head is read inside the transaction that holds the chain's write lock.
    return shared === undefined
      ? serial(() => commitIn(kv, meta.head, group))
      : shared
          .exclusive(async (tx) => commitIn(tx, await readHead(tx), group))
          .catch((error: unknown) => {
            if ((error as EvidenceError).code === "ASP_EVIDENCE_STORE_CLOSED") throw error;
            failure = writeFailed(error, "log", loc);
            throw failure;
          });
  };
  /**
   * The seq of the latest entry naming `key` as this commit sees it: what an earlier call of the
   * same group wrote, else the state row, whose entry must name `key` (else the index is broken).
   */
  const stateSeqIn = async (
    kv: Kv,
    start: FactLogHead | null,
    written: ReadonlyMap<string, number>,
    key: string,
  ): Promise<number | null> => {
    const mine = written.get(key);
    if (mine !== undefined) return mine;
    const raw = await kv.get("state", key);
    if (raw === undefined) return null;
    const seq = Number(toText(raw));
    const bytes = Number.isSafeInteger(seq) && seq >= 1 ? await kv.get("log", seqKey(seq)) : undefined;
    if (bytes === undefined || seq > (start?.seq ?? 0))
      throw broken(seq, `the state index of ${key} points at an entry the log does not hold`, loc);
    if (!decodeEntry(bytes, seq, hasher, loc).state.includes(key))
      throw broken(seq, `the state index points at an entry that does not name ${key}`, loc);
    return seq;
  };
  /** Null when every condition of `call` holds, else the error it fails with. */
  const conditionsIn = async (
    kv: Kv,
    start: FactLogHead | null,
    written: ReadonlyMap<string, number>,
    call: PendingAppend,
  ): Promise<EvidenceError | null> => {
    for (const c of call.expect) {
      let actual: number | null;
      try {
        actual = await stateSeqIn(kv, start, written, c.key);
      } catch (error) {
        // A broken index fails this call only: it is never taken as a condition that holds.
        if ((error as EvidenceError).code === "ASP_EVIDENCE_CHAIN_BROKEN") return error as EvidenceError;
        throw error;
      }
      if (actual !== c.seq) return conditionFailed(c.key, c.seq, actual, loc);
    }
    return null;
  };
  const commitIn = async (
    kv: Kv,
    start: FactLogHead | null,
    group: readonly PendingAppend[],
  ): Promise<Array<FactEntry[] | EvidenceError>> => {
    let head = start;
    const ops: KvOp[] = [];
    const outs: Array<FactEntry[] | EvidenceError> = [];
    // State keys the calls before this one in the group wrote, and at which seq.
    const written = new Map<string, number>();
    for (const call of group) {
      const refused = call.expect.length === 0 ? null : await conditionsIn(kv, start, written, call);
      if (refused !== null) {
        outs.push(refused);
        continue;
      }
      const out: FactEntry[] = [];
      for (const p of call.prepared) {
        const { entry, ops: entryOps } = chainEntry((head?.seq ?? 0) + 1, call.at, p, head?.digest ?? null, hasher);
        ops.push(...entryOps);
        out.push(entry);
        head = { seq: entry.seq, digest: entry.digest };
        for (const key of entry.state) written.set(key, entry.seq);
      }
      outs.push(out);
    }
    // Nothing to write (every call refused, or only empty conditional calls): no batch, no anchor.
    if (head === null || ops.length === 0) return outs;
    ops.push(headOp(head));
    let landed = (): void => undefined;
    landing = new Promise<void>((done) => {
      landed = done;
    });
    try {
      await kv.batch(ops, true);
      meta.head = head;
    } catch (error) {
      if ((error as EvidenceError).code === "ASP_EVIDENCE_STORE_CLOSED" || shared !== undefined) throw error;
      // Whether any of the batch reached the disk is unknown: no more appends through this handle.
      failure = writeFailed(error, "log", loc);
      throw failure;
    } finally {
      landing = null;
      landed();
    }
    if (anchor !== undefined) {
      try {
        // Only after the batch is durable: the anchor never names an entry the log may lack.
        await anchor.write(head);
      } catch (error) {
        failure = writeFailed(error, "anchor", loc);
        throw failure;
      }
    }
    return outs;
  };

  let pending: PendingAppend[] = [];
  let draining = false;
  const drain = async (): Promise<void> => {
    draining = true;
    try {
      while (pending.length > 0) {
        const group = pending.slice(0, MAX_GROUP);
        pending = pending.slice(MAX_GROUP);
        try {
          const outs = await commit(group);
          group.forEach((call, i) => {
            const out = outs[i] as FactEntry[] | EvidenceError;
            if (out instanceof EvidenceError) call.reject(out);
            else call.resolve(out);
          });
        } catch (error) {
          for (const call of group) call.reject(error);
        }
      }
    } finally {
      draining = false;
    }
  };

  const log: FactLog = {
    async append(inputs, appendOptions) {
      if (options.readOnly) throw readOnly("append");
      if (!Array.isArray(inputs)) bad("append takes an array of facts", {});
      const expect = checkConditions(appendOptions);
      // An empty call with conditions still goes through the commit: it asserts them.
      if (inputs.length === 0 && expect.length === 0) return [];
      const prepared = inputs.map(prepare);
      const at = clock.now().toISOString();
      return new Promise<FactEntry[]>((resolve, reject) => {
        pending.push({ prepared, at, expect, resolve, reject });
        if (!draining) void drain();
      });
    },
    read: (seq) => view((kv, head) => readIn(kv, head, seq)),
    readByDigest: (digest) =>
      view(async (kv, head) => {
        assertDigest(digest, "fact digest");
        const raw = await kv.get("digest", digest);
        if (raw === undefined)
          throw new EvidenceError("ASP_EVIDENCE_NOT_FOUND", `no fact with digest ${digest} in ${loc}`, {
            data: { digest },
          });
        const seq = Number(toText(raw));
        const entry = await readIn(kv, head, seq);
        if (entry.digest !== digest) throw broken(seq, "the digest index points at a different entry", loc);
        return entry;
      }),
    latest: (key) => view((kv, head) => latestIn(kv, head, key)),
    latestSeq: (key) => view(async (kv, head) => (await latestIn(kv, head, key))?.seq ?? null),
    list: (query: FactQuery = {}) =>
      view(async (kv, head) => {
        if (query.kind !== undefined && query.index !== undefined) bad("list takes kind or index, not both", {});
        const reverse = query.reverse === true;
        const limit = query.limit ?? Number.POSITIVE_INFINITY;
        const after = query.afterSeq;
        const seqs: number[] = [];
        // A list sees exactly its view: nothing past the view's head (an append landing meanwhile
        // is not part of it), so pages never straddle a batch. (An entry written past the head
        // around the log is refused when the store opens: ASP_EVIDENCE_STORE_CORRUPT.)
        if (head === null) return [];
        const top = reverse && after !== undefined ? Math.min(head.seq, after - 1) : head.seq;
        if (top < 1) return [];
        if (query.kind === undefined && query.index === undefined) {
          const lower = !reverse && after !== undefined ? { gt: seqKey(after) } : {};
          for await (const [key] of kv.entries("log", {
            ...lower,
            lte: seqKey(top),
            reverse,
            ...(Number.isFinite(limit) ? { limit } : {}),
          }))
            seqs.push(Number(key));
        } else {
          const prefix =
            query.kind !== undefined ? `k\0${query.kind}\0` : `i\0${query.index?.name}\0${query.index?.value}\0`;
          const lower = !reverse && after !== undefined ? { gt: `${prefix}${seqKey(after)}` } : { gte: prefix };
          const upper = { lte: `${prefix}${seqKey(top)}` };
          for await (const [key] of kv.entries("idx", {
            ...lower,
            ...upper,
            reverse,
            ...(Number.isFinite(limit) ? { limit } : {}),
          })) {
            seqs.push(Number(key.slice(prefix.length)));
          }
        }
        const out: FactEntry[] = [];
        for (const seq of seqs) out.push(await readIn(kv, head, seq));
        return out;
      }),
    head: async () => (shared === undefined ? meta.head : readHead(kv)),
    verify: (verifyOptions: VerifyOptions = {}): Promise<VerifyResult> => view((kv) => verifyIn(kv, verifyOptions)),
    rebuildIndexes: () => (options.readOnly ? Promise.reject(readOnly("rebuild indexes")) : rebuild()),
    close: onClose,
  };
  async function verifyIn(kv: Kv, verifyOptions: VerifyOptions): Promise<VerifyResult> {
    const anchored = anchor?.current();
    const expect = verifyOptions.expectHead;
    // Digests at the seqs the chain must pass through: the anchored head and the expected one.
    const wanted = new Map<number, Digest | null>();
    if (anchored !== undefined && anchored.seq > 0) wanted.set(anchored.seq, null);
    if (expect !== undefined) wanted.set(expect.seq, null);
    let expected = 1;
    let prev: Digest | null = null;
    const fail = (seq: number, reason: string): VerifyResult => ({ ok: false, entries: expected - 1, seq, reason });
    for await (const [key, bytes] of kv.entries("log")) {
      const seq = Number(key);
      if (seq !== expected) return fail(expected, "entry is missing");
      let e: FactEntry;
      try {
        e = decodeEntry(bytes, seq, hasher, loc);
      } catch (error) {
        return fail(seq, (error as EvidenceError).data?.reason as string);
      }
      if (e.prev !== prev) return fail(seq, "prev does not match the previous entry");
      if (wanted.has(seq)) wanted.set(seq, e.digest);
      prev = e.digest;
      expected++;
    }
    const count = expected - 1;
    const head = await readHead(kv);
    if (head === null) {
      if (count !== 0) return fail(1, "entries exist but the head is missing");
    } else {
      if (head.seq > count) return fail(count + 1, "entry is missing below the head");
      if (head.seq < count) return fail(head.seq + 1, "entry lies beyond the head");
      if (head.digest !== prev) return fail(count, "digest differs from the head");
    }
    if (anchored !== undefined && anchored.seq > 0) {
      if (anchored.seq > count)
        return fail(count + 1, `the log ends before the anchored head (seq ${anchored.seq}): entries are missing`);
      if (wanted.get(anchored.seq) !== anchored.digest)
        return fail(anchored.seq, "entry is not the anchored head (the chain was restarted or replaced)");
    }
    if (expect !== undefined) {
      if (expect.seq > count)
        return fail(count + 1, `the expected head seq ${expect.seq} is beyond the end of the log (seq ${count})`);
      if (wanted.get(expect.seq) !== expect.digest)
        return fail(expect.seq, "entry is not the expected head (the chain does not pass through it)");
    }
    const anchorHead =
      anchored === undefined || anchored.seq === 0 || anchored.digest === null
        ? null
        : { seq: anchored.seq, digest: anchored.digest };
    return { ok: true, entries: count, head, anchored: anchorHead };
  }
  return log;
}
