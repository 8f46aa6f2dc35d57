// Small durable-filesystem steps shared by stage and recover. Synchronous on purpose: each step
// must be on disk before the next one starts, and the order is the proof.
import {
  closeSync,
  fchmodSync,
  fsyncSync,
  lstatSync,
  openSync,
  rmSync,
  type Stats,
  unlinkSync,
  writeSync,
} from "node:fs";

/** `lstat`, or null when nothing is there. Other errors propagate. */
export function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}

/** Make a folder's entries (creations, renames, removals) durable. */
export function fsyncDir(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Create `path` (it must not exist), write all of `bytes`, set `mode`, fsync. */
export function writeFileDurable(path: string, bytes: Uint8Array, mode: number): void {
  const fd = openSync(path, "wx", 0o600);
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    fchmodSync(fd, mode);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Remove a file or symlink if it is there (idempotent). */
export function unlinkIfPresent(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}

/** Remove a folder tree if it is there (idempotent). */
export function removeTree(path: string): void {
  rmSync(path, { recursive: true, force: true });
}
