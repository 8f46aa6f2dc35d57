import { spawnSync } from "node:child_process";
import {
  appendFileSync,
  chmodSync,
  cpSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Policy } from "@asp/contracts";
import { readTrustRoots, signPlugin, verifyPlugin, writeKeyPair } from "@asp/plugin-host";
import { composeHost, loadPolicy } from "@asp/ths";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { REPO_ROOT, runInProcess } from "./helpers.js";

const TEMPLATE = join(REPO_ROOT, "plugins/provider-example/plugin");

/** A trusted policy that defines the requirement `todo` (the template's source) at gate and sweep. */
const POLICY: Policy = {
  apiVersion: "asp.policy/v1",
  requirements: [{ id: "todo", capability: "check", sources: ["todo"], callSites: ["gate", "sweep"] }],
  providers: [],
  grants: [],
};

function workspace(policy: Policy = POLICY): { dir: string; plugin: string; policyFile: string } {
  const dir = mkdtempSync(join(tmpdir(), "asp-cli-pin-"));
  const plugin = join(dir, "provider-todo");
  cpSync(TEMPLATE, plugin, { recursive: true });
  const policyFile = join(dir, "trusted", "asp.policy.json");
  mkdirSync(join(dir, "trusted"));
  writeFileSync(policyFile, `${JSON.stringify(policy, null, 2)}\n`);
  return { dir, plugin, policyFile };
}

async function json(argv: string[], cwd: string): Promise<{ code: number; body: Record<string, unknown> }> {
  const r = await runInProcess(["--json", ...argv], { cwd });
  return { code: r.code, body: JSON.parse(r.stdout) as Record<string, unknown> };
}

const errorCode = (body: Record<string, unknown>): unknown => (body.error as { code?: unknown } | undefined)?.code;

describe("asp plugin digest (issue 18 item 4)", () => {
  it("prints the provider pin, a grant skeleton for the named requirement and the plugins[] entry, all at the tree digest", async () => {
    const { dir, plugin } = workspace();
    const key = join(dir, "team");
    writeKeyPair(key);
    const signed = signPlugin(plugin, key);
    const r = await json(["plugin", "digest", plugin, "--requirement", "todo", "--call-sites", "gate,sweep"], dir);
    expect(r.code).toBe(EXIT.ok);
    expect(r.body).toMatchObject({ id: "provider-example", version: "1.0.0", digest: signed.digest, digestOf: "tree" });
    expect(r.body.policy).toEqual({
      providers: [{ id: "provider-example", version: "1.0.0", digest: signed.digest }],
      grants: [
        {
          provider: "provider-example",
          version: "1.0.0",
          digest: signed.digest,
          requirement: "todo",
          callSites: ["gate", "sweep"],
        },
      ],
      plugins: [{ id: "provider-example", digest: signed.digest, capabilities: ["check"] }],
    });
    // The human form says what the digest is and prints the same three entries.
    const human = await runInProcess(["plugin", "digest", plugin, "--requirement", "todo"], { cwd: dir });
    expect(human.stdout).toContain("tree digest");
    for (const heading of ["provider pin", "grant skeleton", "plugin grant"]) expect(human.stdout).toContain(heading);
  });

  it("defaults the skeleton's call-sites to gate, and refuses an unknown call-site (ASP_CLI_USAGE)", async () => {
    const { dir, plugin } = workspace();
    const r = await json(["plugin", "digest", plugin, "--requirement", "todo"], dir);
    expect((r.body.policy as { grants: Array<{ callSites: string[] }> }).grants[0]?.callSites).toEqual(["gate"]);
    const bad = await json(["plugin", "digest", plugin, "--call-sites", "gate,merge"], dir);
    expect(bad.code).toBe(EXIT.usage);
    expect(errorCode(bad.body)).toBe("ASP_CLI_USAGE");
  });
});

