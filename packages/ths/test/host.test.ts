import { validate } from "@asp/contracts";
import { afterAll, describe, expect, it } from "vitest";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

describe("Host", () => {
  describe("when two honest providers assess a clean change", () => {
    const ts = manifest("fake-honest-ts", { source: "ts" });
    const secrets = manifest("fake-honest-secrets", { source: "secrets" });
    const hostP = testHost({ policy: policyFor([ts, secrets]), providers: [ts, secrets] });
    afterAll(async () => (await hostP).host.close());

    it("H0.1 H1.1 H1b.1 allows at the gate and the envelope validates against the verdict schema", async () => {
      const { host } = await hostP;
      const repo = tempRepo();
      const { envelope, receipt } = await host.gate({ repo });
      expect(validate("verdict", envelope).ok).toBe(true);
      expect(validate("audit-receipt", receipt).ok).toBe(true);
      expect(envelope.decision).toBe("allow");
      expect([...envelope.coverage.ran].sort()).toEqual(["req-fake-honest-secrets", "req-fake-honest-ts"]);
      expect(envelope.coverage.degraded).toEqual([]);
      // host §3: plain subprocesses (no sandbox plugin): each advisory with direct write; the host gates.
      expect(envelope.assurance).toMatchObject({ mode: "gated", directWriteRisk: true });
      expect(envelope.assurance.providers?.map((p) => [p.provider, p.mode, p.directWrite, p.sandbox])).toEqual([
        ["fake-honest-ts", "advisory", true, null],
        ["fake-honest-secrets", "advisory", true, null],
      ]);
    });

    it("H1.1 denies when a granted provider reports an error, with a nextStep on the gating finding", async () => {
      const { host } = await hostP;
      const repo = tempRepo({ "src/a.ts": "const x = 1; // ASP-TS-ERROR\n" });
      const { envelope } = await host.gate({ repo });
      expect(envelope.decision).toBe("deny");
      const gating = envelope.findings.filter((f) => f.disposition === "gating");
      expect(gating).toHaveLength(1);
      expect(gating[0]?.nextStep).toBeTruthy();
      expect(gating[0]?.provenance).toEqual({ source: "ts", authenticated: true });
    });
  });

  describe("when a provider names the tool that answered, and another cannot serve the project", () => {
    const ts = manifest("fake-honest-ts", { source: "ts", args: ["--tool", "typescript@4.9.5"] });
    const gap = manifest("fake-unsupported", { id: "gap", source: "gap", args: ["--why", "pins TypeScript 5.4.5"] });
    const hostP = testHost({ policy: policyFor([ts, gap]), providers: [ts, gap] });
    afterAll(async () => (await hostP).host.close());

    it("H1.1 the receipt's provenance carries the tool each provider said answered; an unsupported answer's reason is one line in detail", async () => {
      const { host } = await hostP;
      const { envelope, receipt } = await host.gate({ repo: tempRepo() });
      expect(validate("audit-receipt", receipt).ok).toBe(true);
      expect(receipt.provenance.find((p) => p.provider.id === "fake-honest-ts")?.tool).toEqual({
        name: "typescript",
        version: "4.9.5",
        selectedBy: "the fake's --tool flag",
      });
      expect(receipt.provenance.find((p) => p.provider.id === "gap")?.tool).toBeUndefined();
      const degraded = envelope.coverage.degraded.find((d) => d.provider === "gap");
      expect(degraded).toMatchObject({ reason: "unsupported" });
      expect(degraded?.detail).toBe(
        "source gap: the provider does not support this check: E_UNSUPPORTED_VERSION pins TypeScript 5.4.5 [31m second line",
      );
      expect(envelope.decision).not.toBe("allow");
    });
  });

  describe("when an edit-only provider is installed beside a check provider", () => {
    const ts = manifest("fake-honest-ts", { source: "ts" });
    // fake-unsupported would answer check/assess `unsupported`; with an edit-only manifest the
    // host must not ask it at all, so it can neither run nor degrade check coverage.
    const editor = {
      ...manifest("fake-unsupported", { id: "editor" }),
      capabilities: ["edit" as const],
      diagnosticSources: [],
    };
    const hostP = testHost({ policy: policyFor([ts]), providers: [ts, editor] });
    afterAll(async () => (await hostP).host.close());

    it("routes check/assess only to providers whose trusted manifest declares check", async () => {
      const { host } = await hostP;
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.decision).toBe("allow");
      expect(envelope.coverage.degraded).toEqual([]);
      expect(envelope.authority.map((a) => a.providerId)).toEqual(["fake-honest-ts"]);
    });
  });
});
