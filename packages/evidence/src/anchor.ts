import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { type FileHandle, open as openFile, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { replaceFile } from "./durable.js";
import { EvidenceError } from "./errors.js";
import { type Digest, isDigest } from "./hash.js";

/**
 * The anchored head: the fact log's head (store id, seq, entry digest) kept in a small file
 * beside the database, outside level's write-ahead log, so that a damaged, truncated or deleted
 * log cannot take the record of where the log ended with it.
 *
 * The file is two fixed 4 KiB slots, each a checksummed JSON line padded with zeros. An append
 * overwrites the slot that does NOT hold the current anchor, in place, with `O_DSYNC` (one data
 * flush, no size or directory change, so no `ENOSPC` and no metadata journal commit), and only
 * after the log batch it names is durable. A write torn by a crash damages only the slot being
 * written; the other still names an older head that the log reaches. The slots sit in separate
 * pages so a torn page cannot take both.
 */
export const ANCHOR_FILE = "ASP-EVIDENCE-HEAD";
const SLOT_SIZE = 4096;
/** Size of a well-formed anchor file. */
export const ANCHOR_SIZE = 2 * SLOT_SIZE;
const ANCHOR_VERSION = 1;

/** What the anchor records: the store it belongs to and the last durable head (`seq` 0: empty log). */
export interface AnchorRecord {
  readonly store: string;
  readonly seq: number;
  readonly digest: Digest | null;
}

/** The anchor file as read: missing, damaged (no slot verifies), or the newest slot that verifies. */
export type AnchorRead =
  | { readonly state: "missing" }
  | { readonly state: "damaged"; readonly reason: string }
  | {
      readonly state: "ok";
      readonly record: AnchorRecord;
      /** The slot holding `record`; the next write goes to the other one. */
      readonly slot: 0 | 1;
      /** Both slots verify and the file has its exact size (false after a torn write or damage). */
      readonly pristine: boolean;
    };

const sortedText = (r: AnchorRecord): string =>
  `{"digest":${JSON.stringify(r.digest)},"seq":${r.seq},"store":${JSON.stringify(r.store)},"v":${ANCHOR_VERSION}}`;
const checkOf = (r: AnchorRecord): string => createHash("sha256").update(sortedText(r)).digest("hex");

/** One slot's bytes: `{"check":...,"digest":...,"seq":...,"store":...,"v":1}\n` and zeros. */
export function encodeSlot(record: AnchorRecord): Buffer {
  const body = sortedText(record);
  const line = `{"check":"${checkOf(record)}",${body.slice(1)}\n`;
  const slot = Buffer.alloc(SLOT_SIZE);
  slot.write(line, 0, "utf8");
  return slot;
}

type SlotRead = { readonly ok: true; readonly record: AnchorRecord } | { readonly ok: false; readonly reason: string };

function decodeSlot(bytes: Buffer): SlotRead {
  const end = bytes.indexOf(0x0a);
  if (end <= 0) return { ok: false, reason: "no record line" };
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(bytes.subarray(0, end).toString("utf8")) as Record<string, unknown>;
  } catch {
    return { ok: false, reason: "record is not JSON" };
  }
  if (
    v === null ||
    typeof v !== "object" ||
    v.v !== ANCHOR_VERSION ||
    typeof v.store !== "string" ||
    v.store.length === 0 ||
    typeof v.seq !== "number" ||
    !Number.isSafeInteger(v.seq) ||
    v.seq < 0 ||
    !(v.seq === 0 ? v.digest === null : isDigest(v.digest)) ||
    typeof v.check !== "string"
  ) {
    return { ok: false, reason: "record has the wrong shape" };
  }
  const record: AnchorRecord = { store: v.store, seq: v.seq, digest: v.digest as Digest | null };
  if (checkOf(record) !== v.check) return { ok: false, reason: "checksum mismatch" };
  return { ok: true, record };
}

