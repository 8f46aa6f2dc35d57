import { describe, expect, it } from "vitest";
import { assertEntryName, assertPath, isNormalizedPath, normalizePath } from "../src/index.js";

describe("assertPath", () => {
  describe("when the path is a normalized relative POSIX path", () => {
    it.each(["a", "a/b", "src/index.ts", ".gitignore", "a/.b/c", "a..b/c", "é/ü"])("accepts %s", (p) => {
      expect(assertPath(p)).toBe(p);
      expect(isNormalizedPath(p)).toBe(true);
    });
  });

  describe("when the path is anything else", () => {
    it.each([
      ["absolute", "/etc/passwd"],
      ["parent escape", "../x"],
      ["inner parent escape", "a/../../x"],
      ["dot segment", "a/./b"],
      ["leading dot", "./a"],
      ["empty", ""],
      ["empty segment", "a//b"],
      ["trailing slash", "a/"],
      ["backslash", "a\\b"],
      ["NUL", "a\0b"],
      ["lone surrogate", "a\ud800"],
    ])("rejects a %s path with a typed error", (_why, p) => {
      expect(() => assertPath(p)).toThrowWithCode("ASP_EVIDENCE_BAD_PATH");
      expect(isNormalizedPath(p)).toBe(false);
    });
  });
});

describe("normalizePath", () => {
  describe("when a relative path is loosely written", () => {
    it.each([
      ["./a//b/", "a/b"],
      ["a/./b", "a/b"],
      ["a", "a"],
    ])("normalizes %s to %s", (input, out) => {
      expect(normalizePath(input)).toBe(out);
    });
  });

  describe("when the path is absolute or escapes", () => {
    it.each(["/a", "C:/a", "a/../b", "..", "a\\b", ".", ""])("rejects %s rather than resolving it", (p) => {
      expect(() => normalizePath(p)).toThrowWithCode("ASP_EVIDENCE_BAD_PATH");
    });
  });
});

describe("assertEntryName", () => {
  describe("when given a tree entry name", () => {
    it.each(["", ".", "..", "a/b", "a\\b", "a\0", "\udc00"])("rejects %j", (n) => {
      expect(() => assertEntryName(n)).toThrowWithCode("ASP_EVIDENCE_BAD_PATH");
    });
    it("accepts a single segment", () => {
      expect(assertEntryName("file.txt")).toBe("file.txt");
    });
  });
});
