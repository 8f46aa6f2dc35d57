import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { PUBLIC_PACKAGES } from "./lib/pack.js";
import { ROOT } from "./lib/workspace.js";

// Issue 18 item 5: one API, documented. Every ```ts block of each public package README (and of
// the host composer's guide) compiles, strict + NodeNext, against the BUILT packages as a
// consumer outside the workspace resolves them (types from `dist`, through `exports`); and
// every export of every entry point is named in its package's README, so new API cannot land
// undocumented. A block marked ```ts fragment``` is a deliberate excerpt and is skipped.

/** The markdown files whose ```ts blocks are compiled. */
const DOCS: readonly string[] = [...PUBLIC_PACKAGES.map((p) => `${p.dir}/README.md`), "docs/composing.md"];

/** One ```ts block of a markdown file. */
interface TsBlock {
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly text: string;
}

/** The ```ts / ```typescript blocks of `markdown`, without those marked `fragment`. */
function tsBlocks(markdown: string): TsBlock[] {
  const blocks: TsBlock[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,}|~{3,})\s*(\S*)(.*)$/.exec(lines[i] ?? "");
    if (open === null) continue;
    const [, fence = "```", lang = "", rest = ""] = open;
    let j = i + 1;
    while (j < lines.length && (lines[j] ?? "").trim() !== fence) j++;
    const words = rest.trim().split(/\s+/);
    if ((lang === "ts" || lang === "typescript") && !words.includes("fragment"))
      blocks.push({ line: i + 1, text: lines.slice(i + 1, j).join("\n") });
    i = j;
  }
  return blocks;
}

interface Entry {
  readonly subpath: string;
  readonly source: string;
}

/** The entry points of a package: every `exports` subpath with an `@asp/source` TypeScript file. */
function entryPoints(dir: string): Entry[] {
  const manifest = JSON.parse(readFileSync(join(ROOT, dir, "package.json"), "utf8")) as {
    exports: Record<string, unknown>;
  };
  return Object.entries(manifest.exports).flatMap(([subpath, target]) => {
    const source = (target as Record<string, unknown> | null)?.["@asp/source"];
    return typeof source === "string" && source.endsWith(".ts") ? [{ subpath, source: join(ROOT, dir, source) }] : [];
  });
}

/** Every name exported by the TypeScript module `file` (values and types). */
function exportNames(program: ts.Program, file: string): string[] {
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const symbol = source === undefined ? undefined : checker.getSymbolAtLocation(source);
  if (symbol === undefined) throw new Error(`${relative(ROOT, file)}: not a module`);
  return checker.getExportsOfModule(symbol).map((s) => s.name);
}

/** True when `readme` names `name` in code: `` `name` ``, `` `name(`` ... or inside a code block. */
function documents(readme: string, name: string): boolean {
  const escaped = name.replace(/[$]/g, "\\$");
  return new RegExp(`\`${escaped}(?![\\w$])|(?:import|export)[^;]*\\b${escaped}(?![\\w$])`).test(readme);
}

let work: string | undefined;
afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

/** A consumer project outside the repository whose `node_modules/@asp/*` link to the built workspace packages. */
function consumerProject(): string {
  work = mkdtempSync(join(tmpdir(), "asp-readme-examples-"));
  const scope = join(work, "node_modules/@asp");
  mkdirSync(scope, { recursive: true });
  for (const p of PUBLIC_PACKAGES) symlinkSync(join(ROOT, p.dir), join(scope, p.name.slice("@asp/".length)), "dir");
  // What a consumer installs beside the packages: Node's types, the test runner, the DI container.
  for (const [name, from] of [
    ["@types/node", "."],
    ["vitest", "."],
    ["tsyringe", "packages/plugin-host"],
    ["reflect-metadata", "packages/plugin-host"],
  ] as const) {
    mkdirSync(join(work, "node_modules", name, ".."), { recursive: true });
    symlinkSync(realpathSync(join(ROOT, from, "node_modules", name)), join(work, "node_modules", name), "dir");
  }
  writeFileSync(join(work, "package.json"), '{ "name": "readme-examples", "private": true, "type": "module" }\n');
  mkdirSync(join(work, "src"));
  return work;
}

