import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTypeScriptChecker, type TypeScriptChecker } from "../src/index.js";
import { createFixture, type Fixture, findingsOf, type Layout, runTsc, snapshotFixture } from "./env-fixture.js";

// Same answer as tsc: fixture projects with real packages installed in npm, pnpm (symlinked
// store) and yarn classic layouts; the real tsc runs over the folder, the checker over the
// snapshotted tree + environment, and their (file, line, column, code) sets must be equal.

const PACKAGE_JSON = JSON.stringify({
  name: "fixture",
  version: "1.0.0",
  type: "module",
  dependencies: { "@sinclair/typebox": "^0.34.0", "vscode-jsonrpc": "^10.0.0" },
  devDependencies: { "@fixture/tsconfig": "1.0.0", "@types/node": "^20.0.0" },
});
const TSCONFIG = JSON.stringify({ extends: "@fixture/tsconfig", include: ["src"] });

const CLEAN = `import { readFileSync } from "node:fs";
import { type Static, Type } from "@sinclair/typebox";
import { CancellationTokenSource } from "vscode-jsonrpc";

export const User = Type.Object({ name: Type.String(), age: Type.Number({ minimum: 0 }) });
export type User = Static<typeof User>;
export const user: User = { name: "ada", age: 36 };
export const source = new CancellationTokenSource();
export const cancelled: boolean = source.token.isCancellationRequested;
export const text = (path: string): string => readFileSync(path, "utf8");
export const cwd: string = process.cwd();
`;

/** Real errors that need the dependencies' types to be found. */
const BROKEN = `import { readFileSync } from "node:fs";
import { type Static, Type, TypeNotExported } from "@sinclair/typebox";
import { CancellationTokenSource } from "vscode-jsonrpc";

export const User = Type.Object({ name: Type.String(), age: Type.Number({ minimum: "zero" }) });
export type User = Static<typeof User>;
export const user: User = { name: "ada", age: "36" };
export const source = new CancellationTokenSource(1);
export const cancelled: string = source.token.isCancellationRequested;
export const text = (path: string): number => readFileSync(path, "utf8");
export const nope = TypeNotExported;
`;

/** Run tsc and the checker over the fixture as it is now; both finding lists. */
async function both(
  fx: Fixture,
  checker: TypeScriptChecker,
  mode: "project" | "build" = "project",
): Promise<{ tsc: string[]; ours: string[]; status: string; envReads: number; envTrees: number }> {
  // tsc -b keeps outputs and build info between runs; start each run from none like a fresh clone.
  if (mode === "build") {
    for (const p of ["a", "b"])
      fx.write({ [`packages/${p}/dist`]: null, [`packages/${p}/tsconfig.tsbuildinfo`]: null });
  }
  const tsc = runTsc(fx.dir, mode);
  const snap = await snapshotFixture(fx.dir);
  const before = snap.repo.log.length;
  const r = await checker.check({ tree: snap.tree, environment: snap.environment }, snap.repo.source());
  // Trees read by the check (the few of the checked tree, and the environment's it needed).
  const envTreeSet = new Set<string>();
  for (const line of snap.repo.log.slice(before)) if (line.startsWith("tree ")) envTreeSet.add(line.slice(5));
  return { tsc, ours: findingsOf(r.diagnostics), status: r.status, envReads: envTreeSet.size, envTrees: snap.envTrees };
}

const LAYOUTS: readonly Layout[] = ["npm", "pnpm", "yarn"];
/** Each case runs the real tsc and a cold check on a shared machine: generous, never asserted on. */
const SLOW = { timeout: 240_000 };

describe.each(LAYOUTS)("parity with tsc --noEmit -p, dependencies installed by %s", SLOW, (layout) => {
  let fx: Fixture;
  // One warm checker per layout: later cases also prove the warm state follows the environment.
  const checker = createTypeScriptChecker({ scope: "all" });
  beforeAll(() => {
    fx = createFixture(layout);
    fx.write({ "package.json": PACKAGE_JSON, "tsconfig.json": TSCONFIG });
  }, 120_000);
  afterAll(() => fx.remove(), 120_000);

  it("host §9: a project using its dependencies' types checks clean, as tsc says", async () => {
    fx.write({ "src/index.ts": CLEAN });
    const r = await both(fx, checker);
    expect(r.tsc).toEqual([]);
    expect(r.ours).toEqual(r.tsc);
    expect(r.status).toBe("complete");
    // Resolution reads only what it touches, never the whole node_modules.
    expect(r.envReads).toBeLessThan(r.envTrees / 2);
  });

  it("host §9: errors against dependency APIs are the errors tsc reports", async () => {
    fx.write({ "src/index.ts": BROKEN });
    const r = await both(fx, checker);
    expect(r.tsc.length).toBeGreaterThanOrEqual(6);
    expect(r.ours).toEqual(r.tsc);
    expect(r.status).toBe("complete");
  });

  it("host §9: an absent dependency is 'Cannot find module', as tsc says", async () => {
    fx.write({ "src/index.ts": CLEAN });
    fx.uninstall("vscode-jsonrpc");
    const r = await both(fx, checker);
    expect(r.tsc.some((f) => f.startsWith("src/index.ts:3:") && f.endsWith("TS2307"))).toBe(true);
    expect(r.ours).toEqual(r.tsc);
  });
});

