import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PROTOCOL_ERRORS } from "@asp/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { APPLY_FACT_KINDS } from "../src/apply/applier.js";
import type { ComposedHost } from "../src/index.js";
import { bytesOf, editManifest, replaceIntent } from "./apply-helpers.js";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// issue 32 audit, host §6 (H6.9, H6.10): a provider asks the host, over its own connection, for
// what only an explicit harness request may do: apply an edit (LSP's `workspace/applyEdit`, a
// `host/applyEdit`, even `host/applyProposal` with a real proposal id), write a file, or call a
// method nobody serves, as requests and as notifications. The host serves a provider nothing but
// its callbacks: each request is refused with MethodNotFound, each notification is dropped, the
// worktree is untouched, the proposal stays unapplied, and the decision is an honest provider's.

const METHODS_ASKED = [
  "workspace/applyEdit",
  "host/applyEdit",
  "host/applyProposal",
  "edit/apply",
  "host/writeFile",
  "x/unknown",
];

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function repoWith(files: Record<string, string>): string {
  const repo = tempRepo(files);
  cleanups.push(() => rmSync(repo, { recursive: true, force: true }));
  return repo;
}

async function hostOf(...args: Parameters<typeof testHost>): Promise<ComposedHost> {
  const { host } = await testHost(...args);
  cleanups.push(() => host.close());
  return host;
}

interface Asked {
  readonly method: string;
  readonly kind: "request" | "notification";
  readonly ok: boolean;
  readonly code: number | null;
}

describe("provider-initiated requests the host does not serve", () => {
  describe.each([
    { name: "a clean change", text: "export const a = 1;\n", decision: "allow" },
    { name: "a change with a finding", text: "export const a = 1; // ASP-TS-ERROR\n", decision: "deny" },
  ])("H6.9 H6.10 when a gate's check provider asks for writes on $name", ({ text, decision }) => {
    it("H6.9 H6.10 host §6: every request is refused MethodNotFound, nothing is written, the decision is the honest one", async () => {
      const out = join(tempDir("asp-unserved-out-"), "asked.json");
      const files = { "src/a.ts": text, "README.md": "# demo\n" };
      const repo = repoWith(files);
      const repoFile = join(tempDir("asp-unserved-repo-"), "repo");
      writeFileSync(repoFile, repo);
      const unserved = manifest("fake-unserved", {
        id: "fake-checker",
        source: "ts",
        args: ["--marker", "ASP-TS-ERROR", "--repo-file", repoFile, "--target", "src/a.ts", "--out", out],
      });
      const before = bytesOf(repo);
      const host = await hostOf({ policy: policyFor([unserved], { timeoutMs: 10_000 }), providers: [unserved] });
      const r = await host.gate({ repo });

      const asked = JSON.parse(readFileSync(out, "utf8")) as Asked[];
      expect(asked.filter((a) => a.kind === "request")).toEqual(
        METHODS_ASKED.map((method) => ({ method, kind: "request", ok: false, code: PROTOCOL_ERRORS.methodNotFound })),
      );
      expect(asked.filter((a) => a.kind === "notification").map((a) => a.method)).toEqual(METHODS_ASKED);
      // Nothing was written, by the host or through it.
      expect(bytesOf(repo)).toEqual(before);
      expect(await host.log.list({ kind: APPLY_FACT_KINDS.receipt })).toEqual([]);
      expect(await host.log.list({ kind: APPLY_FACT_KINDS.pending })).toEqual([]);

      // The same change judged by an honest provider of the same identity decides the same.
      const honest = manifest("fake-honest-ts", { id: "fake-checker", source: "ts" });
      const honestHost = await hostOf({ policy: policyFor([honest], { timeoutMs: 10_000 }), providers: [honest] });
      const h = await honestHost.gate({ repo: repoWith(files) });
      expect(r.envelope.decision).toBe(decision);
      expect(h.envelope.decision).toBe(decision);
      expect(r.envelope.coverage).toEqual(h.envelope.coverage);
      expect(r.envelope.findings).toHaveLength(decision === "deny" ? 1 : 0);
      expect(r.envelope.findings.map((f) => f.diagnostic.fingerprint)).toEqual(
        h.envelope.findings.map((f) => f.diagnostic.fingerprint),
      );
      // The refusals cost the provider nothing it could use and left it healthy: it ran.
      expect(r.envelope.coverage.ran).toEqual(["req-fake-checker"]);
      expect(host.status().providers[0]?.state).toBe("initialized");
    });
  });

  it("H6.9 H6.10 host §6: host/applyProposal with a real proposal id, sent by a provider, applies nothing; the harness's own apply then applies it once", async () => {
    const dir = tempDir("asp-unserved-out-");
    const out = join(dir, "asked.json");
    const proposalFile = join(dir, "proposal-id");
    const repo = repoWith({ "src/a.ts": "export const a = 1;\n", "README.md": "# demo\n" });
    const repoFile = join(dir, "repo");
    writeFileSync(repoFile, repo);
    const unserved = manifest("fake-unserved", {
      source: "ts",
      args: ["--repo-file", repoFile, "--out", out, "--proposal-file", proposalFile],
    });
    const edit = editManifest("fake-edit-honest");
    const host = await hostOf({
      policy: policyFor([unserved], { timeoutMs: 10_000 }),
      providers: [unserved, edit],
      warm: false,
    });
    const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
    expect(proposed.rejection).toBeUndefined();
    writeFileSync(proposalFile, proposed.proposalId);
    const before = bytesOf(repo);

    const gate = await host.gate({ repo });
    const asked = JSON.parse(readFileSync(out, "utf8")) as Asked[];
    expect(asked.find((a) => a.kind === "request" && a.method === "host/applyProposal")).toEqual({
      method: "host/applyProposal",
      kind: "request",
      ok: false,
      code: PROTOCOL_ERRORS.methodNotFound,
    });
    expect(gate.envelope.coverage.ran).toEqual([`req-${unserved.id}`]);
    // Neither the request nor the notification applied the stored proposal.
    expect(bytesOf(repo)).toEqual(before);
    expect(await host.log.list({ kind: APPLY_FACT_KINDS.receipt })).toEqual([]);

    // Only the explicit request applies it, once (a provider-side apply would make this ALREADY_APPLIED).
    const { receipt } = await host.apply({ repo, proposalId: proposed.proposalId });
    expect(receipt).toMatchObject({ applied: true, attempts: 1 });
    expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 2;\n");
    expect(await host.log.list({ kind: APPLY_FACT_KINDS.receipt })).toHaveLength(1);
  });
});
