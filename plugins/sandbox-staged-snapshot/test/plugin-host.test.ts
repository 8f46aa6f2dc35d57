// Through the host's plugin machinery: the plugin packed and signed, verified and granted by
// loadPlugins, registered by registerPlugins, its answers validated by plugin-host.
import "reflect-metadata";
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { Policy } from "@asp/contracts";
import { loadPlugins, readTrustRoots, registerPlugins, TOKENS, writeKeyPair } from "@asp/plugin-host";
import { packPlugin } from "@asp/plugin-pack";
import { container } from "tsyringe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crashPlan } from "./fixtures/plan.js";
import { expectedTree, makeRepo, removeScratch, tempDir, treeId } from "./helpers.js";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
let packed: { dir: string; digest: string; id: string };
let pub: string;

afterAll(removeScratch, 30_000);

beforeAll(async () => {
  // A package folder whose entry is this plugin's source entry: packPlugin bundles and signs it
  // exactly as `pnpm build` does for dist/plugin, without depending on a prior build.
  const at = tempDir("asp-staged-pack-");
  copyFileSync(join(pkg, "asp-plugin.json"), join(at, "asp-plugin.json"));
  writeFileSync(
    join(at, "package.json"),
    JSON.stringify({ aspPlugin: { entry: relative(at, join(pkg, "src", "main.ts")) } }),
  );
  const key = join(tempDir("asp-staged-key-"), "team");
  writeKeyPair(key);
  pub = `${key}.pub`;
  packed = await packPlugin(at, key);
}, 60_000);

function policy(capabilities: Array<"sandbox:staged_snapshot" | "sandbox:content_api">): Policy {
  return {
    apiVersion: "asp.policy/v1",
    requirements: [],
    providers: [],
    grants: [],
    plugins: [{ id: packed.id, digest: packed.digest, capabilities }],
  };
}

function load(capabilities: Array<"sandbox:staged_snapshot" | "sandbox:content_api">) {
  return loadPlugins({
    dirs: [packed.dir],
    trustRoots: readTrustRoots([pub]),
    policy: policy(capabilities),
    kinds: ["sandbox"],
  });
}

const ports = { clock: { now: () => new Date(0) }, content: { read: async () => null } };

describe("sandbox-staged-snapshot through plugin-host (issue 13 item 6)", () => {
  it("H6.7 host §6: loaded signed and granted sandbox:staged_snapshot, its stage() answer validates as staged_snapshot and publishes B'", async () => {
    const result = await load(["sandbox:staged_snapshot"]);
    expect(result.refused).toEqual([]);
    expect(result.sandboxes.map((s) => s.plugin.id)).toEqual(["asp.sandbox-staged-snapshot"]);
    const child = container.createChildContainer();
    registerPlugins(child, result, ports);
    const [sandbox] = child.resolveAll(TOKENS.Sandbox);
    const root = makeRepo();
    const journalDir = join(tempDir("asp-staged-journal-"), "journal");
    mkdirSync(journalDir);
    const B2 = await expectedTree(root, crashPlan());
    expect(await sandbox?.recover?.({ root, journalDir })).toEqual({ outcome: "none" });
    expect(await sandbox?.stage?.({ root, journalDir, writes: crashPlan() })).toEqual({
      applied: true,
      guarantee: "staged_snapshot",
    });
    expect(await treeId(root)).toBe(B2);
  });

  it("is refused ASP_PLUGIN_CAPABILITY_NOT_GRANTED when the policy does not grant sandbox:staged_snapshot", async () => {
    const result = await load(["sandbox:content_api"]);
    expect(result.sandboxes).toEqual([]);
    expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_CAPABILITY_NOT_GRANTED"]);
  });
});
