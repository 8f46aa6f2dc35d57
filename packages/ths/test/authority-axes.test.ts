import { rmSync } from "node:fs";
import { AUTHORITY_AXES } from "@asp/contracts";
import { afterEach, describe, expect, it } from "vitest";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// issue 32 audit, host §1 (H1b.9, H1a.1): the envelope reports every provider's authority
// evidence on all five axes, each measured on its own: a verified identity and integrity do
// not make an ungranted provider granted, and a grant does not make an unmeasured provider's
// integrity verified (its grant is then not honoured).

const granted = manifest("fake-honest-ts", { source: "ts" });
const ungranted = manifest("fake-honest-secrets", { id: "ungranted", source: "secrets" });
const unmeasured = manifest("fake-honest-ts", { id: "unmeasured", source: "u", root: false });

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("H1b.9 authority evidence on five axes", () => {
  it("H1b.9 host §1: one entry per provider, every axis present, each axis its own measurement", async () => {
    const { host } = await testHost({
      policy: policyFor([granted, unmeasured], { timeoutMs: 10_000 }),
      providers: [granted, ungranted, unmeasured],
    });
    cleanups.push(() => host.close());
    const repo = tempRepo({ "src/a.ts": "export const a = 1;\n" });
    cleanups.push(() => rmSync(repo, { recursive: true, force: true }));
    const { envelope, receipt } = await host.gate({ repo });

    const axes = Object.fromEntries(
      envelope.authority.map((a) => [a.providerId, Object.fromEntries(AUTHORITY_AXES.map((x) => [x, a[x]]))]),
    );
    expect(axes).toEqual({
      "fake-honest-ts": {
        identity: "verified",
        integrity: "verified",
        conformance: "unverified",
        isolation: "unverified",
        authorityGrant: "verified",
      },
      ungranted: {
        identity: "verified",
        integrity: "verified",
        conformance: "unverified",
        isolation: "unverified",
        authorityGrant: "unverified",
      },
      unmeasured: {
        identity: "unverified",
        integrity: "unverified",
        conformance: "unverified",
        isolation: "unverified",
        authorityGrant: "verified",
      },
    });
    // Each entry names the measured identity it is evidence for.
    for (const m of [granted, ungranted, unmeasured]) {
      expect(envelope.authority.find((a) => a.providerId === m.id)).toMatchObject({
        providerVersion: m.version,
        providerDigest: m.digest,
      });
    }
    // The grant axis alone does not stand in for integrity: that requirement is not honoured.
    expect(envelope.decision).toBe("indeterminate");
    expect(envelope.coverage.degraded).toEqual([
      expect.objectContaining({ provider: "unmeasured", reason: "integrity-unverified" }),
    ]);
    expect(envelope.coverage.ran).toEqual(["req-fake-honest-ts"]);
    // The receipt carries the same evidence.
    expect(receipt.authority).toEqual(envelope.authority);
  });
});
