// What a stage request may touch: relative paths that stay inside the root, lexically and on disk.
import { realpathSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import type { StageRequest } from "@asp/contracts";
import { StagedError } from "./errors.js";
import { lstatOrNull } from "./fsx.js";

/** One whole-file write of a checked plan: the bytes and the permission bits the file gets. */
export interface PlannedWrite {
  readonly path: string;
  readonly content: Uint8Array;
  readonly mode: number;
}

/** A checked stage request: the real root, its device, deletes and writes in path order. */
export interface Plan {
  readonly root: string;
  readonly dev: number;
  readonly deletes: readonly string[];
  readonly writes: readonly PlannedWrite[];
}

const MODES: Readonly<Record<string, number>> = { "100644": 0o644, "100755": 0o755 };
const NEW_FILE_MODE = 0o644;

/**
 * The segments of a repository-relative path, or a coded refusal: absolute, empty, `.`, `..`,
 * a NUL byte, or a `.git` segment in any case (the repository's own metadata is never a target).
 *
 * @throws StagedError `ASP_STAGED_PATH_ESCAPE` for any of those; `ASP_STAGED_BAD_REQUEST` when not a string.
 */
export function pathSegments(path: unknown): string[] {
  if (typeof path !== "string") throw new StagedError("ASP_STAGED_BAD_REQUEST", "a path must be a string");
  const refuse = (why: string): never => {
    throw new StagedError("ASP_STAGED_PATH_ESCAPE", `${JSON.stringify(path).slice(0, 300)} ${why}`, {
      data: { path: path.slice(0, 300) },
    });
  };
  if (path.length === 0 || isAbsolute(path) || path.startsWith("/")) refuse("is not a relative path");
  if (path.includes("\0")) refuse("contains a NUL byte");
  const segments = path.split("/");
  for (const s of segments) {
    if (s === "" || s === "." || s === "..") refuse("is not a normalized path inside the root");
    if (s.toLowerCase() === ".git") refuse("names the repository's .git folder");
  }
  return segments;
}

/**
 * Walk the folders on the way to `segments` under `root` and refuse a symlink among them: a
 * rename through it would land outside the root. Stops at the first missing folder or at a file
 * (the caller decides whether a file there is a conflict). Returns the deepest existing folder.
 *
 * @throws StagedError `ASP_STAGED_PATH_ESCAPE` when a parent on disk is a symlink.
 */
export function assertNoSymlinkParent(
  root: string,
  segments: readonly string[],
): { deepest: string; blocker?: string } {
  let dir = root;
  for (let i = 0; i < segments.length - 1; i++) {
    const next = join(dir, segments[i] as string);
    const st = lstatOrNull(next);
    if (st === null) return { deepest: dir };
    if (st.isSymbolicLink()) {
      throw new StagedError("ASP_STAGED_PATH_ESCAPE", `${segments.join("/")} goes through a symlink on disk`, {
        data: { path: segments.join("/"), symlink: segments.slice(0, i + 1).join("/") },
      });
    }
    if (!st.isDirectory()) return { deepest: dir, blocker: segments.slice(0, i + 1).join("/") };
    dir = next;
  }
  return { deepest: dir };
}

/**
 * The real root folder and its device.
 *
 * @throws StagedError `ASP_STAGED_BAD_REQUEST` when `root` is not an absolute path to a folder.
 */
export function realRoot(root: unknown): { root: string; dev: number } {
  if (typeof root !== "string" || !isAbsolute(root)) {
    throw new StagedError("ASP_STAGED_BAD_REQUEST", "root must be an absolute path");
  }
  let real: string;
  try {
    real = realpathSync(root);
  } catch (error) {
    throw new StagedError("ASP_STAGED_BAD_REQUEST", `root ${root} cannot be resolved`, {
      cause: error,
      data: { root },
    });
  }
  const st = lstatOrNull(real);
  if (st === null || !st.isDirectory()) {
    throw new StagedError("ASP_STAGED_BAD_REQUEST", `root ${root} is not a folder`, { data: { root } });
  }
  return { root: real, dev: st.dev };
}

function conflict(path: string, why: string): StagedError {
  return new StagedError("ASP_STAGED_PATH_CONFLICT", `${path}: ${why}`, { data: { path } });
}

/**
 * Check a stage request against the worktree as it is now, before anything is written: every
 * path stays inside the root (lexically and on disk), every write lands on a file or nothing,
 * every delete names a file or symlink, every folder on the way is on the root's filesystem.
 *
 * @throws StagedError `ASP_STAGED_BAD_REQUEST`, `ASP_STAGED_PATH_ESCAPE`, `ASP_STAGED_PATH_CONFLICT`,
 *   `ASP_STAGED_CROSS_DEVICE`.
 */
export function planStage(request: Pick<StageRequest, "root" | "writes">): Plan {
  const { root, dev } = realRoot(request.root);
  if (!Array.isArray(request.writes)) throw new StagedError("ASP_STAGED_BAD_REQUEST", "writes must be an array");
  const seen = new Set<string>();
  const deleted = new Set<string>();
  const checked: Array<{ path: string; segments: string[]; content: Uint8Array | null; mode?: string }> = [];
  for (const w of request.writes) {
    const segments = pathSegments((w as { path?: unknown } | null)?.path);
    const path = segments.join("/");
    if (seen.has(path)) throw new StagedError("ASP_STAGED_BAD_REQUEST", `${path} is written twice`, { data: { path } });
    seen.add(path);
    if (w.content !== null && !(w.content instanceof Uint8Array)) {
      throw new StagedError("ASP_STAGED_BAD_REQUEST", `${path}: content must be bytes or null`, { data: { path } });
    }
    if (w.mode !== undefined && (w.content === null || MODES[w.mode] === undefined)) {
      throw new StagedError("ASP_STAGED_BAD_REQUEST", `${path}: mode ${String(w.mode)} is not allowed here`, {
        data: { path },
      });
    }
    if (w.content === null) deleted.add(path);
    checked.push({ path, segments, content: w.content, ...(w.mode === undefined ? {} : { mode: w.mode }) });
  }
  const deletes: string[] = [];
  const writes: PlannedWrite[] = [];
  for (const c of checked) {
    // A path that is another write's folder: one of the two cannot exist in the after-state.
    for (let i = 1; i < c.segments.length; i++) {
      const parent = c.segments.slice(0, i).join("/");
      if (seen.has(parent) && !deleted.has(parent)) throw conflict(c.path, `${parent} is written as a file`);
    }
    const { deepest, blocker } = assertNoSymlinkParent(root, c.segments);
    if (blocker !== undefined && !(c.content !== null && deleted.has(blocker))) {
      throw conflict(c.path, `${blocker} is not a folder`);
    }
    const folder = lstatOrNull(deepest);
    if (folder === null || folder.dev !== dev) {
      throw new StagedError("ASP_STAGED_CROSS_DEVICE", `${c.path} is on another filesystem than the root`, {
        data: { path: c.path },
      });
    }
    const target = blocker === undefined ? lstatOrNull(join(root, c.path)) : null;
    if (c.content === null) {
      if (target === null || target.isDirectory()) throw conflict(c.path, "a delete needs a file or symlink there");
      deletes.push(c.path);
      continue;
    }
    if (target?.isDirectory()) throw conflict(c.path, "is a folder");
    const kept = target?.isFile() ? target.mode & 0o7777 : NEW_FILE_MODE;
    writes.push({ path: c.path, content: c.content, mode: c.mode === undefined ? kept : (MODES[c.mode] as number) });
  }
  const byPath = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  deletes.sort(byPath);
  writes.sort((a, b) => byPath(a.path, b.path));
  return { root, dev, deletes, writes };
}
