import { rm } from "node:fs/promises";
import { resolve } from "node:path";
import { corrupt } from "./anchor.js";
import { EvidenceError } from "./errors.js";
import { copyStoreFiles } from "./files.js";
import type { Hasher } from "./hash.js";
import { inspectDir } from "./layout.js";
import { openStoreWith } from "./open.js";
import { publishDir, siblingTemp, targetDir } from "./recovery.js";
import type { FactLogHead } from "./store.js";

/** What {@link backupStore} made. */
export interface BackupResult {
  /** The backup: a complete store (same id as the source), closed. */
  readonly path: string;
  readonly storeId: string;
  /** The backup's head: record it, and verify a restore with `verify({ expectHead })`. */
  readonly head: FactLogHead | null;
  readonly entries: number;
  /** The source's anchored head when the copy began; the backup was proven to reach it. */
  readonly anchored: FactLogHead | null;
}

/**
 * Make a consistent, verified copy of the store in `dir` at `out` (missing or empty), while a
 * writer may be running: the files are copied without the store's lock (see `copyStoreFiles`:
 * taken again when a flush or compaction ran through it) and fsynced, into a temp directory
 * beside `out`; the copy is opened as a store, proven to reach the source's anchored head read
 * before the copy began, verified entry by entry, anchored at its own head, and renamed onto
 * `out`. The backup is itself a store: restore it by copying it back (or by backing it up into
 * the store's place) while no process uses the store, then verify with `expectHead`.
 *
 * @throws EvidenceError `ASP_EVIDENCE_TARGET_NOT_EMPTY`, `ASP_EVIDENCE_NOT_A_STORE`,
 *   `ASP_EVIDENCE_STORE_CORRUPT` (the source is damaged: salvage it instead), `ASP_EVIDENCE_IO`.
 */
export async function backupStore(
  dir: string,
  out: string,
  options: { readonly hasher?: Hasher } = {},
): Promise<BackupResult> {
  const location = resolve(dir);
  const target = resolve(out);
  if (target === location) {
    throw new EvidenceError("ASP_EVIDENCE_TARGET_NOT_EMPTY", `cannot back up ${location} onto itself`, {
      data: { path: target },
    });
  }
  const layout = await inspectDir(location);
  if (layout.kind !== "store") {
    throw new EvidenceError("ASP_EVIDENCE_NOT_A_STORE", `there is no evidence store with a database at ${location}`, {
      data: { path: location },
    });
  }
  await targetDir(target);
  const tmp = await siblingTemp(target, "backup");
  try {
    const { anchor } = await copyStoreFiles(location, tmp, { mode: "copy", durable: true });
    const store = await openStoreWith(tmp, { waitMs: 0, ...(options.hasher ? { hasher: options.hasher } : {}) }, {});
    let result: BackupResult;
    try {
      const v = await store.log.verify();
      if (!v.ok) throw corrupt(location, `entry ${v.seq} fails verification (${v.reason}); salvage the store instead`);
      result = {
        path: target,
        storeId: store.id,
        head: v.head,
        entries: v.entries,
        anchored:
          anchor.state === "ok" && anchor.record.seq > 0 && anchor.record.digest !== null
            ? { seq: anchor.record.seq, digest: anchor.record.digest }
            : null,
      };
    } finally {
      await store.close();
    }
    await publishDir(tmp, target);
    return result;
  } catch (error) {
    await rm(tmp, { recursive: true, force: true });
    // Errors about the copy name the source, which is what is damaged.
    const e = error as EvidenceError;
    if (e?.code === "ASP_EVIDENCE_STORE_CORRUPT" && e.data?.path === tmp) {
      throw corrupt(location, String(e.data?.reason ?? "the copy does not open"));
    }
    throw error;
  }
}
