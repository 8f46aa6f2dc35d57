import { rmSync } from "node:fs";
import { PassThrough } from "node:stream";
import { type DecisionEnvelope, validate } from "@asp/contracts";
import { createStreamConnection, PROTOCOL_ERRORS } from "@asp/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { type ComposedHost, serveHost } from "../src/index.js";
import { editManifest, replaceIntent } from "./apply-helpers.js";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// issue 32 audit, host §0 (H0.2): inspect, edit and apply are optional profiles beside the Core
// Profile. A host composed with check providers only (no edit or inspect provider, no sandbox
// plugin) serves host/status and host/capabilities without them and decides; adding an edit
// provider changes nothing on the Core path (the same change gets the same decision, coverage,
// findings, authority and assurance).

const ts = manifest("fake-honest-ts", { source: "ts" });
const secrets = manifest("fake-honest-secrets", { source: "secrets", args: ["--marker", "ASP-SECRET"] });
const CHECKS = [ts, secrets];

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function hostWith(extra: ReturnType<typeof editManifest>[] = []): Promise<ComposedHost> {
  const { host } = await testHost({
    policy: policyFor(CHECKS, { timeoutMs: 10_000 }),
    providers: [...CHECKS, ...extra],
  });
  cleanups.push(() => host.close());
  return host;
}

function repoOf(text: string): string {
  const repo = tempRepo({ "src/a.ts": text, "README.md": "# demo\n" });
  cleanups.push(() => rmSync(repo, { recursive: true, force: true }));
  return repo;
}

/** What the Core path decided, without the per-evaluation ids and times. */
function corePart(e: DecisionEnvelope) {
  return {
    decision: e.decision,
    callSite: e.callSite,
    policyDigest: e.policyDigest,
    baseline: e.baseline,
    changeset: e.changeset,
    coverage: e.coverage,
    findings: e.findings.map((f) => f.diagnostic.fingerprint),
    authority: e.authority,
    assurance: e.assurance,
  };
}

describe("H0.2 the Core Profile without the optional profiles", () => {
  it("H0.2 H0.1 host §0: check providers only, no sandbox plugin: capabilities list no inspect or edit, apply is not served, and the host decides", async () => {
    const host = await hostWith();
    expect(host.sandboxes.sandboxes).toEqual([]);
    const toHost = new PassThrough();
    const fromHost = new PassThrough();
    // Served as the Core Profile: no repository to apply to, so no host/applyProposal.
    const server = serveHost(host, toHost, fromHost);
    const client = createStreamConnection(fromHost, toHost);
    client.listen();
    cleanups.push(() => {
      client.dispose();
      server.dispose();
    });
    expect(validate("host-status", await client.sendRequest("host/status")).ok).toBe(true);
    expect(await client.sendRequest("host/capabilities")).toEqual({
      inspect: [],
      check: CHECKS.map((m) => ({ id: m.id, state: "initialized" })),
      edit: [],
    });
    await expect(client.sendRequest("host/applyProposal", { proposalId: "p-1" })).rejects.toMatchObject({
      code: PROTOCOL_ERRORS.methodNotFound,
    });

    const allow = await host.gate({ repo: repoOf("export const a = 1;\n") });
    expect(allow.envelope.decision).toBe("allow");
    expect(allow.envelope.coverage.ran.sort()).toEqual(CHECKS.map((m) => `req-${m.id}`).sort());
    const deny = await host.gate({ repo: repoOf("export const key = 1; // ASP-SECRET\n") });
    expect(deny.envelope.decision).toBe("deny");
    expect(deny.envelope.findings.map((f) => f.diagnostic.source)).toEqual(["secrets"]);
    // No transaction guarantee is claimed where nothing is applied.
    expect(JSON.stringify(allow.envelope)).not.toContain("transactionGuarantee");
    // Asking for the missing optional profile is a coded refusal, never a crash of the Core path.
    const proposed = await host.propose({
      repo: repoOf("export const a = 1;\n"),
      intent: replaceIntent("src/a.ts", "1", "2"),
    });
    expect(proposed.rejection).toMatchObject({ code: "ASP_APPLY_PROVIDER_FAILED" });
  });

  it.each([
    { name: "a clean change", text: "export const a = 1;\n" },
    { name: "a change with findings", text: "export const a = 1; // ASP-TS-ERROR ASP-SECRET\n" },
  ])("H0.2 host §0: adding an edit provider leaves the Core path's decision on $name unchanged", async ({ text }) => {
    const core = await hostWith();
    const withEdit = await hostWith([editManifest("fake-edit-honest")]);
    const a = await core.gate({ repo: repoOf(text) });
    const b = await withEdit.gate({ repo: repoOf(text) });
    expect(a.envelope.decision).toBe(text.includes("ASP-") ? "deny" : "allow");
    expect(corePart(b.envelope)).toEqual(corePart(a.envelope));
    expect(withEdit.capabilities().edit.map((e) => e.id)).toEqual(["fake-edit-honest"]);
  });
});
