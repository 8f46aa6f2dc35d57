import { appendFileSync, readFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { manifest, policyFor, rootedProvider, tempRepo, testHost } from "./helpers.js";

// THREAT-MODEL invariants 3 and 4: authority comes only from trusted policy over MEASURED
// identity and integrity, and what runs is exactly what was verified, at every launch.

const degradedReasons = (envelope: { coverage: { degraded: ReadonlyArray<{ reason: string }> } }): string[] =>
  envelope.coverage.degraded.map((d) => d.reason);

describe("provider integrity and identity", () => {
  describe("when a configured provider names no root", () => {
    // The policy pins and grants exactly what the manifest says; nothing measured it.
    const ts = manifest("fake-honest-ts", { source: "ts", root: false });
    const hostP = testHost({ policy: policyFor([ts]), providers: [ts] });
    afterAll(async () => (await hostP).host.close());

    it("H1.3 H1a.1 H1b.9 host §1: the grant is not honoured; the gate is indeterminate with integrity-unverified", async () => {
      const { host } = await hostP;
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.coverage.ran).toEqual([]);
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({
          requirement: "req-fake-honest-ts",
          provider: "fake-honest-ts",
          reason: "integrity-unverified",
          failClass: "integrity_unverified",
        }),
      ]);
    });

    it("H1.4 H2a.8 host §1: an initialize reply that matches the manifest never makes identity verified", async () => {
      const { host } = await hostP;
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.authority).toEqual([
        expect.objectContaining({ providerId: "fake-honest-ts", identity: "unverified", integrity: "unverified" }),
      ]);
    });

    it("a finding it reports still cannot deny or allow through the grant (never allow at the gate)", async () => {
      const { host } = await hostP;
      const { envelope } = await host.gate({ repo: tempRepo({ "src/a.ts": "// ASP-TS-ERROR\n" }) });
      expect(envelope.decision).not.toBe("allow");
      expect(degradedReasons(envelope)).toContain("integrity-unverified");
    });
  });

  describe("when the provider's root changed after the policy pinned it", () => {
    const p = rootedProvider("fake-honest-ts", { source: "ts" });
    // The attacker edits the provider's folder before the host starts: the pin no longer matches.
    appendFileSync(p.script, "// a backdoor\n");
    const hostP = testHost({ policy: policyFor([p.manifest]), providers: [p.manifest] });
    afterAll(async () => (await hostP).host.close());

    it("H1.3 host §1: the gate is indeterminate with integrity-unverified and the provider never launches", async () => {
      const { host } = await hostP;
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ requirement: `req-${p.manifest.id}`, reason: "integrity-unverified" }),
      ]);
      expect(envelope.authority[0]).toMatchObject({ identity: "failed", integrity: "failed" });
      expect(() => readFileSync(p.pidFile)).toThrow();
    });
  });

  describe("when the provider's root is rewritten while the host runs and the provider restarts", () => {
    const p = rootedProvider("fake-honest-ts", { source: "ts" });
    const hostP = testHost({ policy: policyFor([p.manifest]), providers: [p.manifest] });
    afterAll(async () => (await hostP).host.close());

    it("allows while the root is the pinned one", async () => {
      const { host } = await hostP;
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.decision).toBe("allow");
      expect(envelope.authority[0]).toMatchObject({ identity: "verified", integrity: "verified" });
    });

    it("H1.3 host §1: re-measures before the relaunch and refuses the rewritten code (integrity-unverified)", async () => {
      const { host } = await hostP;
      const pid = Number(readFileSync(p.pidFile, "utf8"));
      // The attacker rewrites the folder under the running (verified) process, then crashes it.
      appendFileSync(p.script, "// a backdoor\n");
      process.kill(pid, "SIGKILL");
      // A gate racing the kill may still see the crash; the relaunch after it is what is judged.
      let { envelope } = await host.gate({ repo: tempRepo() });
      for (let i = 0; i < 3 && degradedReasons(envelope).includes("crashed"); i++) {
        ({ envelope } = await host.gate({ repo: tempRepo() }));
      }
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ requirement: `req-${p.manifest.id}`, reason: "integrity-unverified" }),
      ]);
      expect(Number(readFileSync(p.pidFile, "utf8"))).toBe(pid); // never relaunched
    });
  });

  describe("when a provider's initialize reply claims a granted identity", () => {
    const granted = manifest("fake-honest-ts", { id: "granted-ts", source: "ts" });
    // Trusted configuration launches "impostor"; the process says it is "granted-ts".
    const impostor = manifest("fake-honest-ts", { id: "impostor", source: "ts", args: ["--id", "granted-ts"] });
    const hostP = testHost({ policy: policyFor([granted]), providers: [impostor] });
    afterAll(async () => (await hostP).host.close());

    it("H1.4 host §1: the reply is incompatible, the claimed identity gains nothing, and the gate is not allow", async () => {
      const { host } = await hostP;
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.decision).not.toBe("allow");
      // Evidence is about what trusted configuration launched, never about what the process claims.
      expect(envelope.authority).toEqual([
        expect.objectContaining({ providerId: "impostor", authorityGrant: "unverified", grants: [] }),
      ]);
      expect(envelope.findings).toEqual([]);
      expect(host.status().providers[0]?.state).toBe("incompatible");
      expect(envelope.coverage.degraded).toEqual(
        expect.arrayContaining([expect.objectContaining({ requirement: "req-granted-ts" })]),
      );
    });
  });

  describe("when a granted provider's initialize reply names another version than its manifest", () => {
    // The manifest (and the grant) pin 1.0.0; the process says 2.0.0.
    const ts = manifest("fake-honest-ts", { source: "ts", args: ["--version", "2.0.0"] });
    const hostP = testHost({ policy: policyFor([ts]), providers: [ts] });
    afterAll(async () => (await hostP).host.close());

    it("H2.6 host §2: it stays incompatible and is never asked to assess; the gate is indeterminate", async () => {
      const { host } = await hostP;
      const { envelope } = await host.gate({ repo: tempRepo({ "src/a.ts": "// ASP-TS-ERROR\n" }) });
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.findings).toEqual([]);
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ requirement: "req-fake-honest-ts", reason: "incompatible" }),
      ]);
      expect(host.status().providers[0]?.state).toBe("incompatible");
    });
  });
});
