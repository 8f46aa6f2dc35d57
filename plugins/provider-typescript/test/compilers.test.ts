import { cpSync, existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { validateAssessment } from "@asp/contracts";
import { MemoryRepo, TestHost } from "@asp/sdk/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BUNDLED_COMPILERS,
  chooseCompiler,
  createTypeScriptChecker,
  type PinnedVersion,
  pinnedTypeScript,
  satisfies,
} from "../src/index.js";
import { createFixture, type Fixture, findingsOf, realPackage, runTsc, snapshotFixture } from "./env-fixture.js";

// The compiler that decides is the project's (issue 26): the checker reads the TypeScript version
// the project pins, answers with the bundled compiler of that major.minor, says which in `tool`,
// and is `unsupported` for a version it does not bundle, never a silent substitute. The parity
// cases install the project's own compiler in the fixture and run its real tsc.

/** The signed plugin folder `pnpm build` packs: its compilers load only from inside it. */
const PACKED = fileURLToPath(new URL("../dist/plugin/main.mjs", import.meta.url));
const packed = existsSync(join(PACKED, "..", "asp-plugin.json"));

const files = (entries: Record<string, string>) => (rel: string) => entries[rel];

describe("which TypeScript the project pins", () => {
  it("the installed node_modules/typescript decides first, nearest the project", () => {
    const read = files({
      "node_modules/typescript/package.json": JSON.stringify({ name: "typescript", version: "5.9.2" }),
      "packages/a/node_modules/typescript/package.json": JSON.stringify({ name: "typescript", version: "4.9.5" }),
      "package-lock.json": JSON.stringify({ packages: { "node_modules/typescript": { version: "6.0.3" } } }),
    });
    expect(pinnedTypeScript(read, "")?.version).toBe("5.9.2");
    expect(pinnedTypeScript(read, "packages/a")).toMatchObject({
      version: "4.9.5",
      from: "packages/a/node_modules/typescript/package.json is installed at 4.9.5",
    });
  });

  it("npm lockfiles v1 and v3", () => {
    expect(
      pinnedTypeScript(
        files({
          "package-lock.json": JSON.stringify({ packages: { "node_modules/typescript": { version: "5.9.3" } } }),
        }),
        "",
      ),
    ).toEqual({ version: "5.9.3", range: null, from: "package-lock.json pins 5.9.3" });
    expect(
      pinnedTypeScript(
        files({ "npm-shrinkwrap.json": JSON.stringify({ dependencies: { typescript: { version: "4.9.5" } } }) }),
        "",
      )?.version,
    ).toBe("4.9.5");
  });

  it("pnpm lockfiles v5, v6 and v9, single project and workspace", () => {
    const v5 =
      "lockfileVersion: 5.4\n\ndevDependencies:\n  typescript: 4.9.5\n\npackages:\n\n  /typescript/4.9.5:\n    resolution: {}\n";
    const v6 =
      "lockfileVersion: '6.0'\n\ndevDependencies:\n  typescript:\n    specifier: ^5.9.0\n    version: 5.9.3\n\npackages:\n\n  /typescript@5.9.3:\n    resolution: {}\n";
    const v9 = [
      "lockfileVersion: '9.0'",
      "",
      "importers:",
      "",
      "  .:",
      "    devDependencies:",
      "      typescript:",
      "        specifier: 6.0.3",
      "        version: 6.0.3",
      "",
      "  packages/old:",
      "    devDependencies:",
      "      typescript:",
      "        specifier: 4.9.5",
      "        version: 4.9.5",
      "",
      "packages:",
      "",
      "  typescript@4.9.5:",
      "    resolution: {}",
      "",
      "  typescript@6.0.3:",
      "    resolution: {}",
      "",
    ].join("\n");
    expect(pinnedTypeScript(files({ "pnpm-lock.yaml": v5 }), "")?.version).toBe("4.9.5");
    expect(pinnedTypeScript(files({ "pnpm-lock.yaml": v6 }), "")?.version).toBe("5.9.3");
    // A workspace: the root importer's compiler is the root's `tsc`.
    expect(pinnedTypeScript(files({ "pnpm-lock.yaml": v9 }), "")).toEqual({
      version: "6.0.3",
      range: null,
      from: "pnpm-lock.yaml pins 6.0.3",
    });
    // Several versions and none at the root: no truthful choice.
    const noRoot = v9.replace(/ {2}\.:\n {4}devDependencies:\n( {6}.*\n)+/, "  .: {}\n");
    const pinned = pinnedTypeScript(files({ "pnpm-lock.yaml": noRoot }), "") as PinnedVersion;
    expect(pinned.ambiguous).toEqual(["4.9.5", "6.0.3"]);
    const choice = chooseCompiler(pinned);
    expect(choice.ok).toBe(false);
  });

  it("yarn classic and berry lockfiles", () => {
    const classic =
      '# yarn lockfile v1\n\n\ntypescript@^5.9.0, typescript@~5.9.2:\n  version "5.9.3"\n  resolved "x"\n';
    const berry =
      '__metadata:\n  version: 8\n\n"typescript@npm:^4.9.0":\n  version: 4.9.5\n  resolution: "typescript@npm:4.9.5"\n';
    expect(pinnedTypeScript(files({ "yarn.lock": classic }), "")?.version).toBe("5.9.3");
    expect(pinnedTypeScript(files({ "yarn.lock": berry }), "")?.version).toBe("4.9.5");
    // `@types/typescript` or `typescript-eslint` is not the compiler.
    const other = '"@types/typescript@^1.0.0":\n  version "1.0.0"\n\ntypescript-eslint@^8.0.0:\n  version "8.1.0"\n';
    expect(pinnedTypeScript(files({ "yarn.lock": other }), "")).toBeNull();
  });

  it("package.json alone: an exact version, or a range", () => {
    expect(
      pinnedTypeScript(files({ "package.json": JSON.stringify({ devDependencies: { typescript: "4.9.5" } }) }), ""),
    ).toEqual({ version: "4.9.5", range: null, from: "package.json pins 4.9.5" });
    expect(
      pinnedTypeScript(files({ "package.json": JSON.stringify({ dependencies: { typescript: "^5.0.0" } }) }), ""),
    ).toEqual({ version: null, range: "^5.0.0", from: "package.json asks for ^5.0.0" });
    expect(pinnedTypeScript(files({ "package.json": JSON.stringify({ name: "no-ts" }) }), "")).toBeNull();
  });

  it("npm range forms", () => {
    expect(satisfies("5.9.3", "^5.0.0")).toBe(true);
    expect(satisfies("6.0.3", "^5.0.0")).toBe(false);
    expect(satisfies("5.9.3", "~5.9.0")).toBe(true);
    expect(satisfies("5.9.3", "~5.8.0")).toBe(false);
    expect(satisfies("4.9.5", ">=4.5 <5")).toBe(true);
    expect(satisfies("4.9.5", "4.x")).toBe(true);
    expect(satisfies("4.9.5", "5.x || 4.9")).toBe(true);
    expect(satisfies("6.0.3", "*")).toBe(true);
    expect(satisfies("5.9.3", "workspace:*")).toBe(false);
  });
});

