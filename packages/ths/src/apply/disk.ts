// What a touched path really is on disk, against the state the judged tree says it has (issue 32
// hole 5): the snapshot leaves out what the host's rules exclude (an ignored `.env`, `dist/`), so
// "absent in the baseline" is not "absent on disk". Every check lstat's, never follows a link.
import { lstatSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { blobDigest } from "@asp/evidence";
import type { PathAfter } from "./tree.js";
import { realPathEscape } from "./validate.js";

/** What `path` under `root` holds on disk, as a tree would say it: absent, a file or link by blob, or something else. */
export type DiskState = PathAfter | { readonly other: string };

/**
 * The state of `path` under `root`, component by component without following a link: null when
 * nothing is there, `{ digest, mode }` for a file (mode by the owner's executable bit) or a link (its
 * target bytes), `{ other }` for a folder, a special file, or a parent that is not a real folder.
 */
export function diskState(root: string, path: string): DiskState {
  const parent = realPathEscape(root, path);
  if (parent !== null) return { other: parent };
  const abs = join(root, path);
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(abs);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return null;
    return { other: `${path} cannot be examined (${String(code)})` };
  }
  if (st.isSymbolicLink()) return { digest: blobDigest(new Uint8Array(readlinkSync(abs, "buffer"))), mode: "120000" };
  if (!st.isFile()) return { other: `${path} is ${st.isDirectory() ? "a folder" : "not a regular file"} on disk` };
  return {
    digest: blobDigest(new Uint8Array(readFileSync(abs))),
    // The owner's executable bit, as the worktree snapshot reads it.
    mode: (st.mode & 0o100) !== 0 ? "100755" : "100644",
  };
}

const describe = (s: DiskState): string => (s === null ? "absent" : "other" in s ? s.other : `${s.digest} (${s.mode})`);

/**
 * Why `path` on disk is not `expected` (the precondition the judged tree gives it), or null when
 * it is exactly that. Absent means absent on disk; a file means those bytes and that mode.
 */
export function diskDrift(root: string, path: string, expected: PathAfter): string | null {
  const actual = diskState(root, path);
  if (actual === null && expected === null) return null;
  if (actual !== null && expected !== null && !("other" in actual)) {
    if (actual.digest === expected.digest && actual.mode === expected.mode) return null;
  }
  return `${path} is ${describe(actual)} on disk, but the judged tree has it ${describe(expected)}: the apply would write what was not judged`;
}
