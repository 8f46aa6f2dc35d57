import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeKeyPair } from "@asp/plugin-host";
import { describe, expect, it } from "vitest";
import { PACK_ERROR_CODES, type PackErrorCode } from "../src/errors.js";
import { PACKED_DIR, packPlugin, pinPlugins } from "../src/index.js";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const TEMPLATE = join(ROOT, "plugins/provider-example");
const bin = fileURLToPath(new URL("../dist/cli.js", import.meta.url));

function makeKey(): string {
  const key = join(mkdtempSync(join(tmpdir(), "asp-pack-key-")), "k");
  writeKeyPair(key);
  return key;
}

/**
 * A copy of the provider template (package.json + plugin/) at `depth` folders below a fresh temp
 * folder, its `@asp/sdk` and `@asp/contracts` linked to this workspace's packages (as pnpm links
 * them): the bundle's inputs sit at a different relative path from each copy.
 */
function templateCopy(depth: number): string {
  const dir = join(mkdtempSync(join(tmpdir(), "asp-repro-")), ...Array.from({ length: depth }, (_, i) => `d${i}`), "p");
  mkdirSync(join(dir, "node_modules", "@asp"), { recursive: true });
  cpSync(join(TEMPLATE, "package.json"), join(dir, "package.json"));
  cpSync(join(TEMPLATE, "plugin"), join(dir, "plugin"), { recursive: true });
  for (const pkg of ["sdk", "contracts"]) {
    symlinkSync(join(ROOT, "packages", pkg), join(dir, "node_modules", "@asp", pkg));
  }
  return dir;
}

describe("reproducible packing (issue 18 item 3)", () => {
  it("host §1: the same sources packed from two folders at different depths give byte-identical files and one digest", async () => {
    const key = makeKey();
    const [near, far] = [templateCopy(0), templateCopy(5)];
    const a = await packPlugin(near, key);
    const b = await packPlugin(far, key);
    expect(b.digest).toBe(a.digest);
    const files = readdirSync(a.dir).sort();
    expect(readdirSync(b.dir).sort()).toEqual(files);
    for (const f of files) expect(readFileSync(join(b.dir, f)), f).toEqual(readFileSync(join(a.dir, f)));
    // No build path of any kind is left: not the copy's, not the workspace's, not pnpm's layout.
    const bundle = readFileSync(join(a.dir, "main.mjs"), "utf8");
    for (const path of [near, far, ROOT, "node_modules/", "../"]) expect(bundle).not.toContain(path);
    // Inputs are named by package and version instead.
    expect(bundle).toMatch(/\/\/ @asp\/sdk@[0-9.]+\/dist\//);
  });
});

describe("the template layout (issue 18 item 3)", () => {
  it("packs plugins/provider-example as it is: manifest and entry under plugin/", async () => {
    const dir = templateCopy(0);
    const packed = await packPlugin(dir, makeKey());
    expect(packed.dir).toBe(join(dir, PACKED_DIR));
    expect(packed).toMatchObject({ id: "provider-example", version: "1.0.0" });
    expect(readdirSync(packed.dir).sort()).toEqual(["asp-plugin.json", "asp-plugin.sig", "main.mjs"]);
    // Self-contained: it imports nothing but node: builtins, so it starts outside any node_modules.
    const bundle = readFileSync(join(packed.dir, "main.mjs"), "utf8");
    expect(bundle).not.toMatch(/from\s+"@asp\//);
  });
});

/** A minimal root-layout package, for the error table. */
function plainPackage(options: { entry?: string; main?: string; manifest?: unknown } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "asp-pack-err-"));
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "p", type: "module", aspPlugin: { entry: options.entry ?? "main.js" } }),
  );
  const manifest = options.manifest ?? {
    id: "p",
    version: "1.0.0",
    kind: "provider",
    entry: "main.mjs",
    capabilities: ["check"],
    diagnosticSources: ["p"],
    protocolVersion: "1.0",
    engines: { node: ">=20" },
  };
  writeFileSync(join(dir, "asp-plugin.json"), typeof manifest === "string" ? manifest : JSON.stringify(manifest));
  writeFileSync(join(dir, "main.js"), options.main ?? "export const x = 1;\n");
  return dir;
}

type Case = () => Promise<unknown>;