describe("the compiler chosen", () => {
  it("the bundled compiler of the same major.minor, the default when none is pinned, the newest in a range", () => {
    expect(BUNDLED_COMPILERS.map((c) => c.minor)).toEqual(["6.0", "5.9", "4.9"]);
    const exact = chooseCompiler({ version: "4.9.4", range: null, from: "package-lock.json pins 4.9.4" });
    expect(exact).toMatchObject({ ok: true, compiler: { minor: "4.9" }, selectedBy: "package-lock.json pins 4.9.4" });
    expect(chooseCompiler(null)).toMatchObject({ ok: true, compiler: { minor: "6.0" } });
    expect(chooseCompiler({ version: null, range: "^5.0.0", from: "package.json asks for ^5.0.0" })).toMatchObject({
      ok: true,
      compiler: { minor: "5.9" },
    });
  });

  it("a version not bundled, or not allowed by trusted configuration, is refused with the reason", () => {
    const pinned = { version: "5.4.5", range: null, from: "pnpm-lock.yaml pins 5.4.5" };
    const refused = chooseCompiler(pinned);
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.reason).toMatch(
      /pnpm-lock\.yaml pins 5\.4\.5, and this plugin serves TypeScript 6\.0, 5\.9, 4\.9 only/,
    );
    // Trusted configuration may narrow the set: a candidate cannot pick a compiler policy left out.
    expect(chooseCompiler({ version: "4.9.5", range: null, from: "x" }, ["6.0", "5.9"]).ok).toBe(false);
    expect(() => createTypeScriptChecker({ compilers: ["5.4"] })).toThrow(/compiler 5\.4 is not bundled/);
  });
});

/** Install the real `typescript@version` of this workspace into the fixture (what its tsc runs). */
function installTypeScript(fx: Fixture, version: string): string {
  const pkg = realPackage("typescript", [], version);
  const to = join(fx.dir, "node_modules", "typescript");
  mkdirSync(join(to, "lib"), { recursive: true });
  cpSync(join(pkg.dir, "package.json"), join(to, "package.json"));
  cpSync(join(pkg.dir, "bin"), join(to, "bin"), { recursive: true });
  for (const f of readdirSync(join(pkg.dir, "lib"))) {
    if (/^_?tsc\.js$/.test(f) || /^lib.*\.d\.ts$/.test(f)) cpSync(join(pkg.dir, "lib", f), join(to, "lib", f));
  }
  return join(to, "bin", "tsc");
}

/** Five injected errors of different kinds, valid for every compiler here. */
const BROKEN = `import { shout } from "./util";

export const n: number = "one"; // TS2322
export const len = shout("a", "b"); // TS2554
export function untyped(x) { return x; } // TS7006
export const missing = qqNeverDeclared; // TS2304
export const prop = shout("a").nope; // TS2339
`;
const UTIL = `export function shout(text: string): string {\n  return text.toUpperCase();\n}\n`;

