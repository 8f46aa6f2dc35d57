import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readdir, rename, rm } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { ANCHOR_FILE, type AnchorRecord, writeAnchorFile } from "./anchor.js";
import { canonicalize, parseCanonical } from "./canonical.js";
import { fsyncPath } from "./durable.js";
import { EvidenceError } from "./errors.js";
import { chainEntry, decodeEntry, headOp, indexOps, prepareFact, readHead, seqKey } from "./fact-log.js";
import { copyStoreFiles, makeSnapshotDir } from "./files.js";
import { type Digest, defaultHasher, digestBytes, type Hasher } from "./hash.js";
import { type Kv, type KvOp, openLevelKv, repairLevel, toBytes } from "./kv.js";
import { checkMarker, LEVEL_DATA, MARKER_FILE, STORE_FORMAT, STORE_VERSION, writeMarker } from "./layout.js";
import type { Clock, FactLogHead } from "./store.js";
import { walDamage, walLogEntries } from "./wal.js";

/**
 * Recovery that keeps what survives. Both {@link checkStore} and {@link salvageStore} work on a
 * private copy of the store's files (tables hard-linked, the rest copied), so level's own
 * recovery, and its repair when the database does not open, only ever run on the copy: the
 * damaged store is never modified, and stays as it was for a later look.
 */

/** The kinds of damage {@link checkStore} names (stable vocabulary). */
export type StoreDamageKind =
  /** The marker file is missing or unreadable. */
  | "marker"
  /** The anchor file is missing, or none of its slots verifies. */
  | "anchor"
  /** One anchor slot does not verify (a torn write or a flipped bit); the other holds. Not fatal. */
  | "anchor-slot"
  /** Level refuses the database (the private copy was repaired to read what survives). */
  | "database"
  /** The format record is gone, or names another store than the anchor. */
  | "format"
  /** A seq range of the log is gone. */
  | "missing"
  /** Entries present whose bytes do not verify. */
  | "entry"
  /** An entry that verifies on its own does not link to its predecessor. */
  | "link"
  /** The entry at the anchored seq has another digest: the chain was restarted or replaced. */
  | "replaced"
  /** The head pointer disagrees with the log's last entry. */
  | "head"
  /** A write-ahead log record is damaged or cut (level drops it, and the rest of its block, on open). */
  | "wal";

/** One thing {@link checkStore} found wrong. */
export interface StoreDamage {
  readonly kind: StoreDamageKind;
  readonly message: string;
  /** False when the next writable open mends it by itself with nothing lost. */
  readonly fatal: boolean;
  /** The seq range it concerns, when it concerns entries. */
  readonly from?: number;
  readonly to?: number;
}

/** What {@link checkStore} reports. */
export interface StoreCheck {
  /** Nothing fatal: the store opens, every entry verifies, the log reaches the anchored head. */
  readonly ok: boolean;
  readonly path: string;
  /** From the format record; `null` when it is gone. */
  readonly storeId: string | null;
  /** The head the anchor names (`null`: empty, never anchored, or the anchor is gone). */
  readonly anchored: FactLogHead | null;
  /** The head pointer inside the database. */
  readonly head: FactLogHead | null;
  /** Entries 1..n that verify and chain from the start. */
  readonly verified: number;
  /** Entries past the first gap or break that still verify on their own (salvage carries them). */
  readonly stranded: number;
  /** Entries level would drop, read back from damaged write-ahead log records (they verify). */
  readonly recovered: number;
  readonly damage: readonly StoreDamage[];
}

/** A lost seq range, as the salvage record keeps it. */
export interface LostRange {
  readonly from: number;
  readonly to: number;
  /** `missing` (gone), `damaged` (present, does not verify), `replaced` (another chain's entries). */
  readonly reason: "missing" | "damaged" | "replaced";
}

interface Survey {
  readonly check: StoreCheck;
  /** The bytes of entry `seq` (from the copy's database, or recovered from a damaged log record). */
  readonly bytesOf: (seq: number) => Promise<Uint8Array>;
  /** The private copy's database, when it could be read at all. */
  readonly kv: Kv | null;
  readonly hasher: Hasher;
  /** Seqs 1..kept are copied as they are. */
  readonly kept: number;
  /** Seqs past `kept` that verify on their own, in order. */
  readonly strandedSeqs: readonly number[];
  readonly lost: readonly LostRange[];
  readonly anchorRecord: AnchorRecord | null;
}

