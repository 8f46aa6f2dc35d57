import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { git } from "@asp/test-utils";
import { describe, expect, it } from "vitest";
import { loadPolicy, POLICY_TOKENS, type PolicySource } from "../src/index.js";
import { createFilePolicySource, createGitPolicySource } from "../src/node/index.js";
import { basePolicy } from "./fixtures/policies.js";

/** A real repository: main holds the trusted policy, a feature branch edits it. */
function repository(): { dir: string; mainCommit: string } {
  const dir = mkdtempSync(join(tmpdir(), "asp-policy-git-"));
  git(dir, "init", "-q", "-b", "main");
  git(dir, "config", "commit.gpgsign", "false");
  writeFileSync(join(dir, "asp.policy.json"), JSON.stringify(basePolicy(), null, 2));
  // An attacker-controlled textconv in the repository must never run while reading policy.
  writeFileSync(join(dir, ".gitattributes"), "*.json diff=evil\n");
  git(dir, "config", "diff.evil.textconv", "touch PWNED; cat");
  git(dir, "add", ".");
  git(dir, "commit", "-q", "-m", "policy");
  const mainCommit = git(dir, "rev-parse", "HEAD");
  git(dir, "checkout", "-q", "-b", "feature");
  const edited = basePolicy();
  edited.assurance = { gate: "advisory" };
  writeFileSync(join(dir, "asp.policy.json"), JSON.stringify(edited));
  git(dir, "commit", "-q", "-am", "lower assurance");
  return { dir, mainCommit };
}

describe("createGitPolicySource", () => {
  describe("when reading the base revision of a real repository", () => {
    it("H7.1 reads the policy of main, not the checked-out candidate, pinned to the exact commit", async () => {
      const { dir, mainCommit } = repository();
      const policy = await loadPolicy(
        createGitPolicySource({ repository: dir, revision: "main", path: "asp.policy.json" }),
      );
      expect(policy.document.assurance?.gate).toBe("gated");
      expect(policy.origin).toEqual({
        kind: "git",
        repository: dir,
        revision: "main",
        commit: mainCommit,
        path: "asp.policy.json",
      });
      const candidate = await loadPolicy(
        createGitPolicySource({ repository: dir, revision: "feature", path: "asp.policy.json" }),
      );
      expect(candidate.document.assurance?.gate).toBe("advisory");
      expect(existsSync(join(dir, "PWNED"))).toBe(false);
      expect(git(dir, "status", "--porcelain")).toBe("");
    });

    it("rejects with ASP_POLICY_SOURCE_UNREADABLE for an unknown revision or a missing file", async () => {
      const { dir } = repository();
      await expect(
        createGitPolicySource({ repository: dir, revision: "nope", path: "asp.policy.json" }).read(),
      ).rejects.toThrowWithCode("ASP_POLICY_SOURCE_UNREADABLE");
      await expect(
        createGitPolicySource({ repository: dir, revision: "main", path: "missing.json" }).read(),
      ).rejects.toThrowWithCode("ASP_POLICY_SOURCE_UNREADABLE");
    });
  });

  describe("when the options are not trustworthy", () => {
    it.each([
      [{ repository: "relative/repo", revision: "main", path: "p.json" }],
      [{ repository: "/repo", revision: "--output=/tmp/x", path: "p.json" }],
      [{ repository: "/repo", revision: "main..feature", path: "p.json" }],
      [{ repository: "/repo", revision: "main; rm -rf /", path: "p.json" }],
      [{ repository: "/repo", revision: "main", path: "../outside.json" }],
      [{ repository: "/repo", revision: "main", path: "/etc/passwd" }],
      [{ repository: "/repo", revision: "main", path: "a:b.json" }],
    ])("throws ASP_POLICY_UNTRUSTED_SOURCE for %o", (options) => {
      expect(() => createGitPolicySource(options)).toThrowWithCode("ASP_POLICY_UNTRUSTED_SOURCE");
    });
  });
});

describe("createFilePolicySource", () => {
  it("reads a trusted absolute path and records it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "asp-policy-file-"));
    const path = join(dir, "asp.policy.json");
    writeFileSync(path, JSON.stringify(basePolicy()));
    const policy = await loadPolicy(createFilePolicySource({ path }));
    expect(policy.origin).toEqual({ kind: "file", path });
  });

  it("refuses a relative path, and rejects an unreadable file", async () => {
    expect(() => createFilePolicySource({ path: "asp.policy.json" })).toThrowWithCode("ASP_POLICY_UNTRUSTED_SOURCE");
    await expect(createFilePolicySource({ path: "/nonexistent/asp.policy.json" }).read()).rejects.toThrowWithCode(
      "ASP_POLICY_SOURCE_UNREADABLE",
    );
  });
});

describe("POLICY_TOKENS", () => {
  it("uses a global symbol, so two copies of the package agree on the token", () => {
    expect(POLICY_TOKENS.PolicySource).toBe(Symbol.for("asp.policy.PolicySource"));
  });
});

describe("loadPolicy", () => {
  it("activates nothing when the source's text is invalid", async () => {
    const source: PolicySource = {
      read: async () => ({ text: '{"apiVersion":"asp.policy/v1"}', origin: { kind: "inline" } }),
    };
    await expect(loadPolicy(source)).rejects.toThrowWithCode("ASP_POLICY_MISSING_FIELD");
  });
});
