import type { Policy, ProviderManifest } from "@asp/contracts";
import { afterAll, describe, expect, it } from "vitest";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// issue 32 (clause audit: "the fifth authority axis is a constant"). The conformance axis of a
// provider's authority evidence comes from a conformance result the operator ran and pinned in
// trusted policy, bound to the provider's digest; the host reports `verified` only when that
// digest is the one it measured for the provider that ran, never from what the provider says.
// Real subprocess providers, measured against their root (the fixtures folder).

const KIT = "asp.conformance/1";
const REPORT = `sha256:${"c".repeat(64)}`;
const OTHER = `sha256:${"d".repeat(64)}`;

/** `policyFor(granted)` with a conformance result pinned next to each provider, as `pin` says. */
function pinned(granted: readonly ProviderManifest[], pin: (m: ProviderManifest) => unknown): Policy {
  const policy = policyFor(granted);
  return {
    ...policy,
    providers: policy.providers.map((p, i) => {
      const c = pin(granted[i] as ProviderManifest);
      return c === undefined ? p : { ...p, conformance: c as NonNullable<Policy["providers"][number]["conformance"]> };
    }),
  };
}

async function authorityOf(policy: Policy, providers: ProviderManifest[]) {
  const { host } = await testHost({ policy, providers });
  try {
    const { envelope, receipt } = await host.gate({ repo: tempRepo() });
    return { envelope, receipt, evidence: envelope.authority[0] };
  } finally {
    await host.close();
  }
}

describe("H1a.1 the conformance axis (issue 32 audit; THREAT-MODEL inv. 3: authority evidence is measured)", () => {
  const ts = manifest("fake-honest-ts", { source: "ts" });

  it("H1a.1 a pass pinned for the measured digest is verified, in the envelope and the receipt", async () => {
    const { envelope, receipt, evidence } = await authorityOf(
      pinned([ts], (m) => ({ result: "pass", suite: KIT, subjectDigest: m.digest, digest: REPORT })),
      [ts],
    );
    expect(evidence).toMatchObject({ providerId: ts.id, integrity: "verified", conformance: "verified" });
    expect(receipt.authority[0]).toMatchObject({ providerId: ts.id, conformance: "verified" });
    // Evidence only: the decision is what it was without it (the axis grants nothing).
    expect(envelope.decision).toBe("allow");
  });

  it("H1a.1 a fail pinned for the measured digest is failed (and grants nothing away)", async () => {
    const { envelope, evidence } = await authorityOf(
      pinned([ts], (m) => ({ result: "fail", suite: KIT, subjectDigest: m.digest, digest: REPORT })),
      [ts],
    );
    expect(evidence?.conformance).toBe("failed");
    expect(envelope.decision).toBe("allow");
  });

  it("H1a.1 a pass pinned for another digest (the pin moved, the result did not) is unverified", async () => {
    const { evidence } = await authorityOf(
      pinned([ts], () => ({ result: "pass", suite: KIT, subjectDigest: OTHER, digest: REPORT })),
      [ts],
    );
    expect(evidence).toMatchObject({ integrity: "verified", conformance: "unverified" });
  });

  it("H1a.1 no pinned result is unverified", async () => {
    const { evidence } = await authorityOf(policyFor([ts]), [ts]);
    expect(evidence).toMatchObject({ integrity: "verified", conformance: "unverified" });
  });

  it("H1a.1 a pass pinned for a provider the host could not measure (no root) is unverified", async () => {
    const unmeasured = manifest("fake-honest-ts", { source: "ts", root: false });
    const { evidence } = await authorityOf(
      pinned([unmeasured], (m) => ({ result: "pass", suite: KIT, subjectDigest: m.digest, digest: REPORT })),
      [unmeasured],
    );
    expect(evidence).toMatchObject({ integrity: "unverified", conformance: "unverified" });
  });

  describe("when the provider itself claims conformance", () => {
    it("H1a.1 a claim in its initialize reply is refused (malformed) and the axis stays unverified", async () => {
      const claimer = manifest("fake-claims-conformance", { source: "ts", args: ["--claim", "initialize"] });
      const { envelope, evidence } = await authorityOf(policyFor([claimer]), [claimer]);
      expect(evidence).toMatchObject({ providerId: claimer.id, conformance: "unverified" });
      expect(envelope.decision).not.toBe("allow");
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ provider: claimer.id, reason: "malformed" }),
      ]);
    });

    it("H1a.1 a claim in its answer's data is ignored: the answer counts, the axis stays unverified", async () => {
      const claimer = manifest("fake-claims-conformance", { source: "ts", args: ["--claim", "data"] });
      const { envelope, evidence } = await authorityOf(policyFor([claimer]), [claimer]);
      expect(envelope.coverage.ran).toEqual([`req-${claimer.id}`]);
      expect(evidence).toMatchObject({ integrity: "verified", conformance: "unverified" });
    });
  });

  describe("when two providers run and only one has a pinned result", () => {
    const secrets = manifest("fake-honest-secrets", { source: "secrets" });
    const hostP = testHost({
      policy: pinned([ts, secrets], (m) =>
        m.id === ts.id ? { result: "pass", suite: KIT, subjectDigest: m.digest, digest: REPORT } : undefined,
      ),
      providers: [ts, secrets],
    });
    afterAll(async () => (await hostP).host.close());

    it("H1a.1 each provider's axis is its own: one verified result never stands in for another provider", async () => {
      const { host } = await hostP;
      const { envelope } = await host.gate({ repo: tempRepo() });
      const byId = Object.fromEntries(envelope.authority.map((a) => [a.providerId, a.conformance]));
      expect(byId).toEqual({ [ts.id]: "verified", [secrets.id]: "unverified" });
    });
  });
});
