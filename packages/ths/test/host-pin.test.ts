import { readFileSync } from "node:fs";
import type { Policy } from "@asp/contracts";
import { afterAll, describe, expect, it } from "vitest";
import { HOST_INFO } from "../src/index.js";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// host §2 gate list: "incompatible host" is never allow. The policy's `host` block pins the
// implementation (and optionally a version range and digest) that may decide under it.

const ts = manifest("fake-honest-ts", { source: "ts" });
const secrets = manifest("fake-honest-secrets", { source: "secrets" });

async function gateUnder(host: NonNullable<Policy["host"]>) {
  const { host: h } = await testHost({
    policy: policyFor([ts, secrets], { extra: { host } }),
    providers: [ts, secrets],
  });
  try {
    return (await h.gate({ repo: tempRepo() })).envelope;
  } finally {
    await h.close();
  }
}

describe("the policy's host pin", () => {
  it("HOST_INFO names this host asp-ths", () => {
    expect(HOST_INFO.name).toBe("asp-ths");
  });

  it("H2.6 host §2: HOST_INFO.version is the package's released version, read from its package.json", () => {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    expect(HOST_INFO.version).toBe(pkg.version);
  });

  describe.each([
    ["another implementation (the old documented name)", { implementation: "asp.ths" }],
    ["a version range this host is outside of", { implementation: "asp-ths", version: "^0.2.0" }],
    ["an exact version this host is not", { implementation: "asp-ths", version: "9.9.9" }],
    [
      "a host digest (this host cannot measure its own artifact)",
      { implementation: "asp-ths", digest: `sha256:${"4".repeat(64)}` },
    ],
  ] as const)("when it names %s", (_what, pin) => {
    it("H2.6 host §2: every required requirement degrades with host-incompatible and the gate is never allow", async () => {
      const envelope = await gateUnder(pin);
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.coverage.ran).toEqual([]);
      const hostEntries = envelope.coverage.degraded.filter((d) => d.reason === "host-incompatible");
      expect(hostEntries.map((d) => d.requirement).sort()).toEqual(["req-fake-honest-secrets", "req-fake-honest-ts"]);
      for (const d of hostEntries) expect(d).toMatchObject({ failClass: "host_incompatible", failOpen: false });
    });
  });

  describe.each([
    ["the implementation only", { implementation: "asp-ths" }],
    ["the exact running version", { implementation: "asp-ths", version: HOST_INFO.version }],
    ["a range holding the running version", { implementation: "asp-ths", version: `>=${HOST_INFO.version} <1000.0.0` }],
  ] as const)("when it names %s", (_what, pin) => {
    it("the host decides as usual (allow on a clean change)", async () => {
      const envelope = await gateUnder(pin);
      expect(envelope.decision).toBe("allow");
      expect(envelope.coverage.degraded).toEqual([]);
    });
  });

  describe("when the policy pins another host at the interactive call-site", () => {
    const policy = policyFor([ts], { extra: { host: { implementation: "asp.ths" } } });
    const hostP = testHost({ policy, providers: [ts] });
    afterAll(async () => (await hostP).host.close());

    it("is indeterminate there too (the cell is indeterminate everywhere), never a warn-allow", async () => {
      const { host } = await hostP;
      const { envelope } = await host.check({ repo: tempRepo() });
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ requirement: "req-fake-honest-ts", reason: "host-incompatible" }),
      ]);
    });
  });
});
