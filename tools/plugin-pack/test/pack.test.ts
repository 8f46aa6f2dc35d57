import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Policy, validate } from "@asp/contracts";
import { readTrustRoots, verifyPlugin, writeKeyPair } from "@asp/plugin-host";
import { describe, expect, it } from "vitest";
import { PACKED_DIR, packPlugin, pinPlugins, pinPolicy } from "../src/index.js";

/** A CommonJS dependency that reads __dirname and requires a builtin, like TypeScript locating its lib files. */
const FAKE_DEP = "exports.where = () => require('node:path').basename(__dirname);\n";

function fixturePackage(options: { dep?: string; absent?: string[]; extra?: Record<string, unknown> } = {}): {
  dir: string;
  key: string;
  pub: string;
} {
  const dir = mkdtempSync(join(tmpdir(), "asp-pack-"));
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({
      name: "fake-provider",
      type: "module",
      aspPlugin: {
        entry: "built/main.js",
        assets: [{ package: "fake-assets", dir: "lib", match: "^lib\\..*\\.d\\.ts$" }],
        ...(options.absent === undefined ? {} : { absent: options.absent }),
        ...options.extra,
      },
    }),
  );
  writeFileSync(
    join(dir, "asp-plugin.json"),
    JSON.stringify({
      id: "fake-provider",
      version: "1.2.3",
      kind: "provider",
      entry: "main.mjs",
      capabilities: ["check"],
      diagnosticSources: ["ts"],
      protocolVersion: "1.0",
      engines: { node: ">=20.19.0" },
    }),
  );
  mkdirSync(join(dir, "built"));
  mkdirSync(join(dir, "node_modules", "fake-dep"), { recursive: true });
  writeFileSync(
    join(dir, "node_modules", "fake-dep", "package.json"),
    JSON.stringify({ name: "fake-dep", main: "index.js" }),
  );
  writeFileSync(join(dir, "node_modules", "fake-dep", "index.js"), options.dep ?? FAKE_DEP);
  writeFileSync(
    join(dir, "built", "main.js"),
    'import { where } from "fake-dep";\nprocess.stdout.write("running from " + where());\n',
  );
  mkdirSync(join(dir, "node_modules", "fake-assets", "lib"), { recursive: true });
  writeFileSync(join(dir, "node_modules", "fake-assets", "package.json"), JSON.stringify({ name: "fake-assets" }));
  writeFileSync(join(dir, "node_modules", "fake-assets", "lib", "lib.es2022.d.ts"), "declare var x: number;\n");
  writeFileSync(join(dir, "node_modules", "fake-assets", "lib", "other.txt"), "not copied\n");
  const key = join(mkdtempSync(join(tmpdir(), "asp-pack-key-")), "k");
  writeKeyPair(key);
  return { dir, key, pub: `${key}.pub` };
}

