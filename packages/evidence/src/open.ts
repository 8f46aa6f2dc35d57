import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import {
  type Anchor,
  type AnchorRead,
  type AnchorRecord,
  corrupt,
  openAnchor,
  readAnchor,
  type SlotWriter,
  writeAnchorFile,
} from "./anchor.js";
import { canonicalize, parseCanonical } from "./canonical.js";
import { fsyncPath } from "./durable.js";
import { EvidenceError } from "./errors.js";
import { createKvFactLog, proveLog, readHead } from "./fact-log.js";
import { copyStoreFiles, makeSnapshotDir } from "./files.js";
import { defaultHasher } from "./hash.js";
import { createMemoryKv, type Kv, openLevelKv, toBytes } from "./kv.js";
import { finishUnborn, inspectDir, STORE_FORMAT, STORE_VERSION, writeMarker } from "./layout.js";
import { DEFAULT_WAIT_MS, removeHolder, writeHolder } from "./lock.js";
import { createKvObjectStore } from "./object-store.js";
import type { Clock, OpenStoreOptions, Store, StoreOptions } from "./store.js";
import { walDamage, walSignature } from "./wal.js";

const systemClock: Clock = { now: () => new Date() };

/** Format record version (inside the database; the marker carries the store format version). */
const FORMAT_RECORD_VERSION = 1;

function formatRecord(id: string, clock: Clock): Uint8Array {
  return toBytes(
    canonicalize({ format: STORE_FORMAT, version: FORMAT_RECORD_VERSION, id, createdAt: clock.now().toISOString() }),
  );
}

/**
 * The store's id from its format record. With an anchor, the record must exist and name the
 * anchor's store: a database that lost it (or belongs to another store) is damaged, never given
 * a new identity.
 */
async function storeId(kv: Kv, clock: Clock, anchor: AnchorRecord | null): Promise<string> {
  const raw = await kv.get("meta", "format");
  if (raw !== undefined) {
    let v: { format?: unknown; version?: unknown; id?: unknown };
    try {
      v = parseCanonical(raw, "store format record") as typeof v;
    } catch (cause) {
      throw new EvidenceError("ASP_EVIDENCE_STORE_CORRUPT", `the format record of ${kv.location} is unreadable`, {
        cause,
        data: { path: kv.location, reason: "the format record is unreadable" },
      });
    }
    if (v?.format !== STORE_FORMAT || typeof v.id !== "string" || typeof v.version !== "number") {
      throw new EvidenceError("ASP_EVIDENCE_NOT_A_STORE", `${kv.location} is a database but not an evidence store`, {
        data: { path: kv.location },
      });
    }
    if (v.version > STORE_VERSION) {
      throw new EvidenceError(
        "ASP_EVIDENCE_UNSUPPORTED_FORMAT",
        `${kv.location} has store format ${v.version}; upgrade @asp/evidence`,
        { data: { path: kv.location, version: v.version } },
      );
    }
    if (anchor !== null && anchor.store !== v.id) {
      throw corrupt(kv.location, `the database belongs to store ${v.id} but its anchor to store ${anchor.store}`);
    }
    return v.id;
  }
  if (anchor !== null && anchor.seq > 0) {
    throw corrupt(
      kv.location,
      `the database lost its format record and its log (the anchored head is seq ${anchor.seq})`,
      {
        anchor,
      },
    );
  }
  if (await kv.hasAnyKey()) {
    if (anchor !== null) throw corrupt(kv.location, "the database lost its format record");
    throw new EvidenceError(
      "ASP_EVIDENCE_NOT_A_STORE",
      `${kv.location} holds data but no evidence store format record`,
      {
        data: { path: kv.location },
      },
    );
  }
  // A database created but not yet given its record (an interrupted creation): finish it.
  const id = anchor?.store ?? randomUUID();
  await kv.batch([{ type: "put", space: "meta", key: "format", value: formatRecord(id, clock) }], true);
  return id;
}

