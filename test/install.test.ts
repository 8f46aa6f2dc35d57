import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PackedPackage, PUBLIC_PACKAGES as PUBLIC, packPublicPackages, USER_ENV } from "./lib/pack.js";
import { ROOT } from "./lib/workspace.js";

// Issue 18 item 1: every public package installs and works OUTSIDE this repository. The
// packages (built by `pnpm test`'s build step) are packed with `pnpm pack`, installed with npm
// into a fresh project in the system temp folder, and used from a strict NodeNext TypeScript
// consumer that composes a host and gates a tiny git repository. Nothing resolves through the
// workspace: a missing `files` entry, an unrewritten `workspace:*`, a wrong `exports`/`types`
// path or a runtime dependency left in devDependencies fails here.

const run = promisify(execFile);
const FIXTURES = join(ROOT, "test/fixtures/install");
const STEP_TIMEOUT = 240_000;

const rootManifest = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};

const log = (message: string): void => {
  console.log(`[install] ${message}`);
};

const ENV = USER_ENV;

async function sh(cmd: string, args: readonly string[], cwd: string): Promise<{ stdout: string; stderr: string }> {
  return run(cmd, [...args], { cwd, timeout: STEP_TIMEOUT, maxBuffer: 16 * 1024 * 1024, env: ENV });
}

let work: string;
let project: string;
let repo: string;
let packed: PackedPackage[] = [];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "asp-install-"));
  expect(relative(ROOT, work).startsWith("..")).toBe(true);
  packed = await packPublicPackages(join(work, "tarballs"), log);

  project = join(work, "consumer");
  mkdirSync(project);
  const dependencies = Object.fromEntries(packed.map((p) => [p.name, `file:${p.tarball}`]));
  writeFileSync(
    join(project, "package.json"),
    `${JSON.stringify(
      {
        name: "asp-install-consumer",
        private: true,
        type: "module",
        dependencies,
        devDependencies: {
          typescript: rootManifest.devDependencies.typescript,
          "@types/node": rootManifest.devDependencies["@types/node"],
        },
      },
      null,
      2,
    )}\n`,
  );
  cpSync(join(FIXTURES, "consumer"), project, { recursive: true });
  cpSync(join(FIXTURES, "provider"), join(project, "provider"), { recursive: true });

  log(`npm install in ${project}`);
  await sh("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], project);
  log("tsc (strict, NodeNext) with the project's own typescript");
  await sh(process.execPath, [join(project, "node_modules/typescript/bin/tsc"), "-p", "."], project);

  repo = join(work, "repo");
  mkdirSync(repo);
  const git = (...args: string[]) =>
    sh("git", ["-c", "user.name=asp", "-c", "user.email=asp@example.invalid", ...args], repo);
  await git("init", "-q", "-b", "main");
  writeFileSync(join(repo, "a.ts"), "export const a = 1;\n");
  await git("add", "-A");
  await git("commit", "-q", "-m", "initial");
  log("ready");
}, 600_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe("installable packages (issue 18)", () => {
  it("packs every public package, with a rewritten workspace:*, a licence, engines.node and only what ships", () => {
    expect(packed.map((p) => p.name).sort()).toEqual(PUBLIC.map((p) => p.name).sort());
    for (const p of packed) {
      const all = { ...p.manifest.dependencies, ...p.manifest.peerDependencies, ...p.manifest.optionalDependencies };
      for (const [name, range] of Object.entries(all)) expect(range, `${p.dir}: ${name}`).not.toMatch(/^workspace:/);
      expect(p.manifest.license, p.dir).toBe("Apache-2.0");
      expect(p.manifest.engines?.node, p.dir).toBe(rootManifest.engines.node);
      expect(p.files, p.dir).toEqual(expect.arrayContaining(["LICENSE", "README.md", "package.json", "dist/index.js"]));
      expect(p.files, p.dir).toContain("dist/index.d.ts");
      // Source maps point at src/, which is not shipped; test files and build info never ship.
      const stray = p.files.filter(
        (f) => f.endsWith(".map") || f.endsWith(".tsbuildinfo") || f.startsWith("src/") || /(^|\/)test\//.test(f),
      );
      expect(stray, p.dir).toEqual([]);
    }
  });

  it("every public entry point (and @asp/sdk/testing) type-checks and loads from the installed tarballs", async () => {
    const { stdout } = await sh(process.execPath, [join(project, "dist/all.js")], project);
    const exported = JSON.parse(stdout) as Record<string, number>;
    expect(Object.keys(exported).sort()).toEqual([...PUBLIC.map((p) => p.name), "@asp/sdk/testing"].sort());
    for (const [name, count] of Object.entries(exported)) expect(count, name).toBeGreaterThan(0);
  }, 60_000);

  it("a strict NodeNext consumer composes a host from the tarballs: allow, then deny on a TODO", async () => {
    const store = join(work, "store");
    const gate = async (): Promise<{ decision: string; findings: string[]; degraded: unknown[] }> => {
      const { stdout } = await sh(process.execPath, [join(project, "dist/main.js"), repo, store], project);
      return JSON.parse(stdout);
    };
    writeFileSync(join(repo, "b.ts"), "export const b = 2;\n");
    log("gate on a clean change");
    expect(await gate()).toMatchObject({ decision: "allow", findings: [], degraded: [] });
    writeFileSync(join(repo, "c.ts"), "// TODO: remove before merging\n");
    log("gate on a change adding a TODO");
    expect(await gate()).toMatchObject({ decision: "deny", findings: ["todo/marker"], degraded: [] });
  }, 120_000);

  it("npx asp --help runs the installed CLI", async () => {
    const { stdout } = await sh("npx", ["--no-install", "asp", "--help"], project);
    expect(stdout).toMatch(/Usage: asp/);
    expect(stdout).toMatch(/\bgate\b/);
  }, 60_000);
});