describe("asp plugin pin (issue 18 item 4)", () => {
  it("host §1: writes the pin, grant and plugins[] entry; the host loads the policy and admits the signed plugin", async () => {
    const { dir, plugin, policyFile } = workspace();
    const key = join(dir, "team");
    writeKeyPair(key);
    signPlugin(plugin, key);
    const r = await json(
      ["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "todo", "--call-sites", "gate,sweep"],
      dir,
    );
    expect(r.code).toBe(EXIT.ok);
    expect(r.body).toMatchObject({ changed: true, written: true, dryRun: false });
    // Exactly as the host loads it: the same digest the command reported, and the plugin is granted.
    const loaded = loadPolicy(policyFile);
    expect(loaded.digest).toBe(r.body.policyDigest);
    expect(loaded.document.grants).toEqual([
      expect.objectContaining({ requirement: "todo", callSites: ["gate", "sweep"] }),
    ]);
    const verified = verifyPlugin(plugin, { trustRoots: readTrustRoots([`${key}.pub`]), policy: loaded });
    expect(verified.evidence.authorityGrant).toBe("verified");
    // Pinning again changes nothing.
    const again = await json(
      ["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "todo", "--call-sites", "gate,sweep"],
      dir,
    );
    expect(again.body).toMatchObject({ changed: false, written: false });
  });

  it("replaces this plugin's entries when its digest changes, keeping one of each and the rest of the policy", async () => {
    const other = {
      id: "other",
      version: "2.0.0",
      digest: `sha256:${"a".repeat(64)}` as const,
    };
    const { dir, plugin, policyFile } = workspace({
      ...POLICY,
      providers: [other],
      grants: [{ provider: "other", version: "2.0.0", digest: other.digest, requirement: "todo", callSites: ["gate"] }],
    });
    await json(["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "todo"], dir);
    appendFileSync(join(plugin, "main.mjs"), "// changed\n");
    const r = await json(["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "todo"], dir);
    expect(r.body.changed).toBe(true);
    const doc = loadPolicy(policyFile).document;
    expect(doc.providers.map((p) => p.id)).toEqual(["other", "provider-example"]);
    expect(doc.providers[1]?.digest).toBe(r.body.digest);
    expect(doc.grants.map((g) => [g.provider, g.digest])).toEqual([
      ["other", other.digest],
      ["provider-example", r.body.digest],
    ]);
    expect(doc.plugins).toEqual([{ id: "provider-example", digest: r.body.digest, capabilities: ["check"] }]);
  });

  it("refuses a requirement the policy does not define (ASP_PLUGIN_UNKNOWN_REQUIREMENT), naming it and how to add it, writing nothing", async () => {
    const { dir, plugin, policyFile } = workspace();
    const before = readFileSync(policyFile);
    const r = await json(["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "lint"], dir);
    expect(r.code).toBe(EXIT.usage);
    expect(errorCode(r.body)).toBe("ASP_PLUGIN_UNKNOWN_REQUIREMENT");
    expect(r.body.error).toMatchObject({
      data: { requirement: "lint", example: { id: "lint", capability: "check", sources: ["todo"] } },
    });
    expect((r.body.error as { message: string }).message).toContain("requirements[]");
    expect(readFileSync(policyFile)).toEqual(before);
  });

  it("validates the result as the host does before writing: a grant at a call-site the requirement is not required at is refused (ASP_POLICY_UNKNOWN_REQUIREMENT)", async () => {
    const { dir, plugin, policyFile } = workspace();
    const before = readFileSync(policyFile);
    const r = await json(
      ["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "todo", "--call-sites", "interactive"],
      dir,
    );
    expect(r.code).toBe(EXIT.usage);
    expect(errorCode(r.body)).toBe("ASP_POLICY_UNKNOWN_REQUIREMENT");
    expect(readFileSync(policyFile)).toEqual(before);
  });

  it("refuses a policy file the host would refuse (a key twice: ASP_POLICY_DUPLICATE_KEY) and leaves it alone", async () => {
    const { dir, plugin, policyFile } = workspace();
    const text = `{ "apiVersion": "asp.policy/v1", "requirements": [], "providers": [], "grants": [], "grants": [] }\n`;
    writeFileSync(policyFile, text);
    const r = await json(["plugin", "pin", plugin, "--policy", policyFile], dir);
    expect(errorCode(r.body)).toBe("ASP_POLICY_DUPLICATE_KEY");
    expect(readFileSync(policyFile, "utf8")).toBe(text);
  });

  it("refuses a policy file that does not exist as bad input (exit 64): pin edits a policy, it does not create one", async () => {
    const { dir, plugin } = workspace();
    const r = await json(["plugin", "pin", plugin, "--policy", "missing.json", "--requirement", "todo"], dir);
    expect(r.code).toBe(EXIT.usage);
    expect(errorCode(r.body)).toBe("ASP_PLUGIN_IO");
    expect(readdirSync(dir)).not.toContain("missing.json");
  });

  it("--dry-run prints the resulting policy and writes nothing", async () => {
    const { dir, plugin, policyFile } = workspace();
    const before = readFileSync(policyFile);
    const r = await json(["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "todo", "--dry-run"], dir);
    expect(r.body).toMatchObject({ changed: true, written: false, dryRun: true });
    expect((r.body.policy as Policy).grants).toHaveLength(1);
    expect(readFileSync(policyFile)).toEqual(before);
    const human = await runInProcess(
      ["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "todo", "--dry-run"],
      {
        cwd: dir,
      },
    );
    expect(human.stdout).toContain('"requirement": "todo"');
  });

  it("replaces the file atomically: no temporary file is left and the file's mode is kept", async () => {
    const { dir, plugin, policyFile } = workspace();
    chmodSync(policyFile, 0o640);
    const r = await json(["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "todo"], dir);
    expect(r.body).toMatchObject({ written: true });
    expect(loadPolicy(policyFile).document.grants).toHaveLength(1);
    expect(readdirSync(join(dir, "trusted"))).toEqual(["asp.policy.json"]);
    expect(statSync(policyFile).mode & 0o777).toBe(0o640);
  });

  it("follows a symbolic link to the policy: the target is replaced and the link stays a link", async () => {
    const { dir, plugin, policyFile } = workspace();
    const link = join(dir, "policy-link.json");
    symlinkSync(policyFile, link);
    const r = await json(["plugin", "pin", plugin, "--policy", link, "--requirement", "todo"], dir);
    expect(r.body).toMatchObject({ written: true });
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(loadPolicy(policyFile).document.grants).toHaveLength(1);
    expect(readdirSync(join(dir, "trusted"))).toEqual(["asp.policy.json"]);
  });

  it("refuses a requirement for a verifier (ASP_PLUGIN_NOT_A_PROVIDER), and pins its plugins[] entry alone", async () => {
    const { dir, policyFile } = workspace();
    const verifier = join(dir, "verifier");
    cpSync(TEMPLATE, verifier, { recursive: true });
    // The template's manifest, turned into a verifier's.
    const template = JSON.parse(readFileSync(join(TEMPLATE, "asp-plugin.json"), "utf8")) as Record<string, unknown>;
    const asVerifier = {
      ...template,
      id: "verifier-x",
      kind: "verifier",
      capabilities: ["review"],
      diagnosticSources: [],
    };
    writeFileSync(join(verifier, "asp-plugin.json"), JSON.stringify(asVerifier));
    const refused = await json(["plugin", "pin", verifier, "--policy", policyFile, "--requirement", "todo"], dir);
    expect(errorCode(refused.body)).toBe("ASP_PLUGIN_NOT_A_PROVIDER");
    const ok = await json(["plugin", "pin", verifier, "--policy", policyFile], dir);
    expect(ok.code).toBe(EXIT.ok);
    const doc = loadPolicy(policyFile).document;
    expect(doc.providers).toEqual([]);
    expect(doc.plugins?.map((p) => p.id)).toEqual(["verifier-x"]);
  });
});

describe("a packed template pinned with asp plugin pin reaches a gate decision (issue 18 items 3-4)", () => {
  it("host §1: with only the plugins[] entry the gate is indeterminate; after pin --requirement it decides", async () => {
    // The template as an author copies it, its @asp/sdk linked as pnpm links it, then packed.
    const root = mkdtempSync(join(tmpdir(), "asp-cli-pin-gate-"));
    const pkg = join(root, "provider-todo");
    cpSync(join(REPO_ROOT, "plugins/provider-example/package.json"), join(pkg, "package.json"));
    cpSync(TEMPLATE, join(pkg, "plugin"), { recursive: true });
    mkdirSync(join(pkg, "node_modules", "@asp"), { recursive: true });
    for (const name of ["sdk", "contracts"]) {
      symlinkSync(join(REPO_ROOT, "packages", name), join(pkg, "node_modules", "@asp", name));
    }
    const key = join(root, "team");
    writeKeyPair(key);
    const packer = join(REPO_ROOT, "tools/plugin-pack/dist/cli.js");
    const packed = spawnSync(process.execPath, [packer, pkg, "--key", key, "--json"], { encoding: "utf8" });
    expect(packed.status, packed.stderr).toBe(0);
    const plugin = (JSON.parse(packed.stdout) as { plugins: Array<{ dir: string }> }).plugins[0]?.dir ?? "";

    const policyFile = join(root, "asp.policy.json");
    const digest = await json(["plugin", "digest", plugin], root);
    writeFileSync(policyFile, JSON.stringify({ ...POLICY, plugins: [digest.body.grant] }));
    const repo = mkdtempSync(join(tmpdir(), "asp-cli-pin-repo-"));
    writeFileSync(join(repo, "a.ts"), "export const a = 1; // TODO\n");
    const gate = async (): Promise<string> => {
      const host = await composeHost({
        store: "memory:",
        policy: policyFile,
        trustRoots: [`${key}.pub`],
        plugins: [plugin],
        failOpenSink: { log() {} },
      });
      try {
        return (await host.gate({ repo })).envelope.decision;
      } finally {
        await host.close();
      }
    };
    // What following the old docs gave: the plugin loads, but nothing has gate authority.
    expect(await gate()).toBe("indeterminate");
    const pinned = await json(["plugin", "pin", plugin, "--policy", policyFile, "--requirement", "todo"], root);
    expect(pinned.code).toBe(EXIT.ok);
    // The template reports a warning: with authority, the gate decides (allow), no longer indeterminate.
    expect(await gate()).toBe("allow");
  });
});
