import { blobDigest, MemoryRepo } from "@asp/sdk/testing";
import { describe, expect, it } from "vitest";
import { type CheckResult, createTypeScriptChecker, type TypeScriptChecker } from "../src/index.js";

const tsconfig = (compilerOptions: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({
    compilerOptions: {
      target: "ES2022",
      lib: ["ES2022"],
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      noEmit: true,
      ...compilerOptions,
    },
    include: ["src"],
    ...extra,
  });

const BASE: Record<string, string> = {
  "package.json": JSON.stringify({ name: "demo", type: "module" }),
  "tsconfig.json": tsconfig(),
  "src/math.ts": "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
  "src/index.ts": 'import { add } from "./math.js";\n\nexport const total: number = add(1, 2);\n',
  "src/other.ts": "export const other = 1;\n",
  "README.md": "# demo\n",
};
const BAD_INDEX =
  'import { add } from "./math.js";\n\nexport const total: number = add(1, 2);\nexport const label: number = "three";\n';

/** Check `after` as a change from `before` (or the whole tree when `before` is null). */
async function checkChange(
  checker: TypeScriptChecker,
  repo: MemoryRepo,
  before: Record<string, string> | null,
  after: Record<string, string>,
): Promise<CheckResult> {
  const tree = repo.tree(after);
  return checker.check(
    before === null ? { tree } : { tree, changes: MemoryRepo.changes(before, after) },
    repo.source(),
  );
}

const errorsOf = (r: CheckResult) => r.diagnostics.filter((d) => d.severity === "error");

describe("createTypeScriptChecker", () => {
  // One checker for the read-only cases keeps the default library parsed once.
  const shared = createTypeScriptChecker();

  describe("when the tree is clean", () => {
    it("reports nothing and covers every project file", async () => {
      const r = await checkChange(shared, new MemoryRepo(), null, BASE);
      expect(r.status).toBe("complete");
      expect(r.diagnostics).toEqual([]);
      expect(r.coverage).toEqual({ sources: ["ts"], paths: 3 });
    });
  });

  describe("when the repository has no TypeScript at all", () => {
    it("the requirement does not apply: complete over zero files, not TS18003 about a tsconfig.json that does not exist", async () => {
      const plain = {
        "package.json": JSON.stringify({ name: "plain" }),
        "README.md": "# plain\n",
        "index.js": "module.exports = 1;\n",
      };
      const r = await checkChange(shared, new MemoryRepo(), null, plain);
      expect(r.status).toBe("complete");
      expect(r.diagnostics).toEqual([]);
      expect(r.coverage).toEqual({ sources: ["ts"], paths: 0 });
      // A tsconfig.json that names no input is the project's own error, as tsc says it.
      const empty = await checkChange(shared, new MemoryRepo(), null, { ...plain, "tsconfig.json": tsconfig() });
      expect(empty.diagnostics.map((d) => d.code)).toContain("ts/18003");
      // A TypeScript file without a tsconfig is still checked under TypeScript's defaults.
      const bare = await checkChange(shared, new MemoryRepo(), null, {
        ...plain,
        "a.ts": "export const a: number = 'x';\n",
      });
      expect(bare.diagnostics.map((d) => d.code)).toContain("ts/2322");
    });
  });

  describe("when a module imports its own folder", () => {
    it('a bare "." import resolves to the folder\'s index, as tsc resolves it (no TS2307, the type flows)', async () => {
      const files = {
        "package.json": JSON.stringify({ name: "dot" }),
        "tsconfig.json": JSON.stringify({
          compilerOptions: {
            strict: true,
            noEmit: true,
            module: "commonjs",
            moduleResolution: "node10",
            ignoreDeprecations: "6.0",
          },
          include: ["src"],
        }),
        "src/index.ts": "export const x: number = 1;\n",
        "src/use.ts": 'import { x } from ".";\nexport const y: string = x;\n',
      };
      const r = await checkChange(shared, new MemoryRepo(), null, files);
      const codes = r.diagnostics.map((d) => `${d.code}@${d.range?.path}`);
      expect(codes).not.toContain("ts/2307@src/use.ts");
      // The type came through the index: assigning number to string is the one error.
      expect(codes).toEqual(["ts/2322@src/use.ts"]);
    });
  });

  describe("when the change introduces a type error", () => {
    it("reports ts/2322 with a 0-based range, the explanation link, a next step and a fingerprint", async () => {
      const r = await checkChange(shared, new MemoryRepo(), BASE, { ...BASE, "src/index.ts": BAD_INDEX });
      expect(r.status).toBe("complete");
      expect(errorsOf(r)).toHaveLength(1);
      const [d] = r.diagnostics;
      expect(d).toMatchObject({
        source: "ts",
        code: "ts/2322",
        severity: "error",
        message: "Type 'string' is not assignable to type 'number'.",
        range: { path: "src/index.ts", start: { line: 3, character: 13 }, end: { line: 3, character: 18 } },
        codeDescription: { href: "https://typescript.tv/errors/#ts2322" },
      });
      expect(d?.help).toMatch(/declared type/);
      expect(d?.fingerprint).toMatch(/^ts1:[0-9a-f]{64}$/);
    });

    it("reports nothing once the change is fixed", async () => {
      const fixed = {
        ...BASE,
        "src/index.ts": BAD_INDEX.replace('label: number = "three"', 'label: string = "three"'),
      };
      const r = await checkChange(shared, new MemoryRepo(), BASE, fixed);
      expect(r.status).toBe("complete");
      expect(r.diagnostics).toEqual([]);
    });

    it("keeps the fingerprint when unrelated lines are inserted above, and tells equal errors apart", async () => {
      const repo = new MemoryRepo();
      const first = await checkChange(shared, repo, BASE, { ...BASE, "src/index.ts": BAD_INDEX });
      const shifted = `// a comment\n\nexport const unrelated = 42;\n${BAD_INDEX}`;
      const second = await checkChange(shared, repo, BASE, { ...BASE, "src/index.ts": shifted });
      expect(second.diagnostics[0]?.range?.start.line).toBe(6);
      expect(second.diagnostics[0]?.fingerprint).toBe(first.diagnostics[0]?.fingerprint);
      // The same offending line twice (in a block): two findings, two fingerprints.
      const twice = `${BAD_INDEX}{\n  const label: number = "three";\n  void label;\n}\n`;
      const third = await checkChange(shared, repo, BASE, { ...BASE, "src/index.ts": twice });
      expect(errorsOf(third)).toHaveLength(2);
      expect(new Set(third.diagnostics.map((d) => d.fingerprint)).size).toBe(2);
      expect(third.diagnostics.map((d) => d.fingerprint)).toContain(first.diagnostics[0]?.fingerprint);
    });
  });

  describe("when the change breaks a file that imports it", () => {
    const after = {
      ...BASE,
      "src/math.ts": "export function add(a: number, b: number): string {\n  return String(a + b);\n}\n",
    };
    it("reports the error in the importer (scope affected)", async () => {
      const r = await checkChange(shared, new MemoryRepo(), BASE, after);
      expect(r.diagnostics.map((d) => [d.code, d.range?.path])).toEqual([["ts/2322", "src/index.ts"]]);
      expect(r.coverage.paths).toBe(2); // math.ts and its importer, not other.ts
    });
    it("reports only the changed files with scope changed", async () => {
      const r = await checkChange(createTypeScriptChecker({ scope: "changed" }), new MemoryRepo(), BASE, after);
      expect(r.diagnostics).toEqual([]);
      expect(r.coverage.paths).toBe(1);
    });
    it("checks every file when a file is deleted", async () => {
      const { "src/math.ts": _gone, ...rest } = BASE;
      const r = await checkChange(shared, new MemoryRepo(), BASE, rest);
      expect(r.diagnostics.map((d) => [d.code, d.range?.path])).toEqual([["ts/2307", "src/index.ts"]]);
      expect(r.coverage.paths).toBe(2);
    });
  });

  describe("when the tree has a tsconfig", () => {
    const implicitAny = { ...BASE, "src/other.ts": "export function twice(x) {\n  return x * 2;\n}\n" };
    it("honours strict (noImplicitAny) from the tree's tsconfig", async () => {
      const strict = await checkChange(shared, new MemoryRepo(), BASE, implicitAny);
      expect(strict.diagnostics.map((d) => d.code)).toEqual(["ts/7006"]);
      const loose = { ...implicitAny, "tsconfig.json": tsconfig({ strict: false }) };
      const r = await checkChange(
        shared,
        new MemoryRepo(),
        { ...BASE, "tsconfig.json": loose["tsconfig.json"] },
        loose,
      );
      expect(r.diagnostics).toEqual([]);
    });
    it("honours include and extends, read through the callbacks", async () => {
      const files = {
        ...BASE,
        "tsconfig.base.json": tsconfig({ strict: true }),
        "tsconfig.json": JSON.stringify({ extends: "./tsconfig.base.json", include: ["src"] }),
        "scripts/outside.ts": 'export const n: number = "not checked";\n',
        "src/other.ts": "export function twice(x) {\n  return x * 2;\n}\n",
      };
      const repo = new MemoryRepo();
      const r = await checkChange(createTypeScriptChecker(), repo, null, files);
      expect(r.diagnostics.map((d) => [d.code, d.range?.path])).toEqual([["ts/7006", "src/other.ts"]]);
      expect(repo.log.filter((l) => l.startsWith("blob")).length).toBeGreaterThan(0);
    });
    it("reports tsconfig errors against the tsconfig file", async () => {
      const files = { ...BASE, "tsconfig.json": tsconfig({ target: "ES2099" }) };
      const r = await checkChange(shared, new MemoryRepo(), BASE, files);
      expect(r.diagnostics.some((d) => d.range?.path === "tsconfig.json" && d.severity === "error")).toBe(true);
    });
    it("uses TypeScript's defaults over every .ts file when the tree has none", async () => {
      const r = await checkChange(shared, new MemoryRepo(), null, {
        "a.ts": 'export const n: number = "x";\n',
        "lib/b.ts": "export const m = 1;\n",
      });
      expect(r.diagnostics.map((d) => [d.code, d.range?.path])).toEqual([["ts/2322", "a.ts"]]);
      expect(r.coverage.paths).toBe(2);
    });
  });

  describe("when content cannot be read", () => {
    it("answers incomplete and names the unreadable file", async () => {
      const repo = new MemoryRepo();
      const after = { ...BASE, "src/index.ts": BAD_INDEX };
      const tree = repo.tree(after);
      repo.refuse.add(blobDigest(BASE["src/math.ts"] as string));
      const r = await createTypeScriptChecker().check(
        { tree, changes: MemoryRepo.changes(BASE, after) },
        repo.source(),
      );
      expect(r.status).toBe("incomplete");
      expect(r.coverage.missing).toEqual(["src/math.ts"]);
    });
    it("answers incomplete when the tree cannot be listed", async () => {
      const repo = new MemoryRepo();
      const r = await createTypeScriptChecker().check({ tree: `sha256:${"0".repeat(64)}` }, repo.source());
      expect(r.status).toBe("incomplete");
      expect(r.coverage.missing).toEqual(["."]);
    });
    it("names an explicit project that is not in the tree", async () => {
      const r = await checkChange(
        createTypeScriptChecker({ project: "app/tsconfig.json" }),
        new MemoryRepo(),
        null,
        BASE,
      );
      expect(r.status).toBe("incomplete");
      expect(r.coverage.missing).toEqual(["app/tsconfig.json"]);
    });
    it("stops with the abort reason when the request is cancelled", async () => {
      const repo = new MemoryRepo();
      const tree = repo.tree(BASE);
      const controller = new AbortController();
      controller.abort(new Error("cancelled by the host"));
      await expect(createTypeScriptChecker().check({ tree }, repo.source(controller.signal))).rejects.toThrow(
        "cancelled by the host",
      );
    });
    it("answers incomplete when there are more diagnostics than it may report, saying how many and which files were cut (issue 26)", async () => {
      const many = Array.from({ length: 5 }, (_, i) => `export const n${i}: number = "x";\n`).join("");
      const r = await checkChange(
        createTypeScriptChecker({ maxDiagnostics: 3, scope: "all" }),
        new MemoryRepo(),
        BASE,
        {
          ...BASE,
          "src/other.ts": many,
          "src/third.ts": 'export const t: number = "x";\n',
        },
      );
      expect(r.diagnostics).toHaveLength(3);
      expect(r.diagnostics.map((d) => d.range?.path)).toEqual(["src/other.ts", "src/other.ts", "src/other.ts"]);
      expect(r.status).toBe("incomplete");
      expect(r.coverage.truncated).toEqual({ total: 6, reported: 3 });
      expect(r.coverage.missing).toEqual(["src/other.ts", "src/third.ts"]);
    });
  });

  describe("when a second check follows a one-file change", () => {
    it("reuses the warm program: one blob read, one file parsed, the structure reused", async () => {
      const checker = createTypeScriptChecker();
      const repo = new MemoryRepo();
      const cold = await checkChange(checker, repo, null, BASE);
      expect(cold.stats).toMatchObject({ oldProgram: false, parsedFiles: 3, reusedSourceFiles: 0 });
      const warm = await checkChange(checker, repo, BASE, { ...BASE, "src/index.ts": BAD_INDEX });
      expect(warm.stats).toMatchObject({
        oldProgram: true,
        structureReused: "completely",
        parsedFiles: 1,
        reusedSourceFiles: 2,
        blobReads: 1,
        rounds: 1,
      });
      // Only the folders on the changed path are listed again (root and src/).
      expect(warm.stats.treeReads).toBe(2);
      expect(errorsOf(warm)).toHaveLength(1);
      expect(checker.totals).toMatchObject({ checks: 2, parsedFiles: 4 });
    });
  });

  describe("options", () => {
    it.each([[{ scope: "everything" as never }], [{ maxDiagnostics: 0 }], [{ maxDiagnostics: 20_000 }]])(
      "refuses %j",
      (options) => {
        expect(() => createTypeScriptChecker(options)).toThrowWithCode("ASP_TS_BAD_OPTIONS");
      },
    );
    it("refuses a lib folder without the default library", () => {
      expect(() => createTypeScriptChecker({ libDir: "/nonexistent" })).toThrowWithCode("ASP_TS_LIB_NOT_FOUND");
    });
  });
});