/** How to provoke each error: every code the packer raises, through the API. */
const CASES: Record<Exclude<PackErrorCode, "ASP_PACK_USAGE">, Case> = {
  ASP_PACK_BAD_PACKAGE: async () => packPlugin(mkdtempSync(join(tmpdir(), "asp-pack-empty-")), makeKey()),
  ASP_PACK_NO_MANIFEST: async () => {
    const dir = mkdtempSync(join(tmpdir(), "asp-pack-nomanifest-"));
    writeFileSync(join(dir, "package.json"), "{}");
    return packPlugin(dir, makeKey());
  },
  ASP_PACK_BAD_MANIFEST: async () => packPlugin(plainPackage({ manifest: "{ not json" }), makeKey()),
  ASP_PACK_NO_ENTRY: async () => packPlugin(plainPackage({ entry: "dist/main.js" }), makeKey()),
  ASP_PACK_BUNDLE_FAILED: async () => packPlugin(plainPackage({ main: 'import "no-such-module";\n' }), makeKey()),
  ASP_PACK_EXTERNAL_IMPORT: async () =>
    packPlugin(plainPackage({ main: 'try { require("optional-missing"); } catch {}\n' }), makeKey()),
  ASP_PACK_UNSTABLE_PATH: async () => {
    // A file outside the package that no named package owns: it has no location-free name.
    const outside = mkdtempSync(join(tmpdir(), "asp-pack-outside-"));
    writeFileSync(join(outside, "x.js"), "export const y = 2;\n");
    return packPlugin(
      plainPackage({ main: `export { y } from ${JSON.stringify(join(outside, "x.js"))};\n` }),
      makeKey(),
    );
  },
  ASP_PACK_NO_ASSET: async () => {
    const dir = plainPackage();
    writeFileSync(
      join(dir, "package.json"),
      JSON.stringify({
        aspPlugin: { entry: "main.js", assets: [{ package: "not-installed", dir: "lib", match: "." }] },
      }),
    );
    return packPlugin(dir, makeKey());
  },
  ASP_PACK_BAD_KEY: async () => packPlugin(plainPackage(), join(tmpdir(), "no-such-key")),
  ASP_PACK_BAD_POLICY: async () => {
    const packed = await packPlugin(plainPackage(), makeKey());
    const file = join(mkdtempSync(join(tmpdir(), "asp-pack-policy-")), "p.json");
    writeFileSync(file, '{ "apiVersion": "asp.policy/v1", "apiVersion": "asp.policy/v1" }');
    return pinPlugins(file, [packed]);
  },
};

describe("every packer error says what to do next (issue 18 item 3)", () => {
  it("covers every code", () => {
    expect([...Object.keys(CASES), "ASP_PACK_USAGE"].sort()).toEqual([...PACK_ERROR_CODES].sort());
  });

  it.each(Object.entries(CASES))("%s names the next step", async (code, provoke) => {
    const error = await provoke().then(
      () => null,
      (e: unknown) => e as { code: string; message: string; data: { next?: string } },
    );
    expect(error?.code).toBe(code);
    const next = error?.data.next ?? "";
    expect(next.length).toBeGreaterThan(10);
    expect(error?.message.endsWith(`; next: ${next}`)).toBe(true);
  });
});

describe("the CLI", () => {
  const run = (args: string[], cwd = tmpdir()) =>
    spawnSync(process.execPath, [bin, ...args], { encoding: "utf8", cwd, env: { PATH: process.env.PATH } });

  it("prints usage on --help and -h, exit 0", () => {
    for (const flag of ["--help", "-h"]) {
      const r = run([flag]);
      expect(r.status).toBe(0);
      expect(r.stdout).toContain("usage:");
      expect(r.stdout).toContain("plugin/asp-plugin.json");
      expect(r.stderr).toBe("");
    }
  });

  it("ASP_PACK_USAGE: an unknown option or a missing key exits 64 with the code and the next step, no stack trace", () => {
    for (const args of [["--nope"], ["."], ["pin", "--key", "k"], [".", "--key", "k", "--check"]]) {
      const r = run(args);
      expect(r.status, args.join(" ")).toBe(64);
      expect(r.stderr).toMatch(/^asp-plugin-pack: ASP_PACK_USAGE: .*; next: \S/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
  });

  it("packs the template layout from its folder and reports another error's code with a next step", () => {
    const dir = templateCopy(1);
    const key = makeKey();
    const ok = run(["--key", key, "--json"], dir);
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout).plugins[0]).toMatchObject({ id: "provider-example", dir: join(dir, PACKED_DIR) });
    const bad = run([dirname(dir), "--key", key]);
    expect(bad.status).toBe(64);
    expect(bad.stderr).toMatch(/ASP_PACK_BAD_PACKAGE: .*; next: /);
  });
});