describe("README examples (issue 18 item 5)", () => {
  it("every ```ts block of each public README and docs/composing.md compiles (strict, NodeNext) against the built packages", () => {
    for (const p of PUBLIC_PACKAGES) {
      if (!existsSync(join(ROOT, p.dir, "dist/index.d.ts")))
        throw new Error(`${p.dir} is not built: run \`pnpm build\` first (pnpm test builds before vitest runs)`);
    }
    const project = consumerProject();
    const origin = new Map<string, { doc: string; line: number }>();
    for (const doc of DOCS) {
      const path = join(ROOT, doc);
      if (!existsSync(path)) throw new Error(`${doc} is missing`);
      for (const block of tsBlocks(readFileSync(path, "utf8"))) {
        const file = join(project, "src", `${doc.replace(/[^\w]+/g, "_")}_L${block.line}.ts`);
        // `export {}` makes every block a module (top-level await, no global name clashes).
        writeFileSync(file, `${block.text}\nexport {};\n`);
        origin.set(file, { doc, line: block.line });
      }
    }
    expect(origin.size).toBeGreaterThan(DOCS.length);
    const program = ts.createProgram([...origin.keys()], {
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      target: ts.ScriptTarget.ES2022,
      lib: ["lib.es2022.d.ts"],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ["node"],
      typeRoots: [join(project, "node_modules/@types")],
      skipLibCheck: true,
      noEmit: true,
    });
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const at = d.file === undefined ? undefined : origin.get(d.file.fileName);
      const text = ts.flattenDiagnosticMessageText(d.messageText, "\n");
      if (d.file === undefined || at === undefined || d.start === undefined) return `TS${d.code}: ${text}`;
      const { line } = d.file.getLineAndCharacterOfPosition(d.start);
      // The block's first line is the line after its opening fence.
      return `${at.doc}:${at.line + 1 + line}: TS${d.code} ${text}`;
    });
    expect(problems).toEqual([]);
  }, 180_000);

  it("the @asp/ths README names every composeHost option (ComposeHostOptions), so none hides in the .d.ts", () => {
    const source = join(ROOT, "packages/ths/src/index.ts");
    const program = ts.createProgram([source], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      customConditions: ["@asp/source"],
      noEmit: true,
      skipLibCheck: true,
    });
    const checker = program.getTypeChecker();
    const file = program.getSourceFile(source);
    const module = file === undefined ? undefined : checker.getSymbolAtLocation(file);
    const symbol = module && checker.getExportsOfModule(module).find((s) => s.name === "ComposeHostOptions");
    expect(symbol).toBeDefined();
    if (symbol === undefined) return;
    const options = checker
      .getDeclaredTypeOfSymbol(checker.getAliasedSymbol(symbol))
      .getProperties()
      .map((p) => p.name);
    expect(options).toEqual(expect.arrayContaining(["store", "policy", "register", "clock", "warm"]));
    const readme = readFileSync(join(ROOT, "packages/ths/README.md"), "utf8");
    expect(options.filter((name) => !readme.includes(`| \`${name}\``))).toEqual([]);
  }, 60_000);

  describe.each(PUBLIC_PACKAGES.map((p) => [p.dir, p] as const))("%s/README.md", (dir, pkg) => {
    const readme = readFileSync(join(ROOT, dir, "README.md"), "utf8");
    it("names every export of every entry point (new API cannot land undocumented)", () => {
      const entries = entryPoints(dir);
      expect(entries.length).toBeGreaterThan(0);
      const program = ts.createProgram(
        entries.map((e) => e.source),
        {
          module: ts.ModuleKind.NodeNext,
          moduleResolution: ts.ModuleResolutionKind.NodeNext,
          customConditions: ["@asp/source"],
          noEmit: true,
          skipLibCheck: true,
        },
      );
      const missing = entries.flatMap((e) =>
        exportNames(program, e.source)
          .filter((name) => !documents(readme, name))
          .map((name) => `${e.subpath}: ${name}`),
      );
      expect(missing).toEqual([]);
    }, 60_000);
    it("says how to install it with npm and links its shipped API reference", () => {
      expect(readme).toContain(`npm install ${pkg.name}`);
      expect(readme).toContain("](./API.md)");
      expect(pkg.manifest.files).toContain("API.md");
    });
    it("reads trusted policy and trust roots from absolute, trusted paths only (threat model invariant 2)", () => {
      for (const block of tsBlocks(readme)) {
        expect(block.text, `${dir}/README.md:${block.line}`).not.toMatch(
          /(policy|trustRoots|plugins)\s*:\s*\[?\s*["']\.{1,2}\//,
        );
      }
    });
  });
});
