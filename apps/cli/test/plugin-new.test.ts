import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { validate } from "@asp/contracts";
import { writeKeyPair } from "@asp/plugin-host";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PLUGIN_KINDS, SCAFFOLD_TOOL_VERSIONS } from "../src/commands/plugin-new.js";
import { cliVersion } from "../src/context.js";
import { REPO_ROOT, runInProcess } from "./helpers.js";

// `asp plugin new` (issue 18 item 2): the files of the scaffold and its coded errors, fast and
// without npm. The scaffold is written under apps/cli/node_modules so that, like an installed
// project, it resolves @asp/sdk and TypeScript from a node_modules above it: that lets this test
// compile it (strict, NodeNext) and run the conformance kit on it. The full journey from the
// packed tarballs (npm install, pack, sign, pin, gate) is test/author-journey.test.ts.
// Verifier and sandbox scaffolds are compiled, their own vitest tests run, packed and signed with
// the workspace's plugin-pack, and checked with `asp plugin check` as a host would load them.

const CLI_DIR = join(REPO_ROOT, "apps/cli");
let work: string;
let key: string;

beforeAll(() => {
  mkdirSync(join(CLI_DIR, "node_modules"), { recursive: true });
  work = mkdtempSync(join(CLI_DIR, "node_modules/.asp-plugin-new-"));
  key = join(work, "keys/team");
  writeKeyPair(key);
  // The scaffolds' own tests run with this config, never with a vitest config above them.
  writeFileSync(
    join(work, "scaffold.vitest.config.mjs"),
    'export default { test: { include: ["test/**/*.test.ts"] } };\n',
  );
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

const asp = (argv: string[], cwd = work) => runInProcess(["--json", ...argv], { cwd, env: { PATH: process.env.PATH } });
const errorCode = (stdout: string): unknown => (JSON.parse(stdout) as { error?: { code?: unknown } }).error?.code;
const read = (dir: string, path: string): string => readFileSync(join(dir, path), "utf8");
const readJson = <T>(dir: string, path: string): T => JSON.parse(read(dir, path)) as T;

interface ScaffoldPackage {
  name: string;
  type: string;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  aspPlugin: { entry: string };
}

interface CheckReport {
  id: string;
  digest: string;
  kind: string;
  passed: boolean;
  grantFrom: string;
  steps: Array<{ id: string; status: string; code?: string }>;
}

const run = (cwd: string, args: string[]): string =>
  execFileSync(process.execPath, args, { cwd, stdio: "pipe", encoding: "utf8", env: { PATH: process.env.PATH } });
/** `npm run build`: the scaffold's tsc, with this repository's TypeScript. */
const compile = (dir: string) => run(dir, [join(REPO_ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"]);
/** `npm test`: the scaffold's vitest tests, with this repository's vitest (its JSON report). */
const scaffoldTests = (dir: string) =>
  run(dir, [
    join(REPO_ROOT, "node_modules/vitest/vitest.mjs"),
    "run",
    "--root",
    ".",
    "--config",
    "../scaffold.vitest.config.mjs",
    "--reporter=json",
  ]);
/** `npm run pack:plugin -- --key KEY`: bundle and sign into dist/plugin, with the workspace's plugin-pack. */
const packPlugin = (dir: string) => run(dir, [join(REPO_ROOT, "tools/plugin-pack/dist/cli.js"), ".", "--key", key]);
/** `npm run conformance -- --trust KEY.pub`: asp plugin check on the packed folder. */
async function check(
  dir: string,
  options: { trust?: string; extra?: string[] } = {},
): Promise<{ code: number; report: CheckReport }> {
  const trust = options.trust ?? `${key}.pub`;
  const r = await runInProcess(
    ["--json", "plugin", "check", "dist/plugin", "--trust", trust, ...(options.extra ?? [])],
    {
      cwd: dir,
      env: { PATH: process.env.PATH },
    },
  );
  return { code: r.code, report: JSON.parse(r.stdout) as CheckReport };
}
const failed = (report: CheckReport) =>
  report.steps.filter((s) => s.status !== "pass").map((s) => ({ id: s.id, code: s.code }));

/** Scaffold `name` of `kind`, apply `edit` to src/main.ts (a broken variant), compile and pack it. */
async function scaffoldAndPack(name: string, kind: string, edit?: (source: string) => string): Promise<string> {
  const r = await asp(["plugin", "new", name, "--kind", kind]);
  expect(r.code).toBe(0);
  const dir = join(work, name);
  if (edit !== undefined) {
    const before = read(dir, "src/main.ts");
    const after = edit(before);
    expect(after).not.toBe(before);
    writeFileSync(join(dir, "src/main.ts"), after);
  }
  compile(dir);
  packPlugin(dir);
  return dir;
}

describe("asp plugin new", () => {
  describe("when it scaffolds a provider", () => {
    let dir: string;
    beforeAll(async () => {
      const r = await asp(["plugin", "new", "demo-check"]);
      expect(r.code).toBe(0);
      dir = join(work, "demo-check");
      expect(JSON.parse(r.stdout)).toMatchObject({
        name: "demo-check",
        kind: "provider",
        dir,
        sdk: `^${cliVersion()}`,
      });
    });

    it("writes the project's files and nothing else", () => {
      const all = (d: string, prefix = ""): string[] =>
        readdirSync(join(dir, d), { withFileTypes: true }).flatMap((e) =>
          e.isDirectory() ? all(join(d, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`],
        );
      expect(all(".").sort()).toEqual(
        [
          ".gitignore",
          "README.md",
          "asp-plugin.json",
          "package.json",
          "src/main.ts",
          "test/main.test.ts",
          "tsconfig.json",
        ].sort(),
      );
    });

    it("package.json: @asp/sdk at ^<asp version>, the toolkit's tool versions, build/test/conformance/pack/sign scripts", () => {
      const pkg = readJson<ScaffoldPackage>(dir, "package.json");
      expect(pkg.name).toBe("demo-check");
      expect(pkg.type).toBe("module");
      expect(pkg.dependencies).toEqual({ "@asp/sdk": `^${cliVersion()}` });
      expect(pkg.devDependencies).toEqual({
        "@asp/cli": `^${cliVersion()}`,
        "@asp/plugin-pack": `^${cliVersion()}`,
        ...SCAFFOLD_TOOL_VERSIONS,
      });
      expect(Object.keys(pkg.scripts)).toEqual(
        expect.arrayContaining(["build", "test", "conformance", "pack:plugin", "sign"]),
      );
      expect(pkg.scripts["pack:plugin"]).toMatch(/^asp-plugin-pack\b/);
      expect(pkg.aspPlugin.entry).toBe("dist/main.js");
    });

    it("pins the same TypeScript, vitest and @types/node as this repository", () => {
      const root = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
        devDependencies: Record<string, string>;
      };
      for (const [name, version] of Object.entries(SCAFFOLD_TOOL_VERSIONS))
        expect(version, name).toBe(root.devDependencies[name]);
    });

    it("tsconfig is strict NodeNext; the manifest is a valid plugin-manifest matching the source", () => {
      const ts = readJson<{ compilerOptions: Record<string, unknown> }>(dir, "tsconfig.json").compilerOptions;
      expect(ts).toMatchObject({ strict: true, module: "NodeNext", moduleResolution: "NodeNext" });
      const manifest = readJson<unknown>(dir, "asp-plugin.json");
      expect(validate("plugin-manifest", manifest).ok).toBe(true);
      expect(manifest).toMatchObject({
        id: "demo-check",
        kind: "provider",
        entry: "main.js",
        capabilities: ["check"],
        diagnosticSources: ["demo-check"],
      });
      const source = read(dir, "src/main.ts");
      expect(source).toContain('id: "demo-check", version: "0.1.0"');
      expect(source).toContain('diagnosticSources: ["demo-check"]');
      expect(read(dir, "test/main.test.ts")).toContain('from "@asp/sdk/testing"');
    });

    it("compiles under strict NodeNext and passes the conformance kit as written", async () => {
      execFileSync(process.execPath, [join(REPO_ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], {
        cwd: dir,
        stdio: "pipe",
      });
      const r = await runInProcess(["--json", "conformance", "--", process.execPath, "dist/main.js"], {
        cwd: dir,
        env: { PATH: process.env.PATH },
      });
      const report = JSON.parse(r.stdout) as { passed: boolean; checks: Array<{ id: string; status: string }> };
      expect(report.checks.filter((c) => c.status !== "pass")).toEqual([]);
      expect(report.checks.length).toBeGreaterThanOrEqual(16);
      expect(report.passed).toBe(true);
      expect(r.code).toBe(0);
    }, 60_000);
  });

  describe.each([
    { kind: "verifier", capabilities: ["review", "guardian"], steps: ["load", "init", "review", "guardian"], tests: 4 },
    { kind: "sandbox", capabilities: ["sandbox:content_api"], steps: ["load", "init", "launch"], tests: 2 },
  ])("when it scaffolds a $kind", ({ kind, capabilities, steps, tests }) => {
    const name = `demo-${kind}`;
    let dir: string;
    beforeAll(async () => {
      dir = await scaffoldAndPack(name, kind);
    }, 120_000);

    it("writes a project with the same scripts as a provider's, conformance running asp plugin check", () => {
      const pkg = readJson<ScaffoldPackage>(dir, "package.json");
      expect(pkg.dependencies).toEqual({ "@asp/sdk": `^${cliVersion()}` });
      expect(pkg.scripts.conformance).toBe("asp plugin check dist/plugin");
      expect(pkg.scripts["pack:plugin"]).toMatch(/^asp-plugin-pack\b/);
      const manifest = readJson<unknown>(dir, "asp-plugin.json");
      expect(validate("plugin-manifest", manifest).ok).toBe(true);
      expect(manifest).toMatchObject({ id: name, kind, entry: "main.js", capabilities, diagnosticSources: [] });
      expect(read(dir, "src/main.ts")).toContain(kind === "verifier" ? "defineVerifier({" : "defineSandbox({");
    });

    it("its own tests pass as written", () => {
      const result = JSON.parse(scaffoldTests(dir)) as {
        success: boolean;
        numPassedTests: number;
        numTotalTests: number;
      };
      expect(result).toMatchObject({ success: true, numPassedTests: tests, numTotalTests: tests });
    }, 60_000);

    it("the packed, signed folder passes asp plugin check: loaded as the host loads it, its port called once", async () => {
      const { code, report } = await check(dir);
      expect(failed(report)).toEqual([]);
      expect(report).toMatchObject({ id: name, kind, passed: true, grantFrom: "manifest" });
      expect(report.steps.map((s) => s.id)).toEqual(steps);
      expect(code).toBe(0);
    }, 60_000);

    it("host §1: fails the load step when the folder is signed by a key the host does not trust", async () => {
      const other = join(work, `keys/other-${kind}`);
      writeKeyPair(other);
      const { code, report } = await check(dir, { trust: `${other}.pub` });
      expect(failed(report)).toEqual([{ id: "load", code: "ASP_PLUGIN_UNTRUSTED_KEY" }]);
      expect(code).toBe(1);
    }, 60_000);

    it("host §1: with --policy, passes when its plugins[] grants the digest, fails load with ASP_PLUGIN_NOT_GRANTED when not", async () => {
      const { report: first } = await check(dir);
      const policy = (plugins: unknown[]) => {
        const path = join(work, `policy-${kind}-${plugins.length}.json`);
        writeFileSync(
          path,
          JSON.stringify({ apiVersion: "asp.policy/v1", requirements: [], providers: [], grants: [], plugins }),
        );
        return path;
      };
      const granted = await check(dir, {
        extra: ["--policy", policy([{ id: name, digest: first.digest, capabilities }])],
      });
      expect(failed(granted.report)).toEqual([]);
      expect(granted.report).toMatchObject({ passed: true, grantFrom: "policy" });
      const none = await check(dir, { extra: ["--policy", policy([])] });
      expect(failed(none.report)).toEqual([{ id: "load", code: "ASP_PLUGIN_NOT_GRANTED" }]);
      expect(none.code).toBe(1);
    }, 60_000);
  });

  describe("when asp plugin check meets a broken plugin", () => {
    it("host §3: a sandbox that claims isolated without the sandbox:bubblewrap grant fails launch with ASP_PLUGIN_BAD_OUTPUT", async () => {
      const dir = await scaffoldAndPack("bad-sandbox", "sandbox", (s) =>
        s.replace('mode: "advisory"', 'mode: "isolated"').replace("directWrite: true", "directWrite: false"),
      );
      const { code, report } = await check(dir);
      expect(failed(report)).toEqual([{ id: "launch", code: "ASP_PLUGIN_BAD_OUTPUT" }]);
      expect(code).toBe(1);
    }, 120_000);

    it("a verifier returning a schema-invalid answer fails that port call with ASP_PLUGIN_BAD_OUTPUT", async () => {
      const dir = await scaffoldAndPack("bad-verifier", "verifier", (s) =>
        s.replace('risk: denied ? "high" : "low"', 'risk: (denied ? "high" : "severe") as "high"'),
      );
      const { code, report } = await check(dir);
      expect(failed(report)).toEqual([{ id: "guardian", code: "ASP_PLUGIN_BAD_OUTPUT" }]);
      expect(code).toBe(1);
    }, 120_000);

    it("a sandbox whose launch throws without a code fails launch with ASP_CLI_PLUGIN_THREW", async () => {
      const dir = await scaffoldAndPack("throwing-sandbox", "sandbox", (s) =>
        s.replace(
          "async launch(request) {\n",
          'async launch(request) {\n    if (request.cwd !== "") throw new Error("no launch today");\n',
        ),
      );
      const { code, report } = await check(dir);
      expect(failed(report)).toEqual([{ id: "launch", code: "ASP_CLI_PLUGIN_THREW" }]);
      expect(code).toBe(1);
    }, 120_000);

    it("host §2: a verifier that never answers fails each call with ASP_CLI_PLUGIN_TIMEOUT", async () => {
      const dir = await scaffoldAndPack("silent-verifier", "verifier", (s) =>
        s.replace(
          'verify: async (request) => (request.kind === "review" ? review(request) : guard(request)),',
          "verify: () => new Promise(() => {}),",
        ),
      );
      const { code, report } = await check(dir, { extra: ["--timeout", "50"] });
      expect(failed(report)).toEqual([
        { id: "review", code: "ASP_CLI_PLUGIN_TIMEOUT" },
        { id: "guardian", code: "ASP_CLI_PLUGIN_TIMEOUT" },
      ]);
      expect(code).toBe(1);
    }, 120_000);

    it("host §1: a bundle changed after signing fails the load step, and nothing of it runs", async () => {
      const dir = await scaffoldAndPack("tampered-verifier", "verifier");
      const bundle = join(dir, "dist/plugin/main.js");
      writeFileSync(bundle, `globalThis.__aspTampered = true;\n${read(dir, "dist/plugin/main.js")}`);
      const { code, report } = await check(dir);
      expect(failed(report)).toEqual([{ id: "load", code: "ASP_PLUGIN_DIGEST_MISMATCH" }]);
      expect((globalThis as { __aspTampered?: unknown }).__aspTampered).toBeUndefined();
      expect(code).toBe(1);
    }, 120_000);

    it("ASP_CLI_BAD_INPUT for a provider folder (it is checked by asp conformance --plugin)", async () => {
      const dir = await scaffoldAndPack("a-provider", "provider");
      const r = await runInProcess(["--json", "plugin", "check", "dist/plugin", "--trust", `${key}.pub`], {
        cwd: dir,
        env: { PATH: process.env.PATH },
      });
      expect(r.code).toBe(64);
      expect(errorCode(r.stdout)).toBe("ASP_CLI_BAD_INPUT");
    }, 120_000);
  });

  describe("--sdk and --dir", () => {
    it("writes a tarball path as an absolute file: spec and keeps a registry range as given", async () => {
      expect((await asp(["plugin", "new", "from-tarball", "--sdk", "./t/asp-sdk-0.1.0.tgz"])).code).toBe(0);
      expect(readJson<ScaffoldPackage>(join(work, "from-tarball"), "package.json").dependencies["@asp/sdk"]).toBe(
        `file:${join(work, "t/asp-sdk-0.1.0.tgz")}`,
      );
      expect((await asp(["plugin", "new", "from-range", "--sdk", "~0.1.2"])).code).toBe(0);
      expect(readJson<ScaffoldPackage>(join(work, "from-range"), "package.json").dependencies["@asp/sdk"]).toBe(
        "~0.1.2",
      );
    });

    it("scaffolds into --dir, and into an existing empty folder", async () => {
      mkdirSync(join(work, "empty"));
      expect((await asp(["plugin", "new", "in-empty", "--dir", "empty"])).code).toBe(0);
      expect(readJson<ScaffoldPackage>(join(work, "empty"), "package.json").name).toBe("in-empty");
    });
  });

  describe("when it refuses", () => {
    it.each([
      ["upper case", "Demo"],
      ["a space", "demo check"],
      ["a path", "../demo"],
      ["a scope", "@me/demo"],
      ["a leading dash (an option to npm)", "-demo"],
      ["a leading dot", ".demo"],
      ["too long", "a".repeat(65)],
    ])("ASP_CLI_BAD_PLUGIN_NAME for %s", async (_what, name) => {
      const r = await asp(["plugin", "new", "--", name]);
      expect(r.code).toBe(64);
      expect(errorCode(r.stdout)).toBe("ASP_CLI_BAD_PLUGIN_NAME");
    });

    it("ASP_CLI_UNKNOWN_KIND for a kind outside provider, verifier, sandbox", async () => {
      expect(PLUGIN_KINDS).toEqual(["provider", "verifier", "sandbox"]);
      const r = await asp(["plugin", "new", "demo-x", "--kind", "linter"]);
      expect(r.code).toBe(64);
      expect(errorCode(r.stdout)).toBe("ASP_CLI_UNKNOWN_KIND");
    });

    it("ASP_CLI_DIR_NOT_EMPTY for a folder with a file in it, and leaves the file as it was", async () => {
      const dir = join(work, "taken");
      mkdirSync(dir);
      writeFileSync(join(dir, "package.json"), "mine\n");
      const r = await asp(["plugin", "new", "taken"]);
      expect(r.code).toBe(64);
      expect(errorCode(r.stdout)).toBe("ASP_CLI_DIR_NOT_EMPTY");
      expect(readdirSync(dir)).toEqual(["package.json"]);
      expect(read(dir, "package.json")).toBe("mine\n");
    });

    it("ASP_CLI_DIR_NOT_EMPTY for a file or a symbolic link where the folder would go", async () => {
      writeFileSync(join(work, "a-file"), "x");
      expect(errorCode((await asp(["plugin", "new", "a-file"])).stdout)).toBe("ASP_CLI_DIR_NOT_EMPTY");
      symlinkSync(join(work, "nowhere"), join(work, "a-link"));
      expect(errorCode((await asp(["plugin", "new", "a-link"])).stdout)).toBe("ASP_CLI_DIR_NOT_EMPTY");
      expect(readdirSync(work)).not.toContain("nowhere");
    });
  });
});
