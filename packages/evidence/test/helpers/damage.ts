import { createHash } from "node:crypto";
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The file kinds of a level-backed evidence store, as the fault suite names them. */
export type FileKind = "wal" | "table" | "manifest" | "current" | "marker" | "anchor";

const KIND_OF: ReadonlyArray<readonly [FileKind, RegExp]> = [
  ["wal", /^\d{6}\.log$/],
  ["table", /^\d{6}\.(ldb|sst)$/],
  ["manifest", /^MANIFEST-\d{6}$/],
  ["current", /^CURRENT$/],
  ["marker", /^ASP-EVIDENCE-STORE\.json$/],
  ["anchor", /^ASP-EVIDENCE-HEAD$/],
];

/** The files of one kind in a store directory, largest first. */
export function filesOf(dir: string, kind: FileKind): string[] {
  const re = KIND_OF.find(([k]) => k === kind)?.[1] as RegExp;
  return readdirSync(dir)
    .filter((f) => re.test(f))
    .map((f) => join(dir, f))
    .sort((a, b) => statSync(b).size - statSync(a).size);
}

/** The one (largest) file of a kind; throws when the store has none. */
export function fileOf(dir: string, kind: FileKind): string {
  const file = filesOf(dir, kind)[0];
  if (file === undefined) throw new Error(`no ${kind} file in ${dir}: ${readdirSync(dir).join(", ")}`);
  return file;
}

/** Invert `count` bytes of `file` starting at `at` (negative: from the end). */
export function flipBytes(file: string, at: number, count = 4): void {
  const bytes = readFileSync(file);
  const start = at < 0 ? bytes.length + at : at;
  for (let i = start; i < start + count && i < bytes.length; i++) bytes[i] = (bytes[i] as number) ^ 0xff;
  writeFileSync(file, bytes);
}

/** Invert 4 bytes in the middle of the first occurrence of `text` in `file`; throws when absent. */
export function flipInside(file: string, text: string): void {
  const at = readFileSync(file).indexOf(Buffer.from(text));
  if (at < 0) throw new Error(`${text} is not in ${file}`);
  flipBytes(file, at + Math.floor(text.length / 2));
}

/** Cut `file` to `length` bytes (negative: that many bytes off the end). */
export function truncateFile(file: string, length: number): void {
  const bytes = readFileSync(file);
  writeFileSync(file, bytes.subarray(0, length < 0 ? Math.max(0, bytes.length + length) : length));
}

/** Delete `file`. */
export function deleteFile(file: string): void {
  rmSync(file);
}

/**
 * name -> sha256 of every file in `dir` but level's diagnostics (`LOG`, `LOG.old`, the empty
 * `LOCK`, which any open attempt rewrites): equal before and after means no data was touched.
 */
export function fingerprint(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir).sort()) {
    if (name === "LOG" || name === "LOG.old" || name === "LOCK") continue;
    out[name] = createHash("sha256")
      .update(readFileSync(join(dir, name)))
      .digest("hex");
  }
  return out;
}