describe("packPlugin", () => {
  it("bundles the entry and its dependencies into one self-contained, signed folder", async () => {
    const { dir, key, pub } = fixturePackage();
    const packed = await packPlugin(dir, key);
    expect(packed.dir).toBe(join(dir, PACKED_DIR));
    expect(readdirSync(packed.dir).sort()).toEqual([
      "asp-plugin.json",
      "asp-plugin.sig",
      "lib.es2022.d.ts",
      "main.mjs",
    ]);
    // Runs with no node_modules around it: everything it needs is inside the signed folder.
    const run = spawnSync(process.execPath, [join(packed.dir, "main.mjs")], { encoding: "utf8", cwd: tmpdir() });
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe(`running from ${PACKED_DIR.split("/").at(-1)}`);
    const verified = verifyPlugin(packed.dir, { trustRoots: readTrustRoots([pub]) });
    expect(verified.evidence.digest).toBe(packed.digest);
  });

  it("bundles each aspPlugin.modules package into its own file, with assets in the folder `to` names (issue 26: more compilers)", async () => {
    const { dir, key, pub } = fixturePackage({
      extra: {
        modules: [{ package: "fake-dep", out: "mods/dep/dep.mjs" }],
        assets: [
          { package: "fake-assets", dir: "lib", match: "^lib\\..*\\.d\\.ts$" },
          { package: "fake-assets", dir: "lib", match: "^lib\\..*\\.d\\.ts$", to: "mods/dep" },
        ],
      },
    });
    const packed = await packPlugin(dir, key);
    expect(readdirSync(join(packed.dir, "mods", "dep")).sort()).toEqual(["dep.mjs", "lib.es2022.d.ts"]);
    // The module runs from inside the signed folder: its __dirname is its own folder there.
    const run = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import m from ${JSON.stringify(join(packed.dir, "mods/dep/dep.mjs"))}; process.stdout.write(m.where());`,
      ],
      { encoding: "utf8", cwd: tmpdir() },
    );
    expect(run.stdout).toBe("dep");
    // The digest covers it: change one byte and verification fails.
    expect(verifyPlugin(packed.dir, { trustRoots: readTrustRoots([pub]) }).evidence.digest).toBe(packed.digest);
    writeFileSync(join(packed.dir, "mods/dep/dep.mjs"), "export default { where: () => 'swapped' };\n");
    expect(() => verifyPlugin(packed.dir, { trustRoots: readTrustRoots([pub]) })).toThrow();
  });

  it.each([
    [{ modules: [{ package: "fake-dep", out: "../outside.mjs" }] }, "aspPlugin.modules"],
    [{ modules: [{ package: "fake-dep", out: "dep.js" }] }, "aspPlugin.modules"],
    [{ assets: [{ package: "fake-assets", dir: "lib", match: ".", to: "/abs" }] }, "aspPlugin.assets"],
  ])("refuses a module or asset folder outside the plugin (ASP_PACK_BAD_PACKAGE): %j", async (extra, field) => {
    const { dir, key } = fixturePackage({ extra });
    const refused = packPlugin(dir, key);
    await expect(refused).rejects.toThrowWithCode("ASP_PACK_BAD_PACKAGE");
    await expect(refused).rejects.toMatchObject({ data: { field } });
  });

  describe("when the bundle would load code from outside the signed folder (issue 12 item 2)", () => {
    it("refuses an import it cannot bundle (ASP_PACK_EXTERNAL_IMPORT), naming it", async () => {
      // esbuild leaves an unresolvable require inside a try to the runtime: outside the digest.
      const dep = `try { exports.extra = require("optional-missing"); } catch {}\n${FAKE_DEP}`;
      const { dir, key } = fixturePackage({ dep });
      const refused = packPlugin(dir, key);
      await expect(refused).rejects.toThrowWithCode("ASP_PACK_EXTERNAL_IMPORT");
      await expect(refused).rejects.toMatchObject({ data: { import: "optional-missing", kind: "require-call" } });
      // Declared absent, it is bundled as a module that throws, and the try takes it.
      const declared = fixturePackage({ dep, absent: ["optional-missing"] });
      const packed = await packPlugin(declared.dir, declared.key);
      const run = spawnSync(process.execPath, [join(packed.dir, "main.mjs")], { encoding: "utf8", cwd: tmpdir() });
      expect(run.stdout).toBe(`running from ${PACKED_DIR.split("/").at(-1)}`);
    });

    it("host §1: a leftover runtime require cannot reach a parent node_modules (no createRequire resolver)", async () => {
      const dep = `const name = ["ev", "il"].join("");\ntry { require(name); } catch { process.stdout.write("refused "); }\n${FAKE_DEP}`;
      const { dir, key } = fixturePackage({ dep });
      // Beside the packed folder's parents, where Node's resolution would look.
      mkdirSync(join(dir, "node_modules", "evil"), { recursive: true });
      writeFileSync(join(dir, "node_modules", "evil", "index.js"), 'process.stdout.write("EVIL ");\n');
      const packed = await packPlugin(dir, key);
      expect(readFileSync(join(packed.dir, "main.mjs"), "utf8")).not.toContain("createRequire");
      const run = spawnSync(process.execPath, [join(packed.dir, "main.mjs")], { encoding: "utf8", cwd: dir });
      expect(run.stdout).toBe(`refused running from ${PACKED_DIR.split("/").at(-1)}`);
    });
  });

  it("is deterministic: packing twice gives the same digest", async () => {
    const { dir, key } = fixturePackage();
    const first = await packPlugin(dir, key);
    const second = await packPlugin(dir, key);
    expect(second.digest).toBe(first.digest);
  });

  it("refuses a package without a valid manifest (ASP_PACK_BAD_MANIFEST), or without its built entry (ASP_PACK_NO_ENTRY)", async () => {
    const { dir, key } = fixturePackage();
    writeFileSync(join(dir, "asp-plugin.json"), JSON.stringify({ id: "x" }));
    await expect(packPlugin(dir, key)).rejects.toThrowWithCode("ASP_PACK_BAD_MANIFEST");
    const other = fixturePackage();
    writeFileSync(join(other.dir, "package.json"), JSON.stringify({ aspPlugin: { entry: "missing.js" } }));
    await expect(packPlugin(other.dir, other.key)).rejects.toThrowWithCode("ASP_PACK_NO_ENTRY");
  });
});

const BASE: Policy = {
  apiVersion: "asp.policy/v1",
  requirements: [
    { id: "types", capability: "check", sources: ["ts"], callSites: ["interactive", "gate"] },
    { id: "secrets", capability: "check", sources: ["secrets"], callSites: ["gate"] },
  ],
  providers: [],
  grants: [],
};

describe("pinPolicy", () => {
  it("pins the plugin, the provider, and grants only the requirements whose capability and sources it declares", async () => {
    const { dir, key } = fixturePackage();
    const packed = await packPlugin(dir, key);
    const policy = pinPolicy(BASE, [packed]);
    expect(policy.plugins).toEqual([{ id: "fake-provider", digest: packed.digest, capabilities: ["check"] }]);
    expect(policy.providers).toEqual([{ id: "fake-provider", version: "1.2.3", digest: packed.digest }]);
    expect(policy.grants).toEqual([
      {
        provider: "fake-provider",
        version: "1.2.3",
        digest: packed.digest,
        requirement: "types",
        callSites: ["interactive", "gate"],
      },
    ]);
    expect(validate("policy", policy).ok).toBe(true);
    // Idempotent: pinning again changes nothing.
    expect(pinPolicy(policy, [packed])).toEqual(policy);
  });

  it("pinPlugins --check reports a stale policy without writing it", async () => {
    const { dir, key } = fixturePackage();
    const packed = await packPlugin(dir, key);
    const file = join(mkdtempSync(join(tmpdir(), "asp-pin-")), "asp.policy.json");
    writeFileSync(file, `${JSON.stringify(BASE, null, 2)}\n`);
    expect(pinPlugins(file, [packed], { check: true }).changed).toBe(true);
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual(BASE);
    expect(pinPlugins(file, [packed]).changed).toBe(true);
    expect(pinPlugins(file, [packed], { check: true }).changed).toBe(false);
  });

  it("refuses a file that is not a valid policy", async () => {
    const { dir, key } = fixturePackage();
    const packed = await packPlugin(dir, key);
    const file = join(mkdtempSync(join(tmpdir(), "asp-pin-")), "bad.json");
    writeFileSync(file, JSON.stringify({ apiVersion: "nope" }));
    expect(() => pinPlugins(file, [packed])).toThrowWithCode("ASP_PACK_BAD_POLICY");
  });
});

describe("the CLI", () => {
  const bin = fileURLToPath(new URL("../dist/cli.js", import.meta.url));
  it("exits 64 without a key and prints the packed digest as JSON", () => {
    const { dir, key } = fixturePackage();
    expect(spawnSync(process.execPath, [bin, dir], { encoding: "utf8", env: { PATH: process.env.PATH } }).status).toBe(
      64,
    );
    const ok = spawnSync(process.execPath, [bin, dir, "--key", key, "--json"], { encoding: "utf8" });
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout).plugins[0]).toMatchObject({ id: "fake-provider", version: "1.2.3" });
  });
});
