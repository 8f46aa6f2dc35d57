import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";

/**
 * A reader of LevelDB's write-ahead log format, so the store can look at a log BEFORE level
 * does: level's recovery drops a record whose checksum fails (and everything after it in its
 * block) and then deletes the log, so once it has run, what was damaged is gone for good.
 *
 * Format (leveldb `doc/log_format.md`): 32 KiB blocks of records, each a 7-byte header
 * (masked CRC32C of type + payload, little-endian u16 length, type: 1 full, 2 first, 3 middle,
 * 4 last; 0 is preallocated padding) and its payload; fewer than 7 bytes left in a block are a
 * zero trailer. A logical record (a write batch) is one full record or first..middle..last.
 * A write batch: u64 sequence, u32 count, then per op a tag (1 put, 0 delete), varint32-prefixed
 * key and, for a put, a varint32-prefixed value.
 */

const BLOCK = 32768;
const HEADER = 7;
const MASK_DELTA = 0xa282ead8;

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

/** CRC32C (Castagnoli), as LevelDB computes it. */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let c = 0xffffffff;
  for (let i = start; i < end; i++) c = (CRC_TABLE[(c ^ (bytes[i] as number)) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

const unmask = (masked: number): number => {
  const rot = (masked - MASK_DELTA) >>> 0;
  return ((rot >>> 17) | (rot << 15)) >>> 0;
};

/** One logical record of a log file. */
export interface WalRecord {
  /** Byte offset of its first physical record. */
  readonly offset: number;
  /** Every fragment's checksum holds and the fragments are in order. */
  readonly ok: boolean;
  /** The payload (a write batch), assembled even from bad fragments; null when it cannot be. */
  readonly payload: Buffer | null;
  /** The file ended inside it (a write cut by a crash), as opposed to damaged bytes. */
  readonly truncated: boolean;
}

/** Parse a log file's bytes into logical records, keeping damaged ones (never throws). */
export function readWal(bytes: Buffer): WalRecord[] {
  const out: WalRecord[] = [];
  let parts: Buffer[] | null = null;
  let partsOk = true;
  let partsAt = 0;
  const finish = (ok: boolean, truncated = false): void => {
    out.push({ offset: partsAt, ok, payload: parts === null ? null : Buffer.concat(parts), truncated });
    parts = null;
    partsOk = true;
  };
  let pos = 0;
  while (pos < bytes.length) {
    const left = BLOCK - (pos % BLOCK);
    if (left < HEADER) {
      pos += left; // trailer
      continue;
    }
    if (pos + HEADER > bytes.length) {
      if (parts !== null) finish(false, true);
      else out.push({ offset: pos, ok: false, payload: null, truncated: true });
      break;
    }
    const length = bytes.readUInt16LE(pos + 4);
    const type = bytes[pos + 6] as number;
    if (type === 0 && length === 0) {
      pos += HEADER; // preallocated zeros
      continue;
    }
    const end = pos + HEADER + length;
    if (HEADER + length > left || type > 4 || type === 0) {
      // A damaged header: the rest of this block cannot be framed (level skips it too).
      if (parts !== null) finish(false);
      out.push({ offset: pos, ok: false, payload: null, truncated: false });
      pos += left;
      continue;
    }
    if (end > bytes.length) {
      // Cut short: keep what is there, so the entries it still holds can be named.
      const partial = bytes.subarray(pos + HEADER);
      if (parts !== null) {
        (parts as Buffer[]).push(partial);
        finish(false, true);
      } else {
        partsAt = pos;
        parts = [partial];
        finish(false, true);
      }
      break;
    }
    const ok = unmask(bytes.readUInt32LE(pos)) === crc32c(bytes, pos + 6, end);
    const payload = bytes.subarray(pos + HEADER, end);
    if (type === 1 || type === 2) {
      if (parts !== null) finish(false); // a first/full while one was open: the open one is cut
      partsAt = pos;
      parts = [payload];
      partsOk = ok;
      if (type === 1) finish(partsOk);
    } else if (parts === null) {
      out.push({ offset: pos, ok: false, payload: null, truncated: false }); // a middle/last with no first
    } else {
      (parts as Buffer[]).push(payload);
      partsOk &&= ok;
      if (type === 4) finish(partsOk);
    }
    pos = end;
  }
  if (parts !== null) finish(false, true);
  return out;
}

function varint(b: Buffer, at: number): [number, number] | null {
  let v = 0;
  for (let shift = 0, i = at; i < b.length && shift <= 28; shift += 7, i++) {
    const byte = b[i] as number;
    v |= (byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return [v >>> 0, i + 1];
  }
  return null;
}

/** The puts of a write batch payload (bounds-checked; stops at the first malformed op). */
export function batchPuts(payload: Buffer): Array<{ key: string; value: Buffer }> {
  const out: Array<{ key: string; value: Buffer }> = [];
  if (payload.length < 12) return out;
  const count = payload.readUInt32LE(8);
  let at = 12;
  for (let n = 0; n < count && at < payload.length; n++) {
    const tag = payload[at++] as number;
    const k = varint(payload, at);
    if (k === null || k[1] + k[0] > payload.length) break;
    const key = payload.subarray(k[1], k[1] + k[0]).toString("utf8");
    at = k[1] + k[0];
    if (tag === 0) continue;
    if (tag !== 1) break;
    const v = varint(payload, at);
    if (v === null || v[1] + v[0] > payload.length) break;
    out.push({ key, value: payload.subarray(v[1], v[1] + v[0]) });
    at = v[1] + v[0];
  }
  return out;
}

const LOG_KEY = /^!log!(\d{16})$/;
const WAL_FILE = /^(\d{6})\.log$/;

/** Fact log seqs a write batch puts. */
export function logSeqs(payload: Buffer): number[] {
  return batchPuts(payload).flatMap(({ key }) => {
    const m = LOG_KEY.exec(key);
    return m === null ? [] : [Number(m[1])];
  });
}

/** Log files of a level directory, oldest first. */
export async function walFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => WAL_FILE.test(n)).sort();
}

/** Names, sizes and modification times of a directory's log files: equal means nothing to re-read. */
export async function walSignature(dir: string): Promise<string> {
  const parts: string[] = [];
  for (const name of await walFiles(dir)) {
    try {
      const st = await stat(join(dir, name));
      parts.push(`${name}:${st.size}:${st.mtimeMs}`);
    } catch {
      parts.push(`${name}:gone`);
    }
  }
  return parts.join(",");
}

const seqSpan = (seqs: number[]): string =>
  seqs.length === 0 ? "" : ` (holding entries ${Math.min(...seqs)}-${Math.max(...seqs)})`;

/** What {@link walDamage} found. */
export type WalVerdict =
  | { readonly kind: "clean" }
  /** Damage level would drop that holds (or may hold) acknowledged entries. */
  | { readonly kind: "damaged"; readonly reason: string }
  /** A bad record at the very end whose entries cannot be read: a cut write, or damage. */
  | { readonly kind: "unreadable-tail"; readonly reason: string };

/**
 * Look for damage level would silently drop: a record whose checksum fails (or whose frame is
 * broken) with an intact record after it, in an older log file, or, at the end of the newest
 * log, one (damaged or cut short) holding an entry at or below the anchored seq: acknowledged,
 * so not a write a crash cut. A bad or cut tail holding only later entries is what a crash
 * mid-append leaves: clean. A bad tail whose entries cannot be read is `unreadable-tail`: the
 * caller proves a copy before letting level near the store. Files that vanish are skipped.
 */
export async function walDamage(dir: string, anchoredSeq: number): Promise<WalVerdict> {
  const files = await walFiles(dir);
  let unreadable: string | null = null;
  for (const [i, name] of files.entries()) {
    let bytes: Buffer;
    try {
      bytes = await readFile(join(dir, name));
    } catch {
      continue;
    }
    const records = readWal(bytes);
    const newest = i === files.length - 1;
    let lastGood = -1;
    records.forEach((r, j) => {
      if (r.ok) lastGood = j;
    });
    for (const [j, r] of records.entries()) {
      if (r.ok) continue;
      const seqs = r.payload === null ? [] : logSeqs(r.payload);
      const what = `the write-ahead log ${name} ${r.truncated ? "is cut short" : "is damaged"} at byte ${r.offset}${seqSpan(seqs)}`;
      const tail = newest && j > lastGood;
      if (!tail || seqs.some((s) => s <= anchoredSeq)) return { kind: "damaged", reason: what };
      if (seqs.length === 0 && !r.truncated) unreadable ??= what;
    }
  }
  return unreadable === null ? { kind: "clean" } : { kind: "unreadable-tail", reason: unreadable };
}

/**
 * Every fact log entry a level directory's logs still hold, including those inside damaged
 * records whose frame can be read (the caller re-verifies each entry's own digest).
 */
export async function walLogEntries(dir: string): Promise<Array<{ seq: number; bytes: Buffer; damaged: boolean }>> {
  const out: Array<{ seq: number; bytes: Buffer; damaged: boolean }> = [];
  for (const name of await walFiles(dir)) {
    let bytes: Buffer;
    try {
      bytes = await readFile(join(dir, name));
    } catch {
      continue;
    }
    for (const r of readWal(bytes)) {
      if (r.payload === null) continue;
      for (const { key, value } of batchPuts(r.payload)) {
        const m = LOG_KEY.exec(key);
        if (m !== null) out.push({ seq: Number(m[1]), bytes: Buffer.from(value), damaged: !r.ok });
      }
    }
  }
  return out;
}
