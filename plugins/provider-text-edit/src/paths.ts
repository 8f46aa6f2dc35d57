import { TextEditError } from "./errors.js";

/**
 * Check that `path` is a normalized relative POSIX path inside the tree: not absolute, no `.`,
 * `..` or empty segment, no backslash or NUL, not into `.git` (any level) or the host's `.asp`
 * store. Paths are refused, never normalized: an edit names exactly one path.
 *
 * @throws TextEditError `ASP_TEXT_EDIT_PATH_ESCAPES`, `ASP_TEXT_EDIT_PROTECTED_PATH`,
 *   `ASP_TEXT_EDIT_BAD_INTENT` (not a string, empty or over 4096 characters).
 */
export function checkPath(path: unknown, field = "path"): string {
  if (typeof path !== "string" || path === "" || path.length > 4096) {
    throw new TextEditError("ASP_TEXT_EDIT_BAD_INTENT", `${field} must be a non-empty relative path`, {
      data: { field },
    });
  }
  const escapes = (why: string): never => {
    throw new TextEditError("ASP_TEXT_EDIT_PATH_ESCAPES", `${field} ${JSON.stringify(path)} ${why}`, {
      data: { field, path },
    });
  };
  if (path.startsWith("/")) escapes("is absolute: give a path relative to the tree root");
  if (path.includes("\\")) escapes("has a backslash: use / between segments");
  if (path.includes("\u0000")) escapes("has a NUL character");
  const segments = path.split("/");
  for (const s of segments) {
    if (s === "") escapes("has an empty segment");
    if (s === "." || s === "..") escapes(`has a "${s}" segment and could leave the tree`);
  }
  if (segments.some((s) => s.toLowerCase() === ".git") || segments[0] === ".asp") {
    throw new TextEditError(
      "ASP_TEXT_EDIT_PROTECTED_PATH",
      `${field} ${JSON.stringify(path)} is inside .git or the host's .asp store, which edits never touch`,
      { data: { field, path } },
    );
  }
  return path;
}