const span = (from: number, to: number): string => (from === to ? `entry ${from}` : `entries ${from}-${to}`);

async function readMarker(location: string): Promise<{ version: number | null; damage?: StoreDamage }> {
  try {
    return { version: await checkMarker(location) };
  } catch (error) {
    const e = error as EvidenceError;
    if (e.code !== "ASP_EVIDENCE_STORE_CORRUPT") throw error;
    const missing = (e.cause as NodeJS.ErrnoException | undefined)?.code === "ENOENT";
    return {
      version: null,
      damage: {
        kind: "marker",
        message: missing ? `the store marker ${MARKER_FILE} is missing` : String(e.data?.reason ?? e.message),
        fatal: true,
      },
    };
  }
}

async function assertStoreDir(location: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(location);
  } catch {
    throw new EvidenceError("ASP_EVIDENCE_NOT_A_STORE", `${location} is not an evidence store directory`, {
      data: { path: location },
    });
  }
  if (!names.some((n) => n === MARKER_FILE || n === ANCHOR_FILE || LEVEL_DATA.test(n))) {
    throw new EvidenceError("ASP_EVIDENCE_NOT_A_STORE", `${location} is not an evidence store`, {
      data: { path: location },
    });
  }
}

async function openCopy(snap: string, location: string, damage: StoreDamage[]): Promise<Kv | null> {
  try {
    return await openLevelKv(snap, { create: false, waitMs: 0, label: location });
  } catch (error) {
    const reason = ((error as EvidenceError).data?.reason as string | undefined) ?? "the database does not open";
    damage.push({
      kind: "database",
      message: `${reason}; a private copy was repaired to read what survives`,
      fatal: true,
    });
  }
  try {
    await repairLevel(snap);
    return await openLevelKv(snap, { create: false, waitMs: 0, label: location });
  } catch {
    damage.push({ kind: "database", message: "even a repaired copy of the database does not open", fatal: true });
    return null;
  }
}

async function storeIdOf(kv: Kv): Promise<string | null> {
  const raw = await kv.get("meta", "format");
  if (raw === undefined) return null;
  try {
    const v = parseCanonical(raw, "store format record") as { id?: unknown };
    return typeof v.id === "string" ? v.id : null;
  } catch {
    return null;
  }
}

/** Walk the copy: which seqs verify, which are missing or damaged, where the chain from 1 ends. */
interface LogSurvey {
  readonly kept: number;
  readonly stranded: number[];
  readonly lost: LostRange[];
  readonly head: FactLogHead | null;
  readonly storeId: string | null;
  /** Entries read back from damaged log records (not in the database), by seq. */
  readonly recovered: Map<number, Uint8Array>;
}

