import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Policy, validate } from "@asp/contracts";
import { git } from "@asp/test-utils";
import { afterAll, describe, expect, it } from "vitest";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// host §7: the repository's own policy file is only a pending candidate. It is assessed against
// the trusted base policy; it never authorizes the change that introduces it.
describe("a change that edits the repository's policy", () => {
  const ts = manifest("fake-honest-ts", { source: "ts" });
  const active = policyFor([ts]);
  const hostP = testHost({ policy: active, providers: [ts] });
  afterAll(async () => (await hostP).host.close());

  function repoWithPolicy(candidate: Policy | string): string {
    const repo = tempRepo({ "src/a.ts": "export const a = 1;\n", "asp.policy.json": JSON.stringify(active) });
    git(repo, "init", "-q", "-b", "main");
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "base");
    writeFileSync(join(repo, "asp.policy.json"), typeof candidate === "string" ? candidate : JSON.stringify(candidate));
    return repo;
  }

  it("is allowed when the candidate changes nothing that authorizes", async () => {
    const { host } = await hostP;
    const repo = repoWithPolicy({ ...active, description: "just a comment" });
    const { envelope } = await host.gate({ repo, base: "HEAD", candidatePolicyPath: "asp.policy.json" });
    expect(envelope.decision).toBe("allow");
  });

  it("H7.2 H7.3 is never allowed when the candidate grants a new provider blocking authority", async () => {
    const { host } = await hostP;
    const intruder = { id: "intruder", version: "1.0.0", digest: `sha256:${"9".repeat(64)}` };
    const candidate: Policy = {
      ...active,
      providers: [...active.providers, intruder],
      grants: [
        ...active.grants,
        {
          provider: "intruder",
          version: intruder.version,
          digest: intruder.digest,
          requirement: "req-fake-honest-ts",
          callSites: ["gate"],
        },
      ],
    };
    const repo = repoWithPolicy(candidate);
    const { envelope } = await host.gate({ repo, base: "HEAD", candidatePolicyPath: "asp.policy.json" });
    expect(validate("verdict", envelope).ok).toBe(true);
    expect(envelope.decision).not.toBe("allow");
    expect(envelope.coverage.degraded.map((d) => d.reason)).toContain("policy-self-authorization");
    // The decision was made under the trusted policy, not the candidate.
    expect(envelope.policyDigest).toBe((await hostP).host.policy.digest);
  });

  it("H7.3 is never allowed when the candidate opens lower assurance for the gate", async () => {
    const { host } = await hostP;
    const repo = repoWithPolicy({ ...active, assurance: { gate: "advisory" } });
    const { envelope } = await host.gate({ repo, base: "HEAD", candidatePolicyPath: "asp.policy.json" });
    expect(envelope.decision).not.toBe("allow");
    expect(envelope.coverage.degraded.some((d) => d.reason === "policy-self-authorization")).toBe(true);
  });

  it("treats an unparseable candidate as malformed, not as a pass", async () => {
    const { host } = await hostP;
    const repo = repoWithPolicy("{ not json");
    const { envelope } = await host.gate({ repo, base: "HEAD", candidatePolicyPath: "asp.policy.json" });
    expect(envelope.decision).not.toBe("allow");
    expect(envelope.coverage.degraded.map((d) => d.reason)).toContain("malformed");
  });

  it("ignores the file when the host is not told it is the repository's policy", async () => {
    const { host } = await hostP;
    const repo = repoWithPolicy("{ not json");
    const { envelope } = await host.gate({ repo, base: "HEAD" });
    expect(envelope.decision).toBe("allow");
  });
});
