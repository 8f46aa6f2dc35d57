// What a stage request may touch: relative paths that stay inside the root, lexically and on disk.
import { createHash } from "node:crypto";
import { readFileSync, readlinkSync, realpathSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { isGitName, type StageRequest } from "@asp/contracts";
import { StagedError } from "./errors.js";
import { lstatOrNull } from "./fsx.js";

/** One whole-file write of a checked plan: the bytes and the permission bits the file gets. */
export interface PlannedWrite {
  readonly path: string;
  readonly content: Uint8Array;
  readonly mode: number;
}

/** What a path must hold on disk before it is replaced: `{ digest, mode }`, or null (absent). */
export type Expected = { readonly digest: string; readonly mode: string } | null;

/** A checked stage request: the real root, its device, deletes and writes in path order. */
export interface Plan {
  readonly root: string;
  readonly dev: number;
  readonly deletes: readonly string[];
  readonly writes: readonly PlannedWrite[];
  /** Per path, what the request says it holds on disk now (paths without one are not checked). */
  readonly expected: ReadonlyMap<string, Expected>;
}

const MODES: Readonly<Record<string, number>> = { "100644": 0o644, "100755": 0o755 };
const NEW_FILE_MODE = 0o644;

/**
 * The segments of a repository-relative path, or a coded refusal: absolute, empty, `.`, `..`,
 * a NUL byte, or a segment git reads as `.git` at any depth (`isGitName` of `@asp/contracts`: a nested
 * repository's hooks or config run on the next git command there).
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
    if (isGitName(s)) refuse("names a .git folder (as git or the filesystem folds the name)");
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
  const plan = { root, dev, deletes, writes, expected: expectations(request.writes) };
  assertExpected(plan);
  return plan;
}

function expectations(writes: StageRequest["writes"]): Map<string, Expected> {
  const out = new Map<string, Expected>();
  for (const w of writes) {
    const before = (w as { before?: unknown }).before;
    if (before === undefined) continue;
    const ok =
      before === null ||
      (typeof before === "object" &&
        typeof (before as { digest?: unknown }).digest === "string" &&
        typeof (before as { mode?: unknown }).mode === "string");
    if (!ok) throw new StagedError("ASP_STAGED_BAD_REQUEST", `${w.path}: before must be { digest, mode } or null`);
    out.set(w.path, before as Expected);
  }
  return out;
}

/** What `path` holds on disk, as a tree would say it (never following a link), or a description. */
function onDisk(root: string, path: string): Expected | string {
  const abs = join(root, path);
  const st = lstatOrNull(abs);
  if (st === null) return null;
  if (st.isSymbolicLink()) return { digest: sha256(readlinkSync(abs, "buffer")), mode: "120000" };
  if (!st.isFile()) return st.isDirectory() ? "a folder" : "not a regular file";
  return { digest: sha256(readFileSync(abs)), mode: (st.mode & 0o100) !== 0 ? "100755" : "100644" };
}

const sha256 = (bytes: Uint8Array): string => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/**
 * Check every path with an expectation against the disk (issue 32 hole 5): absent means absent on
 * disk, a file means those bytes and that mode. Run when the plan is made and again right before
 * the commit point, so nothing the host did not judge is replaced.
 *
 * @throws StagedError `ASP_STAGED_PRECONDITION_FAILED`: nothing published.
 */
export function assertExpected(plan: Pick<Plan, "root" | "expected">): void {
  for (const [path, expected] of plan.expected) {
    const actual = onDisk(plan.root, path);
    const same =
      actual === null
        ? expected === null
        : typeof actual !== "string" &&
          expected !== null &&
          actual.digest === expected.digest &&
          actual.mode === expected.mode;
    if (same) continue;
    const what = (e: Expected | string) =>
      e === null ? "absent" : typeof e === "string" ? e : `${e.digest} (${e.mode})`;
    throw new StagedError(
      "ASP_STAGED_PRECONDITION_FAILED",
      `${path} is ${what(actual)} on disk, not ${what(expected)} as the request says`,
      { data: { path } },
    );
  }
}
