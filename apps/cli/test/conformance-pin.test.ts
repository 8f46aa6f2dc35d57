import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { ProviderManifest } from "@asp/contracts";
import { afterAll, describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { REPO_ROOT, runInProcess } from "./helpers.js";

// issue 32 (clause audit, "the fifth authority axis is a constant"): the operator runs the
// conformance kit (`asp conformance --json --plugin DIR`), pins its result next to the provider in
// trusted policy, and `asp gate` reports `conformance: verified` for that provider only while the
// provider that runs measures as the digest the result was bound to. Real CLI, real provider.

const temps: string[] = [];
const temp = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
};
afterAll(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

const EXAMPLE = join(REPO_ROOT, "plugins/provider-example/plugin");

/**
 * A provider folder of its own that runs the example provider (so a test may rewrite it): its
 * manifest and a `main.mjs` that imports the example's, configured as a rooted provider.
 */
function providerCopy(): { root: string; manifest: (digest: string) => ProviderManifest } {
  const root = join(temp("asp-cli-conf-root-"), "plugin");
  mkdirSync(root);
  cpSync(join(EXAMPLE, "asp-plugin.json"), join(root, "asp-plugin.json"));
  writeFileSync(
    join(root, "main.mjs"),
    `await import(${JSON.stringify(pathToFileURL(join(EXAMPLE, "main.mjs")).href)});\n`,
  );
  return {
    root,
    manifest: (digest) => ({
      id: "provider-example",
      version: "1.0.0",
      digest,
      executable: process.execPath,
      args: [join(root, "main.mjs")],
      cwd: root,
      root,
      capabilities: ["check"],
      diagnosticSources: ["todo"],
      protocolVersion: "1.0",
    }),
  };
}

/** A host configuration over `m` with a policy that pins `m` (and `conformance`, when given) and grants it at the gate. */
function hostWith(m: ProviderManifest, conformance?: unknown): string {
  const dir = temp("asp-cli-conf-host-");
  const policy = {
    apiVersion: "asp.policy/v1",
    requirements: [{ id: "todos", capability: "check", sources: ["todo"], callSites: ["gate"] }],
    providers: [
      { id: m.id, version: m.version, digest: m.digest, ...(conformance === undefined ? {} : { conformance }) },
    ],
    grants: [{ provider: m.id, version: m.version, digest: m.digest, requirement: "todos", callSites: ["gate"] }],
  };
  writeFileSync(join(dir, "policy.json"), JSON.stringify(policy));
  writeFileSync(join(dir, "asp.host.json"), JSON.stringify({ store: "store", policy: "policy.json", providers: [m] }));
  return join(dir, "asp.host.json");
}

async function conformanceAxis(config: string): Promise<{ integrity: string; conformance: string }> {
  const repo = temp("asp-cli-conf-repo-");
  writeFileSync(join(repo, "a.ts"), "export const a = 1;\n");
  const gate = await runInProcess(["gate", "--json", "--config", config, "--repo", repo]);
  const out = JSON.parse(gate.stdout);
  const authority = (out.envelope ?? out).authority as Array<{ integrity: string; conformance: string }>;
  expect(authority).toHaveLength(1);
  return authority[0] as { integrity: string; conformance: string };
}

describe("H1a.1 asp conformance result pinned in trusted policy (issue 32 audit)", { timeout: 180_000 }, () => {
  it("H1a.1 --json binds the provider digest and the result digest; pinned, the gate reports conformance verified", async () => {
    const { root, manifest } = providerCopy();
    const run = await runInProcess(["--json", "conformance", "--plugin", root]);
    expect(run.code, run.stdout).toBe(EXIT.ok);
    const report = JSON.parse(run.stdout);
    expect(report).toMatchObject({ passed: true, suite: "asp.conformance/1" });
    expect(report.subjectDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(report.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const pin = { result: "pass", suite: report.suite, subjectDigest: report.subjectDigest, digest: report.digest };

    // The human form prints the same four fields, ready to paste into the pin.
    const human = await runInProcess(["conformance", "--plugin", root]);
    expect(human.stdout).toContain(`"conformance": ${JSON.stringify(pin)}`);

    const m = manifest(report.subjectDigest);
    expect(await conformanceAxis(hostWith(m, pin))).toEqual(
      expect.objectContaining({ integrity: "verified", conformance: "verified" }),
    );
    // Without the pin, the same provider is unverified on that axis.
    expect((await conformanceAxis(hostWith(m))).conformance).toBe("unverified");
  });

  it("H1a.1 a result pinned for an older digest does not carry over to the provider that runs now", async () => {
    const { root, manifest } = providerCopy();
    const before = JSON.parse((await runInProcess(["--json", "conformance", "--plugin", root])).stdout);
    // A new release of the provider: the operator re-pins its digest but keeps the old result.
    writeFileSync(join(root, "NOTES.md"), "release 1.0.0-b\n");
    const now = JSON.parse((await runInProcess(["--json", "conformance", "--plugin", root])).stdout);
    expect(now.passed).toBe(true);
    expect(now.subjectDigest).not.toBe(before.subjectDigest);
    const stale = { result: "pass", suite: before.suite, subjectDigest: before.subjectDigest, digest: before.digest };
    expect(await conformanceAxis(hostWith(manifest(now.subjectDigest), stale))).toEqual(
      expect.objectContaining({ integrity: "verified", conformance: "unverified" }),
    );
  });

  it("H1a.1 --root binds a configured provider's root folder; a command without --plugin or --root binds nothing to pin", async () => {
    const { root } = providerCopy();
    const withRoot = await runInProcess([
      "--json",
      "conformance",
      "--root",
      root,
      "--",
      process.execPath,
      join(root, "main.mjs"),
    ]);
    expect(withRoot.code, withRoot.stdout).toBe(EXIT.ok);
    const plugin = JSON.parse((await runInProcess(["--json", "conformance", "--plugin", root])).stdout);
    expect(JSON.parse(withRoot.stdout).subjectDigest).toBe(plugin.subjectDigest);
    const bare = await runInProcess(["conformance", "--", process.execPath, join(root, "main.mjs")]);
    expect(bare.code).toBe(EXIT.ok);
    expect(bare.stdout).not.toContain('"conformance":');
  });
});
