import { describe, expect, it } from "vitest";
import { answerQuery, buildImportGraph, type ImportGraph, parseModule } from "../src/index.js";

function graphOf(files: Record<string, string>): ImportGraph {
  return buildImportGraph(new Map(Object.entries(files).map(([p, t]) => [p, parseModule(p, t)])));
}

// util <- math <- index, util <- report; a <-> b is a cycle; c imports the cycle.
const TREE: Record<string, string> = {
  "src/util.ts": "export const round = (n: number) => Math.round(n);\nexport type Num = number;\n",
  "src/math.ts":
    'import { round } from "./util.js";\n\nexport function add(a: number, b: number) {\n  return round(a + b);\n}\n',
  "src/report.ts":
    'import type { Num } from "./util.js";\nexport default function report(n: Num) {\n  return String(n);\n}\n',
  "src/index.ts":
    'import { add } from "./math.js";\nimport report from "./report.js";\nexport * from "./math.js";\nexport { report };\nconst lazy = () => import("./lazy.js");\n',
  "src/lazy.ts": "export class Lazy {}\n",
  "src/cycle/a.ts": 'import { b } from "./b.js";\nexport const a = () => b;\n',
  "src/cycle/b.ts": 'import { a } from "./a.js";\nexport const b = () => a;\n',
  "src/c.js": 'const { a } = require("./cycle/a.js");\nexports.useA = a;\n',
};

describe("buildImportGraph", () => {
  const graph = graphOf(TREE);

  it("finds the direct dependents of a file, with the importing line", () => {
    expect(graph.dependents("src/util.ts").map((e) => [e.from, e.line])).toEqual([
      ["src/math.ts", 0],
      ["src/report.ts", 0],
    ]);
  });

  it("finds the dependencies of a file: static, re-export and dynamic imports", () => {
    expect(graph.dependencies("src/index.ts").map((e) => [e.to, e.line])).toEqual([
      ["src/lazy.ts", 4],
      ["src/math.ts", 0],
      ["src/math.ts", 2],
      ["src/report.ts", 1],
    ]);
  });

  it("computes the transitive impact of a change", () => {
    expect(graph.impact(["src/util.ts"]).map((e) => [e.path, e.depth, e.via])).toEqual([
      ["src/util.ts", 0, null],
      ["src/math.ts", 1, "src/util.ts"],
      ["src/report.ts", 1, "src/util.ts"],
      ["src/index.ts", 2, "src/math.ts"],
    ]);
  });

  it("terminates on a cycle and lists each file once", () => {
    expect(graph.impact(["src/cycle/a.ts"]).map((e) => e.path)).toEqual([
      "src/cycle/a.ts",
      "src/c.js",
      "src/cycle/b.ts",
    ]);
    expect(graph.dependents("src/cycle/b.ts").map((e) => e.from)).toEqual(["src/cycle/a.ts"]);
  });

  it("finds a symbol where it is declared, re-exported and reached by export *", () => {
    expect(graph.findSymbol("add").map((s) => [s.path, s.line, s.kind])).toEqual([
      ["src/index.ts", 2, "re-export *"],
      ["src/math.ts", 2, "function"],
    ]);
    expect(graph.findSymbol("report").map((s) => [s.path, s.kind])).toEqual([
      ["src/index.ts", "export"],
      ["src/report.ts", "default function"],
    ]);
    expect(graph.findSymbol("useA").map((s) => [s.path, s.kind])).toEqual([["src/c.js", "commonjs"]]);
    expect(graph.findSymbol("Num").map((s) => s.kind)).toEqual(["type"]);
    expect(graph.findSymbol("nothing")).toEqual([]);
  });

  it("lists relative imports that match no file", () => {
    const g = graphOf({ "a.ts": 'import "./gone.js";\nimport "react";\n' });
    expect(g.unresolved("a.ts").map((s) => s.specifier)).toEqual(["./gone.js"]);
  });
});

describe("answerQuery", () => {
  const graph = graphOf(TREE);

  it("answers dependents, dependencies and symbol as InspectResult rows", () => {
    expect(answerQuery(graph, { kind: "dependents", path: "src/math.ts" }).results).toEqual([
      { path: "src/index.ts", line: 0, detail: 'imports "./math.js"' },
      { path: "src/index.ts", line: 2, detail: 'imports "./math.js"' },
    ]);
    expect(answerQuery(graph, { kind: "dependencies", path: "src/math.ts" }).results).toEqual([
      { path: "src/util.ts", line: 0, detail: 'imported as "./util.js"' },
    ]);
    expect(answerQuery(graph, { kind: "symbol", symbol: "Lazy" }).results).toEqual([
      { path: "src/lazy.ts", symbol: "Lazy", line: 0, detail: "class" },
    ]);
  });

  it("answers impact from the changeset, with deleted files' importers from the base graph", () => {
    const after = graphOf({ ...TREE, "src/lazy.ts": "export class Lazy { x = 1 }\n" });
    const r = answerQuery(after, { kind: "impact" }, [{ path: "src/lazy.ts", kind: "modified" }]);
    expect(r.results).toEqual([
      { path: "src/lazy.ts", detail: "changed" },
      { path: "src/index.ts", detail: "depends on src/lazy.ts (depth 1)" },
    ]);
    const { "src/util.ts": _gone, ...rest } = TREE;
    const r2 = answerQuery(graphOf(rest), { kind: "impact" }, [{ path: "src/util.ts", kind: "deleted" }], graph);
    expect(r2.results.map((x) => [x.path, x.detail])).toEqual([
      ["src/util.ts", "deleted"],
      ["src/math.ts", "imported a deleted file"],
      ["src/report.ts", "imported a deleted file"],
      ["src/index.ts", "depends on src/math.ts (depth 1)"],
    ]);
  });

  it("honours the limit", () => {
    const r = answerQuery(graph, { kind: "impact", path: "src/util.ts", limit: 2 });
    expect(r.results).toHaveLength(2);
    expect(r.truncated).toBe(false);
  });

  it.each([
    [{ kind: "dependents" as const }],
    [{ kind: "dependencies" as const }],
    [{ kind: "symbol" as const }],
    [{ kind: "impact" as const }],
  ])("refuses %j without what it needs", (query) => {
    expect(() => answerQuery(graph, query)).toThrowWithCode("ASP_IMPORTS_BAD_QUERY");
  });
});