async function surveyLog(
  kv: Kv,
  hasher: Hasher,
  location: string,
  anchor: AnchorRecord | null,
  damage: StoreDamage[],
  fromWal: ReadonlyArray<{ seq: number; bytes: Uint8Array }>,
): Promise<LogSurvey> {
  const storeId = await storeIdOf(kv);
  const verified = new Map<number, { digest: Digest; prev: Digest | null }>();
  const bad = new Set<number>();
  let maxSeq = 0;
  for await (const [key, bytes] of kv.entries("log")) {
    const seq = Number(key);
    if (!/^\d{16}$/.test(key) || seq < 1) {
      damage.push({ kind: "entry", message: `the log holds a malformed key ${JSON.stringify(key)}`, fatal: true });
      continue;
    }
    maxSeq = Math.max(maxSeq, seq);
    try {
      const e = decodeEntry(bytes, seq, hasher, location);
      verified.set(seq, { digest: e.digest, prev: e.prev });
    } catch {
      bad.add(seq);
    }
  }
  // Entries level dropped with a damaged log record, read back from the record itself.
  const recovered = new Map<number, Uint8Array>();
  for (const { seq, bytes } of fromWal) {
    if (verified.has(seq) || recovered.has(seq)) continue;
    try {
      const e = decodeEntry(bytes, seq, hasher, location);
      verified.set(seq, { digest: e.digest, prev: e.prev });
      recovered.set(seq, bytes);
      bad.delete(seq);
      maxSeq = Math.max(maxSeq, seq);
    } catch {
      if (!verified.has(seq)) {
        bad.add(seq);
        maxSeq = Math.max(maxSeq, seq);
      }
    }
  }
  let head: FactLogHead | null = null;
  try {
    head = await readHead(kv);
  } catch {
    damage.push({ kind: "head", message: "the head pointer is malformed", fatal: true });
  }
  if (storeId === null && (maxSeq > 0 || (anchor?.seq ?? 0) > 0)) {
    damage.push({ kind: "format", message: "the database lost its format record (its store id)", fatal: true });
  } else if (storeId !== null && anchor !== null && storeId !== anchor.store) {
    damage.push({
      kind: "format",
      message: `the database belongs to store ${storeId} but the anchor to store ${anchor.store}`,
      fatal: true,
    });
  }
  // The chain from seq 1, as far as every entry verifies and links.
  let kept = 0;
  let prev: Digest | null = null;
  for (;;) {
    const e = verified.get(kept + 1);
    if (e === undefined || e.prev !== prev) break;
    kept++;
    prev = e.digest;
  }
  const next = verified.get(kept + 1);
  if (next !== undefined) {
    damage.push({
      kind: "link",
      message: `entry ${kept + 1} does not link to entry ${kept}`,
      fatal: true,
      from: kept + 1,
      to: kept + 1,
    });
  }
  const lost: LostRange[] = [];
  if (anchor !== null && anchor.seq > 0 && anchor.seq <= kept) {
    const at = verified.get(anchor.seq);
    if (at?.digest !== anchor.digest) {
      damage.push({
        kind: "replaced",
        message: `entry ${anchor.seq} is not the anchored head: the chain was restarted or replaced, entries 1-${anchor.seq} of the anchored chain are gone`,
        fatal: true,
        from: 1,
        to: anchor.seq,
      });
      lost.push({ from: 1, to: anchor.seq, reason: "replaced" });
    }
  }
  const top = Math.max(maxSeq, anchor?.seq ?? 0, head?.seq ?? 0);
  const stranded: number[] = [];
  let run: { from: number; to: number; reason: "missing" | "damaged" } | undefined;
  const flush = (): void => {
    if (run === undefined) return;
    lost.push(run);
    damage.push({
      kind: run.reason === "missing" ? "missing" : "entry",
      message:
        run.reason === "missing"
          ? `${span(run.from, run.to)} ${run.from === run.to ? "is" : "are"} missing${anchor !== null && run.to <= anchor.seq ? ` (the anchored head is seq ${anchor.seq})` : ""}`
          : `${span(run.from, run.to)} ${run.from === run.to ? "does" : "do"} not verify`,
      fatal: true,
      from: run.from,
      to: run.to,
    });
    run = undefined;
  };
  for (let seq = kept + 1; seq <= top; seq++) {
    if (verified.has(seq)) {
      flush();
      stranded.push(seq);
      continue;
    }
    const reason = bad.has(seq) ? "damaged" : "missing";
    if (run !== undefined && run.reason === reason && run.to === seq - 1) run.to = seq;
    else {
      flush();
      run = { from: seq, to: seq, reason };
    }
  }
  flush();
  const last = verified.get(maxSeq);
  if (head !== null && (head.seq !== maxSeq || last?.digest !== head.digest)) {
    damage.push({
      kind: "head",
      message: `the head pointer (seq ${head.seq}) does not match the log's last entry (seq ${maxSeq})`,
      fatal: true,
    });
  } else if (head === null && maxSeq > 0) {
    damage.push({ kind: "head", message: "entries exist but the head pointer is missing", fatal: true });
  }
  return { kept, stranded, lost, head, storeId, recovered };
}