describe("parity with tsc on type discovery and project references (npm and pnpm)", SLOW, () => {
  const fixtures: Fixture[] = [];
  afterAll(() => {
    for (const f of fixtures) f.remove();
  }, 120_000);

  it("host §9: automatic @types inclusion, types and typeRoots match tsc", async () => {
    const fx = createFixture("npm");
    fixtures.push(fx);
    const checker = createTypeScriptChecker({ scope: "all" });
    const base = { target: "ES2022", lib: ["ES2022"], module: "NodeNext", strict: true, skipLibCheck: true };
    fx.write({
      "package.json": PACKAGE_JSON,
      "src/index.ts": "export const cwd: string = process.cwd();\nexport const flag: boolean = FIXTURE_FLAG;\n",
      "types/fixture-globals/index.d.ts": "declare const FIXTURE_FLAG: boolean;\n",
    });
    const variants: Record<string, unknown>[] = [
      {}, // automatic inclusion of node_modules/@types (or not: whatever this tsc does by default)
      { types: ["node"] },
      { typeRoots: ["./types", "./node_modules/@types"] },
      { typeRoots: ["./types", "./node_modules/@types"], types: ["fixture-globals", "node"] },
      { types: ["fixture-globals"] }, // not in the default type roots: tsc says it cannot be found
    ];
    for (const extra of variants) {
      fx.write({ "tsconfig.json": JSON.stringify({ compilerOptions: { ...base, ...extra }, include: ["src"] }) });
      const r = await both(fx, checker);
      expect({ extra, ours: r.ours }).toEqual({ extra, ours: r.tsc });
    }
  });

  it("host §9: declaration diagnostics of a composite project (isolatedDeclarations) match tsc", async () => {
    const fx = createFixture("npm");
    fixtures.push(fx);
    const checker = createTypeScriptChecker({ scope: "all" });
    fx.write({
      "package.json": PACKAGE_JSON,
      "tsconfig.json": JSON.stringify({
        extends: "@fixture/tsconfig",
        compilerOptions: { composite: true, isolatedDeclarations: true, rootDir: "src", outDir: "dist" },
        include: ["src"],
      }),
      "src/index.ts":
        'import { Type } from "@sinclair/typebox";\nexport const Name = Type.String();\nexport function twice(n: number) {\n  return n * 2;\n}\n',
    });
    const r = await both(fx, checker);
    expect(r.tsc.length).toBeGreaterThanOrEqual(2);
    expect(r.ours).toEqual(r.tsc);
  });

  it.each(["npm", "pnpm"] as const)(
    "host §9: project references are checked like tsc -b, referenced sources standing in for dist/ (%s)",
    async (layout) => {
      const fx = createFixture(layout, { "node_modules/@fixture/a": "../../packages/a" });
      fixtures.push(fx);
      const checker = createTypeScriptChecker();
      const pkg = (name: string) =>
        JSON.stringify({
          name,
          version: "1.0.0",
          type: "module",
          exports: { ".": { types: "./dist/index.d.ts", default: "./dist/index.js" } },
        });
      const project = (refs: string[]) =>
        JSON.stringify({
          extends: "@fixture/tsconfig",
          compilerOptions: { composite: true, rootDir: "src", outDir: "dist" },
          include: ["src"],
          references: refs.map((path) => ({ path })),
        });
      fx.write({
        "package.json": JSON.stringify({ name: "root", private: true, type: "module" }),
        "tsconfig.json": JSON.stringify({ files: [], references: [{ path: "packages/a" }, { path: "packages/b" }] }),
        "packages/a/package.json": pkg("@fixture/a"),
        "packages/a/tsconfig.json": project([]),
        "packages/a/src/index.ts":
          'import { Type, type Static } from "@sinclair/typebox";\nexport const Point = Type.Object({ x: Type.Number() });\nexport type Point = Static<typeof Point>;\nexport function norm(p: Point): number {\n  return Math.abs(p.x);\n}\n',
        "packages/b/package.json": pkg("@fixture/b"),
        "packages/b/tsconfig.json": project(["../a"]),
        "packages/b/src/index.ts": 'import { norm } from "@fixture/a";\nexport const n: number = norm({ x: 3 });\n',
      });
      const clean = await both(fx, checker, "build");
      expect(clean.tsc).toEqual([]);
      expect(clean.ours).toEqual(clean.tsc);
      expect(clean.status).toBe("complete");

      fx.write({
        "packages/b/src/index.ts":
          'import { norm, type Point } from "@fixture/a";\nexport const n: string = norm({ x: "3" });\nexport const p: Point = { y: 1 };\n',
      });
      const broken = await both(fx, checker, "build");
      expect(broken.ours).toEqual(broken.tsc);
      expect(broken.tsc.length).toBeGreaterThanOrEqual(2);
    },
  );
});
