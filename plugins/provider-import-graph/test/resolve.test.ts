import { describe, expect, it } from "vitest";
import { normalizePath, resolveImport } from "../src/index.js";

const FILES = new Set([
  "src/a.ts",
  "src/b.tsx",
  "src/c.js",
  "src/d.mts",
  "src/types.d.ts",
  "src/util/index.ts",
  "src/data.json",
  "lib/e.ts",
]);

describe("resolveImport", () => {
  it.each([
    ["src/x.ts", "./a.js", "src/a.ts"], // .js -> .ts (NodeNext style)
    ["src/x.ts", "./a", "src/a.ts"],
    ["src/x.ts", "./b.js", "src/b.tsx"],
    ["src/x.ts", "./c.js", "src/c.js"],
    ["src/x.ts", "./d.mjs", "src/d.mts"],
    ["src/x.ts", "./types.js", "src/types.d.ts"],
    ["src/x.ts", "./util", "src/util/index.ts"],
    ["src/x.ts", "./util/index.js", "src/util/index.ts"],
    ["src/x.ts", "./data.json", "src/data.json"],
    ["src/util/index.ts", "../../lib/e.js", "lib/e.ts"],
    ["src/util/index.ts", "..", null],
    ["src/x.ts", "./missing.js", null],
    ["src/x.ts", "../../../outside.js", null],
    ["src/x.ts", "typescript", "external"],
    ["src/x.ts", "@asp/sdk", "external"],
  ])("from %s, %s -> %s", (from, spec, expected) => {
    expect(resolveImport(from, spec, FILES)).toBe(expected);
  });
});

describe("normalizePath", () => {
  it.each([
    ["src/./a/../b.ts", "src/b.ts"],
    ["a//b", "a/b"],
    ["../a", null],
  ])("%s -> %s", (input, out) => {
    expect(normalizePath(input)).toBe(out);
  });
});