/** An anchor that only remembers (memory-less read-only handles): writes are refused. */
function fixedAnchor(record: AnchorRecord, location: string): Anchor {
  return {
    current: () => record,
    write: () =>
      Promise.reject(
        new EvidenceError("ASP_EVIDENCE_READ_ONLY", `the evidence store at ${location} was opened read-only`, {
          data: { path: location },
        }),
      ),
    close: async () => {},
  };
}

/** Test seams: replace how an anchor slot is written (inject ENOSPC/EIO), or wrap the kv. */
export interface StoreSeams {
  readonly slotWriter?: SlotWriter;
  readonly wrapKv?: (kv: Kv) => Kv;
}

interface AssembleContext {
  readonly location: string;
  readonly anchorRead: AnchorRead;
  readonly markerVersion: number;
  readonly readOnly: boolean;
  readonly seams: StoreSeams;
  /** Runs last on close (and when assembly fails): the read-only snapshot's removal. */
  readonly cleanup: () => Promise<void>;
}

/** Prove the opened database against its anchor, then build the store over it. */
async function assembleLevel(rawKv: Kv, options: StoreOptions, ctx: AssembleContext): Promise<Store> {
  const kv = ctx.seams.wrapKv?.(rawKv) ?? rawKv;
  const hasher = options.hasher ?? defaultHasher();
  const clock = options.clock ?? systemClock;
  const { location, anchorRead } = ctx;
  let anchor: Anchor | undefined;
  const release = async (): Promise<void> => {
    try {
      await anchor?.close();
      if (!ctx.readOnly) await removeHolder(location);
      await kv.close();
    } finally {
      await ctx.cleanup();
    }
  };
  try {
    if (anchorRead.state === "damaged") throw corrupt(location, anchorRead.reason);
    if (anchorRead.state === "missing" && ctx.markerVersion >= STORE_VERSION)
      throw corrupt(location, "the anchor file ASP-EVIDENCE-HEAD is missing");
    const anchored = anchorRead.state === "ok" ? anchorRead.record : null;
    const id = await storeId(kv, clock, anchored);
    const head = await readHead(kv);
    if (anchored !== null) {
      const damage = await proveLog(kv, hasher, head, anchored);
      if (damage !== null) {
        throw corrupt(location, damage.reason, {
          anchor: anchored,
          head,
          missing: damage.missing ?? null,
          seq: damage.seq ?? null,
        });
      }
    }
    if (ctx.readOnly) {
      if (anchored !== null) anchor = fixedAnchor(anchored, location);
    } else {
      const current: AnchorRecord = { store: id, seq: head?.seq ?? 0, digest: head?.digest ?? null };
      if (anchored === null) {
        // A store written before anchors: anchor it only once its whole chain verifies.
        const probe = await createKvFactLog(kv, hasher, clock, async () => {}, { readOnly: true });
        const v = await probe.verify();
        if (!v.ok)
          throw corrupt(location, `entry ${v.seq} fails verification (${v.reason}); the store was not anchored`);
        await writeAnchorFile(location, current);
        await writeMarker(location);
      } else if (anchorRead.state === "ok" && (!anchorRead.pristine || current.seq !== anchored.seq)) {
        // The log is proven to reach the anchor and runs past it (a crash between the log sync
        // and the anchor write), or a slot is damaged: anchor what the log durably holds.
        await writeAnchorFile(location, current);
      }
      const fresh = await readAnchor(location);
      if (fresh.state !== "ok") throw corrupt(location, "the anchor file could not be written back");
      anchor = await openAnchor(location, fresh, ctx.seams.slotWriter);
    }
    let closing: Promise<void> | undefined;
    const close = (): Promise<void> => {
      closing ??= release();
      return closing;
    };
    const log = await createKvFactLog(kv, hasher, clock, close, {
      ...(anchor === undefined ? {} : { anchor }),
      readOnly: ctx.readOnly,
    });
    return {
      location,
      id,
      readOnly: ctx.readOnly,
      log,
      objects: createKvObjectStore(kv, hasher, { readOnly: ctx.readOnly }),
      hasher,
      close,
    };
  } catch (error) {
    await release();
    throw error;
  }
}

