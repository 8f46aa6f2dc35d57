import { EvidenceError } from "./errors.js";

// A lone UTF-16 surrogate has no UTF-8 form, so no canonical path or tree can carry it.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * True when `path` is a normalized relative POSIX path: non-empty segments separated by single
 * `/`, no leading or trailing `/`, no `.` or `..` segment, no backslash, no NUL, no lone UTF-16
 * surrogate (the `RelPath` pattern of `@asp/contracts`).
 */
export function isNormalizedPath(path: string): boolean {
  if (path.length === 0 || path.length > 4096) return false;
  if (path.includes("\\") || path.includes("\0") || LONE_SURROGATE.test(path)) return false;
  for (const seg of path.split("/")) {
    if (seg === "" || seg === "." || seg === "..") return false;
  }
  return true;
}

function badPath(path: string, why: string): never {
  throw new EvidenceError("ASP_EVIDENCE_BAD_PATH", `path ${JSON.stringify(path.slice(0, 200))} ${why}`, {
    data: { path: path.slice(0, 4096), reason: why },
  });
}

/**
 * Returns `path` when it is already normalized (see {@link isNormalizedPath}).
 *
 * @throws EvidenceError `ASP_EVIDENCE_BAD_PATH` otherwise; nothing is silently rewritten.
 */
export function assertPath(path: string): string {
  if (typeof path !== "string") badPath(String(path), "is not a string");
  if (!isNormalizedPath(path)) {
    if (path.startsWith("/")) badPath(path, "is absolute");
    if (path.split("/").includes("..")) badPath(path, "escapes with '..'");
    badPath(path, "is not a normalized relative POSIX path");
  }
  return path;
}

/**
 * Normalize a relative path written loosely (`./a//b/`) to its canonical form (`a/b`).
 * Absolute paths and `..` segments are rejected, never resolved.
 *
 * @throws EvidenceError `ASP_EVIDENCE_BAD_PATH` for absolute paths, `..`, backslashes, NUL, or an
 *   empty result.
 */
export function normalizePath(path: string): string {
  if (typeof path !== "string") badPath(String(path), "is not a string");
  if (path.startsWith("/")) badPath(path, "is absolute");
  if (/^[A-Za-z]:/.test(path)) badPath(path, "is absolute");
  if (path.includes("\\")) badPath(path, "contains a backslash");
  if (path.includes("\0")) badPath(path, "contains NUL");
  if (LONE_SURROGATE.test(path)) badPath(path, "contains a lone UTF-16 surrogate");
  const segs = path.split("/").filter((s) => s !== "" && s !== ".");
  if (segs.includes("..")) badPath(path, "escapes with '..'");
  if (segs.length === 0) badPath(path, "is empty");
  return segs.join("/");
}

/**
 * Returns `name` when it is one valid path segment (a tree entry name).
 *
 * @throws EvidenceError `ASP_EVIDENCE_BAD_PATH` for empty, `.`, `..`, or names containing `/`,
 *   a backslash, NUL or a lone surrogate.
 */
export function assertEntryName(name: string): string {
  if (
    typeof name !== "string" ||
    name === "" ||
    name === "." ||
    name === ".." ||
    /[/\\\0]/.test(name) ||
    LONE_SURROGATE.test(name)
  ) {
    badPath(String(name), "is not a single path segment");
  }
  return name;
}
