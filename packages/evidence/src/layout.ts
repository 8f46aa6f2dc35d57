import { randomUUID } from "node:crypto";
import { mkdir, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { ANCHOR_FILE, type AnchorRead, corrupt, readAnchor, removeAnchorTemp, writeAnchorFile } from "./anchor.js";
import { replaceFile } from "./durable.js";
import { EvidenceError } from "./errors.js";

/**
 * The files of a store directory: our marker, our anchor and holder files, and level's own
 * files. What a directory is (new, ours, foreign, damaged) is decided here, before level sees it.
 */

/** The file that marks a directory as an evidence store (written before anything else). */
export const MARKER_FILE = "ASP-EVIDENCE-STORE.json";
/** Store format this code writes and reads. */
export const STORE_FORMAT = "@asp/evidence-store";
/**
 * Marker version this code writes: 2 = the anchored head is required (a store without its
 * anchor file is damaged). Version 1 stores (written before anchors) are anchored on their next
 * writable open.
 */
export const STORE_VERSION = 2;

/** Files a writer or reader of ours keeps beside level's files (copied or skipped by name). */
export const HOLDER_FILE = "ASP-EVIDENCE-HOLDER.json";

/** Level's files that hold data: the write-ahead logs, tables, manifests and the CURRENT pointer. */
export const LEVEL_DATA = /^(\d{6}\.(log|ldb|sst)|MANIFEST-\d{6}|CURRENT)$/;

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

/** Write the marker (atomically: temp, fsync, rename, directory fsync). */
export async function writeMarker(dir: string, version = STORE_VERSION): Promise<void> {
  await mkdir(dir, { recursive: true });
  await replaceFile(dir, MARKER_FILE, `${JSON.stringify({ format: STORE_FORMAT, version })}\n`);
}

/** Read and check the marker; returns its version. */
export async function checkMarker(dir: string): Promise<number> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(join(dir, MARKER_FILE), "utf8"));
  } catch (cause) {
    throw new EvidenceError("ASP_EVIDENCE_STORE_CORRUPT", `the store marker ${MARKER_FILE} in ${dir} is unreadable`, {
      cause,
      data: { path: dir, reason: `the store marker ${MARKER_FILE} is unreadable` },
    });
  }
  const m = parsed as { format?: unknown; version?: unknown } | null;
  if (m !== null && typeof m === "object" && typeof m.format === "string" && m.format !== STORE_FORMAT) {
    throw new EvidenceError(
      "ASP_EVIDENCE_NOT_A_STORE",
      `${dir} has a ${MARKER_FILE} of another format (${m.format.slice(0, 100)})`,
      { data: { path: dir } },
    );
  }
  if (m === null || typeof m !== "object" || m.format !== STORE_FORMAT || typeof m.version !== "number") {
    // Valid JSON but not the marker's shape: flipped or cut bytes, not somebody else's file.
    throw corrupt(dir, `the store marker ${MARKER_FILE} is damaged`);
  }
  if (m.version > STORE_VERSION) {
    throw new EvidenceError(
      "ASP_EVIDENCE_UNSUPPORTED_FORMAT",
      `the evidence store at ${dir} has format version ${m.version}; this build reads up to ${STORE_VERSION}: upgrade @asp/evidence`,
      { data: { path: dir, version: m.version } },
    );
  }
  return m.version;
}

/**
 * Check LevelDB's CURRENT -> MANIFEST pointer before LevelDB sees the directory, so a store
 * whose pointer is gone or garbage is refused without LevelDB touching any file in it.
 */
function checkCurrent(dir: string, entries: readonly string[], current: string | undefined): void {
  const fail = (why: string): never => {
    throw new EvidenceError(
      "ASP_EVIDENCE_STORE_CORRUPT",
      `the evidence store at ${dir} is damaged (${why}); it was left untouched`,
      { data: { path: dir, reason: why } },
    );
  };
  if (!entries.includes("CURRENT")) fail("CURRENT is missing");
  if (current === undefined) fail("CURRENT is unreadable");
  const m = /^(MANIFEST-\d+)\n$/.exec(current as string);
  if (m === null) fail("CURRENT does not name a manifest");
  else if (!entries.includes(m[1] as string)) fail(`${m[1]} is missing`);
}