async function surveyCopy(
  snap: string,
  location: string,
  hasher: Hasher,
  anchor: AnchorRecord | null,
  damage: StoreDamage[],
): Promise<{ kv: Kv | null; log: LogSurvey }> {
  // Read the logs before level does: its recovery drops damaged records and deletes the log.
  const wal = await walDamage(snap, anchor?.seq ?? 0);
  if (wal.kind !== "clean") damage.push({ kind: "wal", message: wal.reason, fatal: wal.kind === "damaged" });
  const fromWal = await walLogEntries(snap);
  let kv = await openCopy(snap, location, damage);
  if (kv !== null) {
    try {
      return { kv, log: await surveyLog(kv, hasher, location, anchor, damage, fromWal) };
    } catch (error) {
      if ((error as EvidenceError).code !== "ASP_EVIDENCE_STORE_CORRUPT") throw error;
      const reason = String((error as EvidenceError).data?.reason ?? "level reported corruption");
      damage.push({
        kind: "database",
        message: `${reason}; a private copy was repaired to read what survives`,
        fatal: true,
      });
      await kv.close();
      try {
        await repairLevel(snap);
        kv = await openLevelKv(snap, { create: false, waitMs: 0, label: location });
        return { kv, log: await surveyLog(kv, hasher, location, anchor, damage, fromWal) };
      } catch {
        damage.push({ kind: "database", message: "even a repaired copy of the database cannot be read", fatal: true });
        kv = null;
      }
    }
  }
  const lost: LostRange[] = anchor !== null && anchor.seq > 0 ? [{ from: 1, to: anchor.seq, reason: "missing" }] : [];
  return {
    kv: null,
    log: { kept: 0, stranded: [], lost, head: null, storeId: null, recovered: new Map() },
  };
}

async function withSurvey<T>(dir: string, use: (survey: Survey) => Promise<T>, hasher: Hasher): Promise<T> {
  const location = resolve(dir);
  await assertStoreDir(location);
  const damage: StoreDamage[] = [];
  const marker = await readMarker(location);
  if (marker.damage !== undefined) damage.push(marker.damage);
  const snap = await makeSnapshotDir(location);
  let kv: Kv | null = null;
  try {
    // Copies, not links: level's repair of the copy must never reach the store's own files.
    const { anchor } = await copyStoreFiles(location, snap, { mode: "copy" });
    let anchorRecord: AnchorRecord | null = null;
    if (anchor.state === "ok") {
      anchorRecord = anchor.record;
      if (!anchor.pristine) {
        damage.push({
          kind: "anchor-slot",
          message:
            "one anchor slot does not verify (a torn write or damage); the other holds, and the next writable open rewrites both",
          fatal: false,
        });
      }
    } else if (anchor.state === "damaged") {
      damage.push({ kind: "anchor", message: anchor.reason, fatal: true });
    } else if (marker.version === null || marker.version >= STORE_VERSION) {
      damage.push({ kind: "anchor", message: `the anchor file ${ANCHOR_FILE} is missing`, fatal: true });
    }
    const surveyed = await surveyCopy(snap, location, hasher, anchorRecord, damage);
    kv = surveyed.kv;
    const log = surveyed.log;
    const anchored =
      anchorRecord === null || anchorRecord.seq === 0 || anchorRecord.digest === null
        ? null
        : { seq: anchorRecord.seq, digest: anchorRecord.digest };
    const check: StoreCheck = {
      ok: !damage.some((d) => d.fatal),
      path: location,
      storeId: log.storeId,
      anchored,
      head: log.head,
      verified: log.kept,
      stranded: log.stranded.length,
      recovered: log.recovered.size,
      damage,
    };
    const db = kv;
    return await use({
      check,
      bytesOf: async (seq) => {
        const bytes = log.recovered.get(seq) ?? (await db?.get("log", seqKey(seq)));
        if (bytes === undefined)
          throw new EvidenceError("ASP_EVIDENCE_NOT_FOUND", `entry ${seq} vanished`, { data: { seq } });
        return bytes;
      },
      kv,
      hasher,
      kept: log.kept,
      strandedSeqs: log.stranded,
      lost: log.lost,
      anchorRecord,
    });
  } finally {
    await kv?.close();
    await rm(snap, { recursive: true, force: true });
  }
}

