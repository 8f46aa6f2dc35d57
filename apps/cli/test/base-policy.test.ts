import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DecisionEnvelope } from "@asp/contracts";
import { git } from "@asp/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { exampleCopy, FAKE_AWS_KEY } from "./example-copy.js";
import { REPO_ROOT, runBinary } from "./helpers.js";
import { dropSecrets } from "./weaker-policy.js";

// Issue 17 item 2: trusted policy read from a BASE REVISION of the repository being judged,
// through git, never from its working tree. The attack: the change edits the repository's own
// policy file (here: grants nothing, requires nothing) in the same change that adds a secret. A
// host reading that file would allow; the base-revision source reads the committed bytes.
//
// Issue 32 hole 3 (THREAT-MODEL invariant 14): the revision itself must be one the change cannot
// write. `HEAD~1` is not: a push of two commits (A weakens the policy, B commits a key) is gated
// under A's policy. Only a full commit id pinned by the trusted side, or a remote-tracking ref of
// a protected branch the operator fetched, names the trusted policy.

const POLICY = "trusted/asp.policy.json";
const roots: string[] = [];

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** The demo repository with the example policy committed at `trusted/`; `trusted` is that commit's full id. */
function setup(): { repo: string; config: string; trusted: string } {
  const { root, repo, config } = exampleCopy();
  roots.push(root);
  mkdirSync(join(repo, "trusted"));
  copyFileSync(join(REPO_ROOT, "examples/asp.policy.json"), join(repo, POLICY));
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "trusted policy at the base");
  const trusted = git(repo, "rev-parse", "HEAD").trim();
  configure(config, { git: trusted, path: POLICY });
  return { repo, config, trusted };
}

function configure(config: string, policy: unknown): void {
  const host = JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>;
  writeFileSync(config, JSON.stringify({ ...host, policy }));
}

/** The repository's policy with every requirement dropped (invalid: it is never read). */
function weakenToNothing(repo: string): void {
  const path = join(repo, POLICY);
  const policy = JSON.parse(readFileSync(path, "utf8")) as { requirements: unknown[] };
  policy.requirements = [];
  writeFileSync(path, JSON.stringify(policy, null, 2));
}

function addKey(repo: string): void {
  writeFileSync(join(repo, "src/upload.ts"), `export const AWS_ACCESS_KEY_ID = "${FAKE_AWS_KEY}";\n`);
}

function gate(repo: string, config: string, base = "HEAD"): { code: number | null; stdout: string; stderr: string } {
  return runBinary(["gate", "--json", "--config", config, "--repo", repo, "--base", base]);
}

function errorCode(stdout: string): string {
  return (JSON.parse(stdout) as { error: { code: string } }).error.code;
}

/** The two-commit push of hole 3: A drops the secrets requirement, B commits a key. */
function twoCommitPush(repo: string): void {
  dropSecrets(join(repo, POLICY));
  git(repo, "commit", "-q", "-am", "A: the policy no longer requires secrets");
  addKey(repo);
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "B: a key");
}