/** What {@link inspectDir} found. */
export type Layout =
  /** Missing or empty: a new store is to be created (atomically, see `createStoreDir`). */
  | { readonly kind: "new"; readonly location: string }
  /**
   * Our marker and files but no database yet: a creation a crash interrupted (stores written
   * before creation became atomic). Level creates the database in place.
   */
  | { readonly kind: "unborn"; readonly location: string; readonly markerVersion: number }
  /** A store with a database whose CURRENT names a manifest that exists. */
  | { readonly kind: "store"; readonly location: string; readonly markerVersion: number };

/**
 * Classify `location` before level sees it: new, ours, foreign, damaged. Reads only.
 *
 * Another process may be writing the store meanwhile (it holds level's lock, this one does not
 * yet): a CURRENT that does not match the listing is looked at again a few times, and reported
 * as damage only when it stays so.
 *
 * @throws EvidenceError `ASP_EVIDENCE_NOT_A_STORE`, `ASP_EVIDENCE_STORE_CORRUPT`,
 *   `ASP_EVIDENCE_UNSUPPORTED_FORMAT`, `ASP_EVIDENCE_IO`.
 */
export async function inspectDir(location: string): Promise<Layout> {
  for (let attempt = 0; ; attempt++) {
    const entries = await dirEntries(location);
    if (entries === undefined || entries.length === 0) return { kind: "new", location };
    if (!entries.includes(MARKER_FILE)) {
      if (entries.includes(ANCHOR_FILE)) throw corrupt(location, `the store marker ${MARKER_FILE} is missing`);
      throw new EvidenceError(
        "ASP_EVIDENCE_NOT_A_STORE",
        `${location} is not empty and is not an evidence store (no ${MARKER_FILE}); refusing to open it. Point the store at an empty or new directory`,
        { data: { path: location } },
      );
    }
    const markerVersion = await checkMarker(location);
    if (!entries.some((e) => LEVEL_DATA.test(e))) {
      const anchor = await readAnchor(location);
      // The anchor says the log once held entries: the whole database is gone, not unborn.
      if (anchor.state === "ok" && anchor.record.seq > 0) {
        throw corrupt(location, `the database files are gone (the anchored head is seq ${anchor.record.seq})`, {
          anchor: anchor.record,
        });
      }
      // A current-format store is created whole (see `createStoreDir`): its anchor is never
      // missing or damaged unless something took it, and then a new chain must not start here.
      if (anchor.state !== "ok" && markerVersion >= STORE_VERSION) {
        throw corrupt(
          location,
          anchor.state === "missing" ? "the anchor file and the database files are gone" : anchor.reason,
        );
      }
      return { kind: "unborn", location, markerVersion };
    }
    const current = await readText(join(location, "CURRENT"));
    try {
      checkCurrent(location, entries, current);
      return { kind: "store", location, markerVersion };
    } catch (error) {
      // A writer holding the store switches manifests (level writes a new one at every open)
      // between the listing and the read: look again, a little later. Damage stays.
      if (attempt < INSPECT_ATTEMPTS) {
        await new Promise((r) => setTimeout(r, 10 + attempt * 10));
        continue;
      }
      throw error;
    }
  }
}

const INSPECT_ATTEMPTS = 8;

async function readText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch {
    return undefined;
  }
}

/** Make an unborn store whole: marker at the current version, an anchor at seq 0 when it has none. */
export async function finishUnborn(location: string, markerVersion: number): Promise<AnchorRead> {
  if (markerVersion < STORE_VERSION) await writeMarker(location);
  let anchor = await readAnchor(location);
  if (anchor.state !== "ok") {
    await removeAnchorTemp(location);
    await writeAnchorFile(location, { store: randomUUID(), seq: 0, digest: null });
    anchor = await readAnchor(location);
  }
  return anchor;
}
