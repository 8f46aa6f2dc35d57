import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Policy } from "@asp/contracts";
import { digestPlugin, signPlugin, writeKeyPair } from "@asp/plugin-host";
import { describe, expect, it } from "vitest";
import { FIXTURES, tempRepo, testHost, writeVerifierPlugin } from "./helpers.js";

/** A signed provider plugin whose entry runs the honest fixture (id fake-honest-ts, source ts). */
function signedPlugin(): { dir: string; parent: string; trustRoot: string; digest: string } {
  const parent = mkdtempSync(join(tmpdir(), "asp-ths-plugins-"));
  const dir = join(parent, "fake-honest-ts");
  mkdirSync(dir);
  writeFileSync(
    join(dir, "asp-plugin.json"),
    JSON.stringify({
      id: "fake-honest-ts",
      version: "1.0.0",
      kind: "provider",
      entry: "main.mjs",
      capabilities: ["check"],
      diagnosticSources: ["ts"],
      protocolVersion: "1.0",
      engines: { node: ">=20" },
    }),
  );
  writeFileSync(
    join(dir, "main.mjs"),
    `import ${JSON.stringify(pathToFileURL(join(FIXTURES, "fake-honest-ts.mjs")).href)};\n`,
  );
  const key = join(parent, "keys", "team");
  writeKeyPair(key);
  signPlugin(dir, key);
  return { dir, parent, trustRoot: `${key}.pub`, digest: digestPlugin(dir).digest };
}

function policy(digest: string, withPluginGrant = true): Policy {
  const sites = ["interactive", "gate", "sweep"] as const;
  return {
    apiVersion: "asp.policy/v1",
    requirements: [{ id: "types", capability: "check", sources: ["ts"], callSites: [...sites] }],
    providers: [{ id: "fake-honest-ts", version: "1.0.0", digest }],
    grants: [{ provider: "fake-honest-ts", version: "1.0.0", digest, requirement: "types", callSites: [...sites] }],
    plugins: withPluginGrant ? [{ id: "fake-honest-ts", digest, capabilities: ["check"] }] : [],
    budgets: { timeoutMs: { interactive: 3000, gate: 3000, sweep: 3000 } },
  };
}

describe("providers from signed plugins (@asp/plugin-host)", () => {
  it("a verified verifier in the plugins folder is never imported into the gate host (issue 12 item 4)", async () => {
    const p = signedPlugin();
    const dir = join(p.parent, "verifier-bystander");
    // Importing it is the observable: its top level marks the process.
    writeVerifierPlugin(dir, "verifier-bystander", `globalThis.__aspBystanderImported = true;\nexport default {};\n`);
    signPlugin(dir, join(p.parent, "keys", "team"));
    const granted = policy(p.digest);
    const withVerifier: Policy = {
      ...granted,
      plugins: [
        ...(granted.plugins ?? []),
        { id: "verifier-bystander", digest: digestPlugin(dir).digest, capabilities: ["review"] },
      ],
    };
    const { host } = await testHost({ policy: withVerifier, plugins: [p.parent], trustRoots: [p.trustRoot] });
    try {
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.decision).toBe("allow");
      expect((globalThis as { __aspBystanderImported?: boolean }).__aspBystanderImported).toBeUndefined();
    } finally {
      await host.close();
    }
  });

  it("H2a.9 loads a signed, policy-granted provider and it satisfies its requirement at the gate", async () => {
    const p = signedPlugin();
    const { host } = await testHost({ policy: policy(p.digest), plugins: [p.parent], trustRoots: [p.trustRoot] });
    try {
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.coverage.degraded).toEqual([]);
      expect(envelope.decision).toBe("allow");
      expect(envelope.authority[0]).toMatchObject({
        providerId: "fake-honest-ts",
        integrity: "verified",
        authorityGrant: "verified",
      });
    } finally {
      await host.close();
    }
  });

  it("H2a.8 a refused plugin never runs: its requirement is degraded and the gate is not allow", async () => {
    const p = signedPlugin();
    const { host } = await testHost({
      policy: policy(p.digest, false),
      plugins: [p.parent],
      trustRoots: [p.trustRoot],
    });
    try {
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.decision).not.toBe("allow");
      expect(envelope.coverage.degraded).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ requirement: "types", reason: "missing" }),
          // Keyed by its folder, never by the id it claims (issue 11 item 10).
          expect.objectContaining({ provider: `plugin:${realpathSync(p.dir)}`, reason: "unavailable" }),
        ]),
      );
    } finally {
      await host.close();
    }
  });
});