/** Each case runs the project's real tsc and a cold check on a shared machine: generous, never asserted on. */
const SLOW = { timeout: 240_000 };

describe.each([
  {
    version: "4.9.5",
    // What TypeScript 6 rejects outright (TS5107 and friends) and these projects' own tsc accepts.
    compilerOptions: { target: "es5", module: "commonjs", moduleResolution: "node", strict: true, noEmit: true },
  },
  {
    version: "5.9.3",
    compilerOptions: {
      target: "es2017",
      module: "commonjs",
      moduleResolution: "node",
      strict: true,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      noEmit: true,
    },
  },
])("a project pinned to TypeScript $version", SLOW, ({ version, compilerOptions }) => {
  let fx: Fixture;
  let tsc: string;
  const checker = createTypeScriptChecker({ scope: "all" });
  const decorated =
    version === "5.9.3"
      ? "function logged(_t: object, _k: string): void {}\nexport class Service {\n  @logged\n  run(): void {}\n}\n"
      : "";
  beforeAll(() => {
    fx = createFixture("npm");
    tsc = installTypeScript(fx, version);
    fx.write({
      "package.json": JSON.stringify({ name: "pinned", version: "1.0.0", devDependencies: { typescript: version } }),
      "tsconfig.json": JSON.stringify({ compilerOptions, include: ["src"] }),
      "src/util.ts": UTIL,
      "src/index.ts": `import { shout } from "./util";\n\nexport const loud: string = shout("a");\n${decorated}`,
    });
  }, 120_000);
  afterAll(() => fx.remove(), 120_000);

  const check = async () => {
    const snap = await snapshotFixture(fx.dir);
    return checker.check({ tree: snap.tree, environment: snap.environment }, snap.repo.source());
  };

  it("host §9: clean, as the project's own tsc says, and the answer names that compiler", async () => {
    expect(runTsc(fx.dir, "project", "tsconfig.json", tsc)).toEqual([]);
    // The bundled default (TypeScript 6) rejects this project's options (TS5107 and friends):
    // answering with it would deny what the project's own tsc accepts.
    expect(runTsc(fx.dir, "project")).not.toEqual([]);
    const r = await check();
    expect(findingsOf(r.diagnostics)).toEqual([]);
    expect(r.status).toBe("complete");
    expect(r.tool).toEqual({
      name: "typescript",
      version,
      selectedBy: `node_modules/typescript/package.json is installed at ${version}`,
    });
  });

  it("host §9: five injected errors of different kinds: the same (file, line, column, code) as the project's tsc", async () => {
    fx.write({ "src/index.ts": `${BROKEN}${decorated}` });
    const theirs = runTsc(fx.dir, "project", "tsconfig.json", tsc);
    expect(theirs.map((f) => f.slice(f.indexOf(" ") + 1)).sort()).toEqual([
      "TS2304",
      "TS2322",
      "TS2339",
      "TS2554",
      "TS7006",
    ]);
    const r = await check();
    expect(findingsOf(r.diagnostics)).toEqual(theirs);
    expect(r.tool?.version).toBe(version);
  });

  it.skipIf(!packed)(
    "host §9: the signed plugin, as a real subprocess, answers with the compiler bundled inside it and says so",
    async () => {
      const theirs = runTsc(fx.dir, "project", "tsconfig.json", tsc);
      const repo = new MemoryRepo();
      const snap = await snapshotFixture(fx.dir, ["node_modules"], repo);
      if (snap.environment === null) throw new Error("the fixture has no node_modules");
      const host = new TestHost(PACKED, { repo, args: ["--scope", "all"] });
      try {
        await host.initialize();
        const a = await host.assess({ requestId: "pinned", baseline: snap.tree, environment: snap.environment });
        expect(validateAssessment(a).ok).toBe(true);
        expect(a.tool).toMatchObject({ name: "typescript", version });
        expect(findingsOf(a.diagnostics)).toEqual(theirs);
        expect(await host.shutdown()).toBe(0);
      } finally {
        host.kill();
      }
    },
  );

  it("host §2: with that compiler left out of trusted configuration the check is unsupported, never another compiler's answer", async () => {
    const narrow = createTypeScriptChecker({ scope: "all", compilers: ["6.0"] });
    const snap = await snapshotFixture(fx.dir);
    const r = await narrow.check({ tree: snap.tree, environment: snap.environment }, snap.repo.source());
    expect(r.status).toBe("unsupported");
    expect(r.diagnostics).toEqual([]);
    expect(r.error?.code).toBe("ASP_TS_UNSUPPORTED_VERSION");
    expect(r.error?.message).toContain(`installed at ${version}, and this plugin serves TypeScript 6.0 only`);
    expect(r.tool).toBeUndefined();
  });
});
