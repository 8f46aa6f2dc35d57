import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { candidatePolicyPaths, checkPolicyRevision, parseHostConfig } from "../src/index.js";
import { isTrustedPolicyRevision } from "../src/policy-file.js";

const ID = "0123456789abcdef0123456789abcdef01234567";
const ID256 = "0123456789abcdef".repeat(4);

describe("checkPolicyRevision", () => {
  // Issue 32 hole 3 (THREAT-MODEL invariant 14): every form the candidate's checkout can move.
  describe("when the revision is one the change can write", () => {
    it.each([
      "HEAD",
      "@",
      "HEAD~1",
      "HEAD^",
      "HEAD@{1}",
      "main",
      "main~0",
      "main^{commit}",
      "refs/heads/main",
      "refs/tags/v1.0.0",
      "v1.0.0",
      "FETCH_HEAD",
      "ORIG_HEAD",
      "MERGE_HEAD",
      "0123456789ab",
      ID.toUpperCase(),
      `${ID}~1`,
      `${ID}^`,
      `${ID}0`,
      "refs/remotes/origin/main~1",
      "refs/remotes/origin/main^",
      "refs/remotes/origin/main@{1}",
      "refs/remotes/origin/../main",
      "refs/remotes/origin/main.lock",
      "refs/remotes/origin",
      "refs/remotes/origin/.hidden",
    ])("refuses %s in the host configuration with ASP_THS_POLICY_REVISION_UNTRUSTED", (git) => {
      expect(isTrustedPolicyRevision(git)).toBe(false);
      expect(() => parseHostConfig({ store: "s", policy: { git, path: "asp.policy.json" } }, "/x")).toThrowWithCode(
        "ASP_THS_POLICY_REVISION_UNTRUSTED",
      );
    });
  });

  describe("when the trusted side pinned it", () => {
    it.each([ID, ID256, "refs/remotes/origin/main", "refs/remotes/upstream/release/2.x"])("accepts %s", (git) => {
      expect(checkPolicyRevision(git)).toBe(git);
      expect(parseHostConfig({ store: "s", policy: { git, path: "asp.policy.json" } }, "/x").policy).toEqual({
        git,
        path: "asp.policy.json",
      });
    });
  });
});

describe("candidatePolicyPaths (host §7, derived by default)", () => {
  it("assesses a base-revision policy's own path", () => {
    expect(candidatePolicyPaths({ policy: { git: ID, path: ".ci/p.json" }, candidatePolicy: null })).toEqual([
      ".ci/p.json",
    ]);
  });

  it("keeps the base-revision path next to an explicit candidate policy", () => {
    expect(
      candidatePolicyPaths({ policy: { git: ID, path: ".ci/p.json" }, candidatePolicy: "asp.policy.json" }),
    ).toEqual(["asp.policy.json", ".ci/p.json"]);
  });

  it("assesses a policy file's path inside the trusted checkout that holds it, else its name at the root", () => {
    const root = mkdtempSync(join(tmpdir(), "asp-ths-twin-"));
    try {
      const checkout = join(root, "trusted-main");
      mkdirSync(join(checkout, ".git"), { recursive: true });
      mkdirSync(join(checkout, "config"));
      writeFileSync(join(checkout, "config", "asp.policy.json"), "{}");
      expect(
        candidatePolicyPaths({ policy: join(checkout, "config", "asp.policy.json"), candidatePolicy: null }),
      ).toEqual(["config/asp.policy.json"]);
      mkdirSync(join(root, "etc"));
      // Outside any work tree (tmpdir is none): the file name, at the repository root.
      expect(candidatePolicyPaths({ policy: join(root, "etc", "team.policy.json"), candidatePolicy: null })).toEqual([
        "team.policy.json",
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("an explicit candidate policy replaces a policy file's derived twin; false turns every path off", () => {
    expect(candidatePolicyPaths({ policy: "/etc/asp/p.json", candidatePolicy: "asp.policy.json" })).toEqual([
      "asp.policy.json",
    ]);
    expect(candidatePolicyPaths({ policy: { git: ID, path: "p.json" }, candidatePolicy: false })).toEqual([]);
    expect(candidatePolicyPaths({ policy: "/etc/asp/p.json", candidatePolicy: false })).toEqual([]);
  });

  it("the host configuration keeps candidatePolicy false as false", () => {
    expect(parseHostConfig({ store: "s", policy: "p", candidatePolicy: false }, "/x").candidatePolicy).toBe(false);
  });
});
