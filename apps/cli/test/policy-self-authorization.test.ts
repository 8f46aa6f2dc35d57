import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DecisionEnvelope } from "@asp/contracts";
import { git } from "@asp/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { exampleCopy } from "./example-copy.js";
import { REPO_ROOT, runBinary } from "./helpers.js";
import { dropSecrets } from "./weaker-policy.js";

// Issue 32, audit of host §7: a change that loosens the trusted policy at its own path in the
// repository is self-authorization, whether or not trusted configuration names a
// `candidatePolicy`. Before the fix, a host configuration without `candidatePolicy` assessed
// nothing: each loosening below was ALLOW (exactly what `"candidatePolicy": false` still does,
// asserted as the control).

const EXAMPLE_POLICY = join(REPO_ROOT, "examples/asp.policy.json");
const roots: string[] = [];

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function configure(config: string, fields: Record<string, unknown>): void {
  const host = JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>;
  writeFileSync(config, JSON.stringify({ ...host, ...fields }));
}

function gate(repo: string, config: string): { code: number | null; envelope: DecisionEnvelope } {
  const r = runBinary(["gate", "--json", "--config", config, "--repo", repo, "--base", "HEAD"]);
  return { code: r.code, envelope: JSON.parse(r.stdout) as DecisionEnvelope };
}

/** The demo repository with the example policy committed at `path` (its own copy, the twin). */
function repoWithPolicyAt(path: string): { root: string; repo: string; config: string } {
  const copy = exampleCopy();
  roots.push(copy.root);
  mkdirSync(join(copy.repo, path, ".."), { recursive: true });
  copyFileSync(EXAMPLE_POLICY, join(copy.repo, path));
  git(copy.repo, "add", "-A");
  git(copy.repo, "commit", "-q", "-m", "the repository's own policy");
  return copy;
}

function expectSelfAuthorization(r: { code: number | null; envelope: DecisionEnvelope }): void {
  expect(r.envelope.decision).toBe("deny");
  expect(r.code).toBe(1);
  expect(r.envelope.coverage.degraded.map((d) => d.reason)).toContain("policy-self-authorization");
}

function expectAllow(r: { code: number | null; envelope: DecisionEnvelope }): void {
  expect(r.envelope.decision).toBe("allow");
  expect(r.code).toBe(0);
}

describe("host §7 self-authorization, derived from trusted configuration", { timeout: 180_000 }, () => {
  describe("when the trusted policy is read at a base revision (`policy: { git, path }`)", () => {
    it("a change loosening the policy at `path` is policy-self-authorization, never allow", () => {
      const { repo, config } = repoWithPolicyAt("trusted/asp.policy.json");
      const trusted = git(repo, "rev-parse", "HEAD").trim();
      configure(config, { policy: { git: trusted, path: "trusted/asp.policy.json" } });
      dropSecrets(join(repo, "trusted/asp.policy.json"));
      expectSelfAuthorization(gate(repo, config));
      // Control: the old default (no candidate policy assessed) let it through.
      configure(config, { candidatePolicy: false });
      expectAllow(gate(repo, config));
    });
  });

  describe("when the trusted policy is a file", () => {
    it("a change loosening its repo-relative twin (its path in the trusted checkout) is policy-self-authorization", () => {
      const { root, repo, config } = repoWithPolicyAt("config/asp.policy.json");
      // The operator's trusted checkout of the protected branch, outside the repository.
      const checkout = join(root, "trusted-main");
      mkdirSync(join(checkout, "config"), { recursive: true });
      git(checkout, "init", "-q");
      copyFileSync(EXAMPLE_POLICY, join(checkout, "config/asp.policy.json"));
      configure(config, { policy: join(checkout, "config/asp.policy.json") });
      dropSecrets(join(repo, "config/asp.policy.json"));
      expectSelfAuthorization(gate(repo, config));
      configure(config, { candidatePolicy: false });
      expectAllow(gate(repo, config));
    });

    it("outside any checkout, the twin is its file name at the repository root; an edit that loosens nothing is allow", () => {
      const { root, repo, config } = repoWithPolicyAt("asp.policy.json");
      mkdirSync(join(root, "etc"));
      copyFileSync(EXAMPLE_POLICY, join(root, "etc/asp.policy.json"));
      configure(config, { policy: join(root, "etc/asp.policy.json") });
      // Only a description changed: a plain change, not an attempt (no false deny).
      const file = join(repo, "asp.policy.json");
      writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, "utf8")), description: "reworded" }));
      expectAllow(gate(repo, config));
      dropSecrets(file);
      expectSelfAuthorization(gate(repo, config));
    });
  });
});