/**
 * Create a new store at `location` atomically: marker, anchor (seq 0) and database with its
 * format record are made in a sibling temp directory, which is then renamed onto `location`
 * (missing or empty). Processes that create the same store at once race only on the rename; the
 * losers open the winner's store (the caller looks at `location` again afterwards).
 */
async function createStoreDir(location: string, clock: Clock): Promise<void> {
  const parent = dirname(location);
  await mkdir(parent, { recursive: true });
  const tmp = await mkdtemp(`${location}.creating-`);
  try {
    const id = randomUUID();
    await writeMarker(tmp);
    await writeAnchorFile(tmp, { store: id, seq: 0, digest: null });
    const kv = await openLevelKv(tmp, { create: true, waitMs: 0 });
    try {
      await kv.batch([{ type: "put", space: "meta", key: "format", value: formatRecord(id, clock) }], true);
    } finally {
      await kv.close();
    }
    try {
      await rename(tmp, location);
      await fsyncPath(parent);
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // Someone else created it first (or put something there): look at it again.
      if (code === "ENOTEMPTY" || code === "EEXIST" || code === "ENOTDIR" || code === "EISDIR") return;
      // `location` is an empty directory that cannot be replaced (a mount point, busy):
      // create in place instead, marker first (the interrupted-creation path finishes it).
      await writeMarker(location);
    }
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * The checks that must see the files before level does: a missing or unreadable anchor, and a
 * write-ahead log record level would drop that holds an acknowledged entry (see `walDamage`).
 * Runs before every open attempt while waiting for a held store, so a log state that passed
 * (the same files, sizes and times, the same anchored seq) is not read again.
 */
function refuseBeforeLevel(location: string, markerVersion: number): () => Promise<void> {
  let passed: string | undefined;
  return async () => {
    const anchor = await readAnchor(location);
    const untouched = { untouched: true };
    if (anchor.state === "damaged") throw corrupt(location, anchor.reason, untouched);
    if (anchor.state === "missing" && markerVersion >= STORE_VERSION)
      throw corrupt(location, "the anchor file ASP-EVIDENCE-HEAD is missing", untouched);
    const anchoredSeq = anchor.state === "ok" ? anchor.record.seq : 0;
    const signature = `${anchoredSeq} ${await walSignature(location)}`;
    if (signature === passed) return;
    const wal = await walDamage(location, anchoredSeq);
    if (wal.kind === "damaged") throw corrupt(location, wal.reason, untouched);
    if (wal.kind === "unreadable-tail") {
      // Rare (after a crash, or damage): prove a private snapshot reaches the anchor first.
      try {
        const probe = await openReadOnly(location, {}, {});
        await probe.close();
      } catch (error) {
        const e = error as EvidenceError;
        if (e.code !== "ASP_EVIDENCE_STORE_CORRUPT") throw error;
        throw corrupt(location, `${String(e.data?.reason ?? e.message)} (${wal.reason})`, untouched);
      }
    }
    passed = signature;
  };
}

async function openWritable(dir: string, options: OpenStoreOptions, seams: StoreSeams): Promise<Store> {
  const location = resolve(dir);
  const clock = options.clock ?? systemClock;
  let layout = await inspectDir(location);
  if (layout.kind === "new") {
    await createStoreDir(location, clock);
    layout = await inspectDir(location);
    if (layout.kind === "new") {
      throw new EvidenceError("ASP_EVIDENCE_IO", `could not create the evidence store at ${location}`, {
        data: { path: location },
      });
    }
  }
  if (layout.kind === "unborn") await finishUnborn(location, layout.markerVersion);
  const markerVersion = layout.kind === "unborn" ? STORE_VERSION : layout.markerVersion;
  const kv = await openLevelKv(location, {
    create: layout.kind === "unborn",
    waitMs: options.waitMs ?? DEFAULT_WAIT_MS,
    onWait: options.onWait,
    // Level's recovery drops what it cannot read and deletes the log it read it from: refuse
    // damage it would drop before it runs, so the damaged store stays exactly as it was.
    beforeAttempt: refuseBeforeLevel(location, markerVersion),
  });
  try {
    await writeHolder(location);
  } catch (error) {
    await kv.close();
    throw error;
  }
  // Read under the lock: the anchor a waiting opener saw before may have moved since.
  const anchorRead = await readAnchor(location);
  return assembleLevel(kv, options, {
    location,
    anchorRead,
    markerVersion,
    readOnly: false,
    seams,
    cleanup: async () => {},
  });
}

/**
 * Open a private snapshot of the store (see `copyStoreFiles`): no lock is taken, so a writer
 * is never blocked; the snapshot is proven against the anchor read before it was taken.
 */
async function openReadOnly(dir: string, options: OpenStoreOptions, seams: StoreSeams): Promise<Store> {
  const location = resolve(dir);
  const layout = await inspectDir(location);
  if (layout.kind !== "store") {
    throw new EvidenceError("ASP_EVIDENCE_NOT_A_STORE", `there is no evidence store at ${location} yet`, {
      data: { path: location, missing: true },
    });
  }
  const snap = await makeSnapshotDir(location);
  const cleanup = () => rm(snap, { recursive: true, force: true });
  try {
    const { anchor } = await copyStoreFiles(location, snap, { mode: "link" });
    // As a writable open does, name damage level would drop before it opens (the copy).
    const wal = await walDamage(snap, anchor.state === "ok" ? anchor.record.seq : 0);
    if (wal.kind === "damaged") throw corrupt(location, wal.reason);
    const kv = await openLevelKv(snap, { create: false, waitMs: 0, label: location });
    return await assembleLevel(kv, options, {
      location,
      anchorRead: anchor,
      markerVersion: layout.markerVersion,
      readOnly: true,
      seams,
      cleanup,
    });
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/**
 * {@link openStore} with test seams (not part of the public API: tests import it from `src`).
 * @throws EvidenceError as {@link openStore}.
 */
export function openStoreWith(dir: string, options: OpenStoreOptions, seams: StoreSeams): Promise<Store> {
  return options.readOnly === true ? openReadOnly(dir, options, seams) : openWritable(dir, options, seams);
}

/**
 * Open (or create) the evidence store in `dir` (level / classic-level). A missing or empty
 * directory becomes a new store, created atomically. A non-empty directory that is not a store
 * is refused, never re-created or truncated.
 *
 * A writable open takes the store's lock; while another process holds it, it waits up to
 * `waitMs` (default 30 s), reporting through `onWait`. It then proves the log still reaches the
 * anchored head (no entry dropped, the log not ended early, the chain not restarted) before
 * anything is appended. A `readOnly` open takes no lock: it reads a private snapshot.
 *
 * @throws EvidenceError `ASP_EVIDENCE_NOT_A_STORE` (non-empty foreign directory, or a file; for
 *   `readOnly`, also a missing store), `ASP_EVIDENCE_STORE_LOCKED` (held by another process or
 *   handle for longer than `waitMs`; `data.pid` names the holder), `ASP_EVIDENCE_STORE_CORRUPT`
 *   (the database does not open, or the log does not reach the anchored head; `data.reason`
 *   names what is missing), `ASP_EVIDENCE_UNSUPPORTED_FORMAT` (newer format). Each names the path.
 * @example
 * ```ts
 * const store = await openStore("./.asp/evidence", { waitMs: 60_000 });
 * await store.log.append([{ kind: "note", record: { hello: "world" } }]);
 * await store.close();
 * ```
 */
export function openStore(dir: string, options: OpenStoreOptions = {}): Promise<Store> {
  return openStoreWith(dir, options, {});
}

/** An in-memory store with the same behaviour as {@link openStore}, for tests and demos. Nothing is persisted. */
export async function createMemoryStore(options: StoreOptions = {}): Promise<Store> {
  const kv = createMemoryKv();
  const hasher = options.hasher ?? defaultHasher();
  const clock = options.clock ?? systemClock;
  try {
    const id = await storeId(kv, clock, null);
    const close = (): Promise<void> => kv.close();
    const log = await createKvFactLog(kv, hasher, clock, close);
    return { location: kv.location, id, readOnly: false, log, objects: createKvObjectStore(kv, hasher), hasher, close };
  } catch (error) {
    await kv.close();
    throw error;
  }
}