/**
 * Report what is wrong with the store in `dir`, without modifying it: the marker, the anchor,
 * whether level opens the database, the format record, every entry (re-hashed), gaps, breaks and
 * how the log compares with the anchored head. Works on a private copy, so it may run while a
 * writer holds the store.
 *
 * @throws EvidenceError `ASP_EVIDENCE_NOT_A_STORE` (no store there), `ASP_EVIDENCE_UNSUPPORTED_FORMAT`,
 *   `ASP_EVIDENCE_IO` (the store could not be copied).
 */
export function checkStore(dir: string, options: { readonly hasher?: Hasher } = {}): Promise<StoreCheck> {
  return withSurvey(dir, async (s) => s.check, options.hasher ?? defaultHasher());
}

/** Options of {@link salvageStore}. */
export interface SalvageOptions {
  /** Time of the salvage record (default: the system clock). */
  readonly clock?: Clock;
  readonly hasher?: Hasher;
}

/** What {@link salvageStore} made. */
export interface SalvageResult {
  /** The new store. */
  readonly path: string;
  /** Its new id. */
  readonly storeId: string;
  /** What the damaged store looked like (it was not modified). */
  readonly source: StoreCheck;
  /** Entries 1..kept, copied byte for byte (same seqs and digests: heads recorded before still verify). */
  readonly kept: number;
  /** Seq ranges of the source that are gone. */
  readonly lost: readonly LostRange[];
  /** Entries past a gap that still verified, appended after the salvage record (new seqs). */
  readonly carried: number;
  /** Blobs and trees copied (each re-hashed first); `skipped` did not verify. */
  readonly objects: { readonly copied: number; readonly skipped: number };
  /** The new store's head (its last entry is the last carried one or the salvage record). */
  readonly head: FactLogHead;
}

/** The fact kind of the record a salvage leaves in the new store. */
export const SALVAGE_KIND = "evidence.salvage";

/**
 * Resolve a backup or salvage target, which must be missing or an empty directory.
 * @throws EvidenceError `ASP_EVIDENCE_TARGET_NOT_EMPTY`.
 */
export async function targetDir(out: string): Promise<string> {
  const target = resolve(out);
  try {
    const names = await readdir(target);
    if (names.length > 0) {
      throw new EvidenceError(
        "ASP_EVIDENCE_TARGET_NOT_EMPTY",
        `${target} exists and is not empty; choose a new directory`,
        {
          data: { path: target },
        },
      );
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOTDIR") {
      throw new EvidenceError("ASP_EVIDENCE_TARGET_NOT_EMPTY", `${target} is a file; choose a new directory`, {
        data: { path: target },
      });
    }
    if (code !== "ENOENT") throw error;
  }
  return target;
}

/** Move a finished temp directory onto `target` (missing or empty), durably. */
export async function publishDir(tmp: string, target: string): Promise<void> {
  try {
    await rename(tmp, target);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOTEMPTY" || code === "EEXIST" || code === "ENOTDIR") {
      throw new EvidenceError(
        "ASP_EVIDENCE_TARGET_NOT_EMPTY",
        `${target} was filled meanwhile; choose a new directory`,
        {
          data: { path: target },
        },
      );
    }
    throw error;
  }
  await fsyncPath(dirname(target));
}

/** A sibling temp directory of `target` (same filesystem, so it can be renamed onto it). */
export async function siblingTemp(target: string, what: string): Promise<string> {
  await mkdir(dirname(target), { recursive: true });
  return mkdtemp(`${target}.${what}-`);
}

async function copyObjects(from: Kv, to: Kv, hasher: Hasher): Promise<{ copied: number; skipped: number }> {
  let copied = 0;
  let skipped = 0;
  for (const space of ["blob", "tree"] as const) {
    let ops: KvOp[] = [];
    for await (const [key, bytes] of from.entries(space)) {
      if (digestBytes(bytes, hasher) !== key) {
        skipped++;
        continue;
      }
      ops.push({ type: "put", space, key, value: bytes });
      copied++;
      if (ops.length >= 1000) {
        await to.batch(ops, false);
        ops = [];
      }
    }
    if (ops.length > 0) await to.batch(ops, false);
  }
  return { copied, skipped };
}

