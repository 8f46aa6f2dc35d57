import { AspError } from "@asp/contracts";

/**
 * Every code `@asp/provider-text-edit` raises when it refuses an intent. Stable public API.
 *
 * - `ASP_TEXT_EDIT_UNKNOWN_INTENT`: `intent.kind` is not one this provider answers.
 * - `ASP_TEXT_EDIT_BAD_INTENT`: `intent.arguments` is not the documented shape for its kind.
 * - `ASP_TEXT_EDIT_PATH_ESCAPES`: a path is absolute, has `.` / `..` / empty segments or a
 *   backslash, or goes through a symbolic link: it could leave the tree.
 * - `ASP_TEXT_EDIT_PROTECTED_PATH`: a path inside `.git` or the host's `.asp` store.
 * - `ASP_TEXT_EDIT_NO_SUCH_PATH`: the file to edit, rename or delete is not in the baseline.
 * - `ASP_TEXT_EDIT_NOT_A_FILE`: a text edit of a directory, a symbolic link or non-UTF-8 content.
 * - `ASP_TEXT_EDIT_TEXT_NOT_FOUND`: `oldText` (or the pattern) does not occur in the file.
 * - `ASP_TEXT_EDIT_AMBIGUOUS`: `oldText` occurs more than once and no `occurrence` was given.
 * - `ASP_TEXT_EDIT_OVERLAP`: two edits of one `multi_replace` touch overlapping text.
 * - `ASP_TEXT_EDIT_EXISTS`: a create or rename target already exists (or a parent is a file).
 * - `ASP_TEXT_EDIT_BAD_REGEX`: the pattern or its flags do not compile.
 * - `ASP_TEXT_EDIT_REGEX_BUDGET`: the pattern ran past its time or match budget on the file.
 * - `ASP_TEXT_EDIT_TOO_LARGE`: a file or content is over the size bound.
 * - `ASP_TEXT_EDIT_NO_CHANGE`: an operation would leave its file exactly as it is.
 */
export type TextEditErrorCode =
  | "ASP_TEXT_EDIT_UNKNOWN_INTENT"
  | "ASP_TEXT_EDIT_BAD_INTENT"
  | "ASP_TEXT_EDIT_PATH_ESCAPES"
  | "ASP_TEXT_EDIT_PROTECTED_PATH"
  | "ASP_TEXT_EDIT_NO_SUCH_PATH"
  | "ASP_TEXT_EDIT_NOT_A_FILE"
  | "ASP_TEXT_EDIT_TEXT_NOT_FOUND"
  | "ASP_TEXT_EDIT_AMBIGUOUS"
  | "ASP_TEXT_EDIT_OVERLAP"
  | "ASP_TEXT_EDIT_EXISTS"
  | "ASP_TEXT_EDIT_BAD_REGEX"
  | "ASP_TEXT_EDIT_REGEX_BUDGET"
  | "ASP_TEXT_EDIT_TOO_LARGE"
  | "ASP_TEXT_EDIT_NO_CHANGE";

/** Thrown by `@asp/provider-text-edit` to refuse an intent. Messages never quote file content. */
export class TextEditError extends AspError<TextEditErrorCode> {}
