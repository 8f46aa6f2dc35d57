import { describe, expect, it } from "vitest";
import { isGitName } from "../src/index.js";

// Issue 32 hole 5: every spelling git or the filesystem under it folds to `.git`, and nothing else.
describe("isGitName", () => {
  it.each([
    ".git",
    ".GIT",
    ".Git",
    "\uff0egit",
    ".g\u200cit",
    ".git\ufeff",
    ".git.",
    ".git ",
    ".git. .",
    "git~1",
    "GIT~1",
    ".git::$INDEX_ALLOCATION",
  ])("%j is .git", (segment) => expect(isGitName(segment)).toBe(true));
  it.each([".gitignore", ".gitmodules", ".github", "git", ".git2", "x.git", "git~2", ".gi", ""])(
    "%j is not",
    (segment) => expect(isGitName(segment)).toBe(false),
  );
});
