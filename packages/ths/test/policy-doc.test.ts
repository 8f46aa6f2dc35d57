import { readFileSync } from "node:fs";
import type { Policy } from "@asp/contracts";
import { hostPinMismatch, parsePolicy } from "@asp/policy";
import { afterAll, describe, expect, it } from "vitest";
import { HOST_INFO } from "../src/index.js";
import { manifest, tempRepo, testHost } from "./helpers.js";

// docs/policy.md is a promise to operators: its complete example must mean what its prose says.

const DOC = readFileSync(new URL("../../../docs/policy.md", import.meta.url), "utf8");

function documentedExample(): Policy {
  const section = DOC.slice(DOC.indexOf("## A complete example"));
  const m = /```json\n([\s\S]*?)\n```/.exec(section);
  if (m === null) throw new Error("docs/policy.md has no complete example");
  return JSON.parse(m[1] as string) as Policy;
}

describe("docs/policy.md, the complete example", () => {
  it("is a valid policy whose host block names this host (one name: asp-ths)", () => {
    const policy = parsePolicy(JSON.stringify(documentedExample()));
    expect(policy.document.host?.implementation).toBe(HOST_INFO.name);
    expect(hostPinMismatch(policy, { ...HOST_INFO, digest: null })).toBeNull();
  });

  describe("run by the host with the TypeScript provider it grants (re-pinned to the measured digest)", () => {
    const ts = manifest("fake-honest-ts", {
      id: "asp.provider-typescript",
      version: "0.1.0",
      source: "ts",
      args: ["--version", "0.1.0"],
    });
    const doc = documentedExample();
    const documented = doc.providers.find((p) => p.id === ts.id)?.digest;
    const repin = <T extends { digest: string }>(x: T): T =>
      x.digest === documented ? { ...x, digest: ts.digest } : x;
    const policy: Policy = {
      ...doc,
      providers: doc.providers.map(repin),
      grants: doc.grants.map(repin),
      // A noisy machine must not turn the example into a timeout; the caps are what is tested.
      budgets: { ...doc.budgets, timeoutMs: { interactive: 20_000, gate: 20_000, sweep: 20_000 } },
    };
    const hostP = testHost({ policy, providers: [ts] });
    afterAll(async () => (await hostP).host.close());

    it('"A provider running without isolation (advisory) is capped at warning even when granted"', async () => {
      const { host } = await hostP;
      const { envelope } = await host.check({ repo: tempRepo({ "src/a.ts": "const x = 1; // ASP-TS-ERROR\n" }) });
      expect(envelope.findings).toHaveLength(1);
      const [finding] = envelope.findings;
      expect(finding).toMatchObject({
        disposition: "gating",
        grant: { requirement: "types", callSite: "interactive" },
        effectiveSeverity: "warning",
        diagnostic: { severity: "error" },
      });
      expect(finding?.severityNote).toContain("isolation advisory");
      // A capped warning does not block: interactive `types` ran, nothing blocks.
      expect(envelope.decision).toBe("allow");
      expect(envelope.coverage.ran).toEqual(["types"]);
    });
  });
});