describe("trusted policy from a base revision (host config `policy: { git, path }`)", { timeout: 180_000 }, () => {
  it("H7.1 H7.2 the working tree's edit of the policy file is never read: a secret added with a weakened policy is denied", () => {
    const { repo, config } = setup();
    weakenToNothing(repo);
    addKey(repo);
    const r = gate(repo, config);
    expect(r.stderr).not.toMatch(/ASP_THS_UNTRUSTED_LOCATION/);
    const envelope = JSON.parse(r.stdout) as DecisionEnvelope;
    expect(envelope.decision).toBe("deny");
    expect(r.code).toBe(1);
    expect(envelope.findings.map((f) => f.diagnostic.code)).toContain("secrets/aws-access-key-id");
  });

  it("H7.1 a weakened policy committed on top of the base is not read either when the config pins the base", () => {
    const { repo, config } = setup();
    weakenToNothing(repo);
    addKey(repo);
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "the change: weaker policy and a key");
    const r = gate(repo, config, "HEAD~1");
    expect((JSON.parse(r.stdout) as DecisionEnvelope).decision).toBe("deny");
    expect(r.code).toBe(1);
  });

  describe("when the revision is one the change can write (issue 32 hole 3, THREAT-MODEL inv. 14)", () => {
    // Before the fix this gate was ALLOW (exit 0): the policy was read at commit A.
    it("a two-commit push gated with policy HEAD~1 is refused with ASP_THS_POLICY_REVISION_UNTRUSTED, no decision", () => {
      const { repo, config } = setup();
      twoCommitPush(repo);
      configure(config, { git: "HEAD~1", path: POLICY });
      const r = gate(repo, config, "HEAD~2");
      expect(errorCode(r.stdout)).toBe("ASP_THS_POLICY_REVISION_UNTRUSTED");
      expect(r.stdout).not.toMatch(/"decision"/);
      expect(r.code).toBe(64);
      // The next step runs as printed, in the repository.
      expect(JSON.parse(r.stdout).error.message).toContain("git rev-parse refs/remotes/origin/main");
    });

    it("the same push with the policy pinned at the trusted commit id is DENY (the key, and the pending policy)", () => {
      const { repo, config, trusted } = setup();
      twoCommitPush(repo);
      const r = gate(repo, config, trusted);
      const envelope = JSON.parse(r.stdout) as DecisionEnvelope;
      expect(envelope.decision).toBe("deny");
      expect(r.code).toBe(1);
      expect(envelope.findings.map((f) => f.diagnostic.code)).toContain("secrets/aws-access-key-id");
      // host §7, derived by default: commit A's edit of the trusted policy's own path is pending.
      expect(envelope.coverage.degraded.map((d) => d.reason)).toContain("policy-self-authorization");
    });

    it("the same push with the policy at the operator's remote-tracking ref of the protected branch is DENY", () => {
      const { repo, config, trusted } = setup();
      twoCommitPush(repo);
      // What the operator's `git fetch origin main` leaves: origin/main at the reviewed commit.
      git(repo, "update-ref", "refs/remotes/origin/main", trusted);
      configure(config, { git: "refs/remotes/origin/main", path: POLICY });
      const r = gate(repo, config, trusted);
      expect((JSON.parse(r.stdout) as DecisionEnvelope).decision).toBe("deny");
      expect(r.code).toBe(1);
    });

    it("the next step's command prints the id to pin: pinning it is DENY", () => {
      const { repo, config, trusted } = setup();
      git(repo, "update-ref", "refs/remotes/origin/main", trusted);
      twoCommitPush(repo);
      const printed = runGit(repo, ["rev-parse", "refs/remotes/origin/main"]);
      expect(printed).toBe(trusted);
      configure(config, { git: printed, path: POLICY });
      expect((JSON.parse(gate(repo, config, trusted).stdout) as DecisionEnvelope).decision).toBe("deny");
    });
  });

  it("a pinned id without the policy file, or no such commit, is a coded usage error and no decision", () => {
    const { repo, config, trusted } = setup();
    for (const policy of [
      { git: trusted, path: "trusted/missing.json" },
      { git: "0123456789abcdef0123456789abcdef01234567", path: POLICY },
    ]) {
      configure(config, policy);
      const r = gate(repo, config);
      // --json: the error is the one JSON document printed; there is no decision.
      expect(errorCode(r.stdout)).toBe("ASP_POLICY_SOURCE_UNREADABLE");
      expect(r.stdout).not.toMatch(/"decision"/);
      expect(r.code).toBe(64);
    }
  });

  it("an option-like revision is refused by the configuration's schema", () => {
    const { repo, config } = setup();
    configure(config, { git: "--output=/tmp/x", path: "a.json" });
    const r = gate(repo, config);
    expect(errorCode(r.stdout)).toBe("ASP_THS_BAD_CONFIG");
    expect(r.code).toBe(64);
  });
});

function runGit(repo: string, args: string[]): string {
  return git(repo, ...args).trim();
}
