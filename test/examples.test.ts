import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { validate } from "@asp/contracts";
import { digestPlugin, readTrustRoots, verifyPlugin } from "@asp/plugin-host";
import { describe, expect, it } from "vitest";
import { ROOT } from "./lib/workspace.js";

// The example host (examples/asp.host.json) loads the signed example plugins built by
// `pnpm build`; its trusted policy pins their digests. A code change to a plugin changes its
// digest: run `pnpm examples:pin` and commit the policy, or this test fails.
const hostConfig = JSON.parse(readFileSync(join(ROOT, "examples/asp.host.json"), "utf8")) as {
  policy: string;
  trustRoots: string[];
  plugins: string[];
};
const at = (p: string): string => join(ROOT, "examples", p);
const policyResult = validate("policy", JSON.parse(readFileSync(at(hostConfig.policy), "utf8")));

describe("examples", () => {
  it("the example policy is a valid trusted policy", () => {
    expect(policyResult.ok).toBe(true);
  });

  describe.each(hostConfig.plugins.map((p) => [p] as const))("plugin %s", (dir) => {
    it("is built, signed by the demo key and granted by the example policy at its current digest", () => {
      const abs = at(dir);
      expect(existsSync(abs), `${abs} is missing: run pnpm build`).toBe(true);
      if (!policyResult.ok) return;
      const { digest } = digestPlugin(abs);
      const grant = policyResult.value.plugins?.find((p) => p.digest === digest);
      expect(grant, `no plugins[] grant for ${digest}: run pnpm examples:pin`).toBeDefined();
      const verified = verifyPlugin(abs, {
        trustRoots: readTrustRoots(hostConfig.trustRoots.map(at)),
        policy: policyResult.value,
      });
      expect(verified.evidence.authorityGrant).toBe("verified");
      // A provider is pinned too; a sandbox plugin is granted by its plugins[] entry alone.
      if (verified.manifest.kind !== "provider") return;
      const pin = policyResult.value.providers.find((p) => p.id === verified.manifest.id);
      expect(pin).toEqual({ id: verified.manifest.id, version: verified.manifest.version, digest });
    });
  });
});
