import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import type { ApplyReceipt } from "@asp/contracts";
import type { FileMode } from "@asp/evidence";
import { diskDrift } from "./disk.js";
import type { PathAfter } from "./tree.js";
import { realPathEscape } from "./validate.js";

/** One whole-file write of an apply: the bytes (null: delete) and mode the path must end with. */
export interface FileWrite {
  readonly path: string;
  readonly content: Uint8Array | null;
  readonly mode: FileMode | null;
  /**
   * What the path must hold on disk right before it is written (its precondition in the judged
   * tree; null: absent on disk). Undefined: not checked (only the host's own tests).
   */
  readonly before?: PathAfter;
}

/** A path whose state on disk is not its precondition (issue 32 hole 5). */
class DiskDrift extends Error {}

type FileOutcome = NonNullable<ApplyReceipt["files"]>[number]["outcome"];

/** What the host's own write did, per path, and whether it all went through. */
export interface DirectWriteResult {
  readonly ok: boolean;
  readonly outcomes: ReadonlyMap<string, FileOutcome>;
  readonly detail?: string;
  /** True when it stopped because a path on disk was not its precondition (nothing more written). */
  readonly drift?: boolean;
}

type Original =
  | { readonly kind: "absent" }
  | { readonly kind: "file"; readonly bytes: Uint8Array; readonly mode: FileMode };

function readOriginal(abs: string): Original {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(abs);
  } catch {
    return { kind: "absent" };
  }
  if (st.isSymbolicLink())
    return { kind: "file", bytes: new Uint8Array(Buffer.from(readlinkSync(abs))), mode: "120000" };
  if (!st.isFile()) throw new Error(`${abs} is not a regular file`);
  return {
    kind: "file",
    bytes: new Uint8Array(readFileSync(abs)),
    mode: (st.mode & 0o111) !== 0 ? "100755" : "100644",
  };
}

/**
 * Write `bytes` to `abs` through a temp file in the same folder, fsync'ed, then one atomic rename;
 * `create`: publish with `link` instead, which refuses (EEXIST) when anything appeared at `abs`
 * since it was checked, so a path absent on disk is never overwritten.
 */
function replaceFile(abs: string, bytes: Uint8Array, mode: FileMode, create = false): void {
  mkdirSync(dirname(abs), { recursive: true });
  const tmp = join(dirname(abs), `.asp-apply-${randomBytes(6).toString("hex")}.tmp`);
  try {
    if (mode === "120000") {
      symlinkSync(Buffer.from(bytes).toString(), tmp);
    } else {
      const fd = openSync(tmp, "wx", mode === "100755" ? 0o755 : 0o644);
      try {
        let off = 0;
        while (off < bytes.byteLength) off += writeSync(fd, bytes, off);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
    if (create) {
      try {
        linkSync(tmp, abs);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "EEXIST")
          throw new DiskDrift("it appeared on disk after it was checked absent");
        throw error;
      }
      rmSync(tmp, { force: true });
    } else {
      renameSync(tmp, abs);
    }
  } catch (error) {
    rmSync(tmp, { force: true });
    throw error;
  }
}

function restore(abs: string, original: Original): void {
  if (original.kind === "absent") rmSync(abs, { force: true });
  else replaceFile(abs, original.bytes, original.mode);
}

/**
 * The host's own apply without a staging sandbox: each file by temp file + rename, in order; when
 * one write fails, every path already changed is put back as it was. That is `rollback_attempted`
 * and never more (host §6): a crash between two renames leaves a mixed state no journal repairs.
 * Every path is re-checked right before it is written: a parent that became a symbolic link
 * refuses the write, and so does a path whose state on disk is not `before` (issue 32 hole 5:
 * absent means absent on disk, lstat'ed; a create is published with `link`, never over a file).
 */
export function writeDirect(root: string, writes: readonly FileWrite[]): DirectWriteResult {
  const outcomes = new Map<string, FileOutcome>(writes.map((w) => [w.path, "unchanged" as FileOutcome]));
  const done: Array<{ path: string; abs: string; original: Original }> = [];
  for (const w of writes) {
    const abs = join(root, w.path);
    try {
      const escapes = realPathEscape(root, w.path);
      if (escapes !== null) throw new Error(escapes);
      if (w.before !== undefined) {
        const drift = diskDrift(root, w.path, w.before);
        if (drift !== null) throw new DiskDrift(drift);
      }
      const original = readOriginal(abs);
      if (w.content === null) {
        if (original.kind !== "absent") unlinkSync(abs);
      } else {
        replaceFile(abs, w.content, w.mode ?? "100644", w.before === null);
      }
      done.push({ path: w.path, abs, original });
      outcomes.set(w.path, w.content === null ? "deleted" : "written");
    } catch (error) {
      outcomes.set(w.path, error instanceof DiskDrift ? "unchanged" : "failed");
      for (const d of done.reverse()) {
        try {
          restore(d.abs, d.original);
          outcomes.set(d.path, "restored");
        } catch {
          outcomes.set(d.path, "failed");
        }
      }
      const code = (error as { code?: unknown }).code;
      if (error instanceof DiskDrift) {
        return {
          ok: false,
          outcomes,
          drift: true,
          detail: `writing ${w.path} refused: ${error.message}`.slice(0, 4000),
        };
      }
      return {
        ok: false,
        outcomes,
        detail: `writing ${w.path} failed (${typeof code === "string" ? code : (error as Error).message})`.slice(
          0,
          4000,
        ),
      };
    }
  }
  return { ok: true, outcomes };
}
