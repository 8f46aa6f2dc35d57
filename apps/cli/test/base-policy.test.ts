import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DecisionEnvelope } from "@asp/contracts";
import { git } from "@asp/test-utils";
import { describe, expect, it } from "vitest";
import { exampleCopy, FAKE_AWS_KEY } from "./example-copy.js";
import { REPO_ROOT, runBinary } from "./helpers.js";

// Issue 17 item 2: trusted policy read from a BASE REVISION of the repository being judged,
// through git, never from its working tree. The attack: the change edits the repository's own
// policy file (here: grants nothing, requires nothing) in the same change that adds a secret. A
// host reading that file would allow; the base-revision source reads the committed bytes.

function setup(): { repo: string; config: string; root: string } {
  const { root, repo, config } = exampleCopy();
  mkdirSync(join(repo, "trusted"));
  copyFileSync(join(REPO_ROOT, "examples/asp.policy.json"), join(repo, "trusted/asp.policy.json"));
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "trusted policy at the base");
  const host = JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>;
  host.policy = { git: "HEAD", path: "trusted/asp.policy.json" };
  writeFileSync(config, JSON.stringify(host));
  return { root, repo, config };
}

/** The repository's policy with every requirement dropped: what an attacker would like the host to trust. */
function weaken(repo: string): void {
  const path = join(repo, "trusted/asp.policy.json");
  const policy = JSON.parse(readFileSync(path, "utf8")) as { requirements: unknown[] };
  policy.requirements = [];
  writeFileSync(path, JSON.stringify(policy, null, 2));
}

function gate(repo: string, config: string, base = "HEAD"): { code: number | null; stdout: string; stderr: string } {
  return runBinary(["gate", "--json", "--config", config, "--repo", repo, "--base", base]);
}

describe("trusted policy from a base revision (host config `policy: { git, path }`)", () => {
  it("H7.1 H7.2 the working tree's edit of the policy file is never read: a secret added with a weakened policy is denied", () => {
    const { repo, config } = setup();
    weaken(repo);
    writeFileSync(join(repo, "src/upload.ts"), `export const AWS_ACCESS_KEY_ID = "${FAKE_AWS_KEY}";\n`);
    const r = gate(repo, config);
    expect(r.stderr).not.toMatch(/ASP_THS_UNTRUSTED_LOCATION/);
    const envelope = JSON.parse(r.stdout) as DecisionEnvelope;
    expect(envelope.decision).toBe("deny");
    expect(r.code).toBe(1);
    expect(envelope.findings.map((f) => f.diagnostic.code)).toContain("secrets/aws-access-key-id");
  });

  it("H7.1 a weakened policy committed on top of the base is not read either when the config names the base", () => {
    const { repo, config } = setup();
    weaken(repo);
    writeFileSync(join(repo, "src/upload.ts"), `export const AWS_ACCESS_KEY_ID = "${FAKE_AWS_KEY}";\n`);
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "the change: weaker policy and a key");
    const host = JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>;
    host.policy = { git: "HEAD~1", path: "trusted/asp.policy.json" };
    writeFileSync(config, JSON.stringify(host));
    const r = gate(repo, config, "HEAD~1");
    expect((JSON.parse(r.stdout) as DecisionEnvelope).decision).toBe("deny");
    expect(r.code).toBe(1);
  });

  it("a revision without the policy file, or no such revision, is a coded usage error and no decision", () => {
    const { repo, config } = setup();
    const host = JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>;
    for (const policy of [
      { git: "HEAD", path: "trusted/missing.json" },
      { git: "no-such-branch", path: "trusted/asp.policy.json" },
    ]) {
      writeFileSync(config, JSON.stringify({ ...host, policy }));
      const r = gate(repo, config);
      // --json: the error is the one JSON document printed; there is no decision.
      expect((JSON.parse(r.stdout) as { error: { code: string } }).error.code).toBe("ASP_POLICY_SOURCE_UNREADABLE");
      expect(r.stdout).not.toMatch(/"decision"/);
      expect(r.code).toBe(64);
    }
  });

  it("an option-like revision is refused by the configuration's schema", () => {
    const { repo, config } = setup();
    const host = JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>;
    writeFileSync(config, JSON.stringify({ ...host, policy: { git: "--output=/tmp/x", path: "a.json" } }));
    const r = gate(repo, config);
    expect((JSON.parse(r.stdout) as { error: { code: string } }).error.code).toBe("ASP_THS_BAD_CONFIG");
    expect(r.code).toBe(64);
  });
});