/**
 * Copy every entry of the store in `dir` that still verifies into a new store at `out`, and
 * record in it what was lost and from which store; never modify the damaged store.
 *
 * The new store holds, in order: entries 1..k of the source byte for byte (the chain from seq 1
 * as far as every entry verifies and links, so heads recorded from it still verify), then one
 * `evidence.salvage` record (source path and id, its anchored and head pointers, the lost seq
 * ranges, the entries carried), then each later entry that still verifies on its own, re-chained
 * with its kind, record, index, state and time. Every blob and tree that re-hashes to its id is
 * copied. The new store is built in a temp directory beside `out` and renamed onto it, verified
 * and anchored.
 *
 * @throws EvidenceError `ASP_EVIDENCE_TARGET_NOT_EMPTY` (`out` exists and is not empty),
 *   `ASP_EVIDENCE_NOT_A_STORE`, `ASP_EVIDENCE_UNSUPPORTED_FORMAT`, `ASP_EVIDENCE_IO`.
 */
export async function salvageStore(dir: string, out: string, options: SalvageOptions = {}): Promise<SalvageResult> {
  const target = await targetDir(out);
  const hasher = options.hasher ?? defaultHasher();
  const clock = options.clock ?? { now: () => new Date() };
  return withSurvey(
    dir,
    async (s) => {
      const tmp = await siblingTemp(target, "salvaging");
      try {
        const id = randomUUID();
        await writeMarker(tmp);
        await writeAnchorFile(tmp, { store: id, seq: 0, digest: null });
        const kv = await openLevelKv(tmp, { create: true, waitMs: 0 });
        let head: FactLogHead;
        let objects = { copied: 0, skipped: 0 };
        try {
          const at = clock.now().toISOString();
          const format = { format: STORE_FORMAT, version: 1, id, createdAt: at };
          await kv.batch([{ type: "put", space: "meta", key: "format", value: toBytes(canonicalize(format)) }], false);
          if (s.kv !== null) objects = await copyObjects(s.kv, kv, hasher);
          let ops: KvOp[] = [];
          let prev: Digest | null = null;
          for (let seq = 1; seq <= s.kept; seq++) {
            const bytes = await s.bytesOf(seq);
            const e = decodeEntry(bytes, seq, hasher, s.check.path);
            ops.push({ type: "put", space: "log", key: seqKey(seq), value: bytes }, ...indexOps(e));
            prev = e.digest;
            if (ops.length >= 2000) {
              await kv.batch(ops, false);
              ops = [];
            }
          }
          const carried = [];
          for (const seq of s.strandedSeqs) {
            const bytes = await s.bytesOf(seq);
            carried.push(decodeEntry(bytes, seq, hasher, s.check.path));
          }
          const record = {
            source: { path: s.check.path, storeId: s.check.storeId },
            anchoredHead: s.check.anchored,
            sourceHead: s.check.head,
            kept: s.kept === 0 ? null : { from: 1, to: s.kept },
            lost: s.lost,
            carried: carried.map((e) => ({ seq: e.seq, digest: e.digest })),
            damage: s.check.damage.map((d) => d.message),
          };
          let seq = s.kept + 1;
          const salvage = chainEntry(
            seq,
            at,
            prepareFact({ kind: SALVAGE_KIND, record, state: [SALVAGE_KIND] }),
            prev,
            hasher,
          );
          ops.push(...salvage.ops);
          head = { seq, digest: salvage.entry.digest };
          for (const e of carried) {
            seq++;
            const fact = prepareFact({ kind: e.kind, record: e.record, index: e.index, state: e.state });
            const c = chainEntry(seq, e.at, fact, head.digest, hasher);
            ops.push(...c.ops);
            head = { seq, digest: c.entry.digest };
            if (ops.length >= 2000) {
              await kv.batch(ops, false);
              ops = [];
            }
          }
          ops.push(headOp(head));
          // One synced batch last: level's log is ordered, so everything before it is durable too.
          await kv.batch(ops, true);
        } finally {
          await kv.close();
        }
        await writeAnchorFile(tmp, { store: id, seq: head.seq, digest: head.digest });
        await publishDir(tmp, target);
        return {
          path: target,
          storeId: id,
          source: s.check,
          kept: s.kept,
          lost: s.lost,
          carried: s.strandedSeqs.length,
          objects,
          head,
        };
      } catch (error) {
        await rm(tmp, { recursive: true, force: true });
        throw error;
      }
    },
    hasher,
  );
}