/** Parse anchor file bytes (exported for tests and recovery). */
export function parseAnchor(bytes: Buffer): AnchorRead {
  const slots = [0, 1].map((i) => decodeSlot(bytes.subarray(i * SLOT_SIZE, (i + 1) * SLOT_SIZE)));
  const valid = slots.flatMap((s, i) => (s.ok ? [{ record: s.record, slot: i as 0 | 1 }] : []));
  if (valid.length === 0) {
    const why = slots.map((s, i) => `slot ${i}: ${s.ok ? "ok" : s.reason}`).join(", ");
    return { state: "damaged", reason: `no anchor slot verifies (${why}; ${bytes.length} bytes)` };
  }
  const [a, b] = valid;
  if (a !== undefined && b !== undefined) {
    if (a.record.store !== b.record.store)
      return { state: "damaged", reason: "the two anchor slots name different stores" };
    if (a.record.seq === b.record.seq && a.record.digest !== b.record.digest)
      return { state: "damaged", reason: `the two anchor slots name different heads at seq ${a.record.seq}` };
  }
  const best = b !== undefined && a !== undefined && b.record.seq > a.record.seq ? b : (a as NonNullable<typeof a>);
  return {
    state: "ok",
    record: best.record,
    slot: best.slot,
    pristine: valid.length === 2 && bytes.length === ANCHOR_SIZE,
  };
}

/** Read the anchor of the store in `dir`. */
export async function readAnchor(dir: string): Promise<AnchorRead> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(dir, ANCHOR_FILE));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { state: "missing" };
    return { state: "damaged", reason: `the anchor file is unreadable (${(error as NodeJS.ErrnoException).code})` };
  }
  return parseAnchor(bytes);
}

/**
 * Write a fresh anchor file naming `record` in both slots: a temp file, fsync, atomic rename,
 * directory fsync. Used at creation, migration and repair (never on the append path).
 */
export async function writeAnchorFile(dir: string, record: AnchorRecord): Promise<void> {
  const slot = encodeSlot(record);
  await replaceFile(dir, ANCHOR_FILE, Buffer.concat([slot, slot]));
}

/** Remove a temp file a crash left behind (harmless when absent). */
export async function removeAnchorTemp(dir: string): Promise<void> {
  await rm(join(dir, `${ANCHOR_FILE}.tmp`), { force: true });
}

/** How one slot write reaches the file; tests replace it to inject `ENOSPC`/`EIO` (a named fault seam). */
export type SlotWriter = (fh: FileHandle, bytes: Buffer, position: number) => Promise<void>;

const writeSlot: SlotWriter = async (fh, bytes, position) => {
  const { bytesWritten } = await fh.write(bytes, 0, bytes.length, position);
  if (bytesWritten !== bytes.length) {
    throw Object.assign(new Error(`short anchor write (${bytesWritten} of ${bytes.length} bytes)`), { code: "EIO" });
  }
};

/** An open anchor: the append path's handle on the anchor file. */
export interface Anchor {
  /** What the anchor names now. */
  current(): AnchorRecord;
  /** Make `head` the anchored head: overwrite the other slot in place, durably. */
  write(head: { readonly seq: number; readonly digest: Digest }): Promise<void>;
  close(): Promise<void>;
}

/** Open the anchor file of `dir` for appends; `read` is what {@link readAnchor} found (state `ok`). */
export async function openAnchor(
  dir: string,
  read: { readonly record: AnchorRecord; readonly slot: 0 | 1 },
  writer: SlotWriter = writeSlot,
): Promise<Anchor> {
  const fh = await openFile(join(dir, ANCHOR_FILE), constants.O_RDWR | constants.O_DSYNC);
  let record = read.record;
  let slot = read.slot;
  return {
    current: () => record,
    async write(head) {
      const next: AnchorRecord = { store: record.store, seq: head.seq, digest: head.digest };
      const target = slot === 0 ? 1 : 0;
      await writer(fh, encodeSlot(next), target * SLOT_SIZE);
      record = next;
      slot = target;
    },
    close: () => fh.close(),
  };
}

/** The error for a store whose log does not reach its anchored head (or whose anchor is gone). */
export function corrupt(location: string, reason: string, data: Record<string, unknown> = {}): EvidenceError {
  return new EvidenceError(
    "ASP_EVIDENCE_STORE_CORRUPT",
    `the evidence store at ${location} is damaged: ${reason}; nothing was appended to it. Run \`asp store check\`, then \`asp store salvage\` or restore a backup`,
    { data: { path: location, reason, ...data } },
  );
}
