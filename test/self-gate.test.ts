import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ROOT } from "./lib/workspace.js";

// Issue 32 hole 3 (THREAT-MODEL invariant 14): .ci/self-gate reads its trusted policy at a commit
// the submission cannot write when the CI gives it one, and says so when it cannot. The choice
// is .ci/self-gate-trusted's, run here in real git repositories (the full self-gate builds the
// plugins at that commit and takes minutes; `.ci/run` runs it).

const SCRIPT = join(ROOT, ".ci/self-gate-trusted");
const IDENTITY = { GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@t", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@t" };

function git(repo: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd: repo, encoding: "utf8", env: { ...process.env, ...IDENTITY } });
}
const roots: string[] = [];

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A repository with `commits` commits; returns their full ids, oldest first. */
function repoWith(commits: number): { repo: string; ids: string[] } {
  const repo = mkdtempSync(join(tmpdir(), "asp-self-gate-"));
  roots.push(repo);
  git(repo, "init", "-q", "-b", "main");
  const ids: string[] = [];
  for (let i = 0; i < commits; i++) {
    writeFileSync(join(repo, "f.txt"), `${i}\n`);
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", `c${i}`);
    ids.push(git(repo, "rev-parse", "HEAD").trim());
  }
  return { repo, ids };
}

function trusted(repo: string, env: Record<string, string> = {}): { code: number | null; out: string; err: string } {
  const r = spawnSync("bash", [SCRIPT], {
    cwd: repo,
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: repo, ...env },
  });
  return { code: r.status, out: r.stdout.trim(), err: r.stderr };
}

describe(".ci/self-gate-trusted", () => {
  describe("when the CI pins the trusted commit (ASP_SELF_GATE_POLICY_REV)", () => {
    it("uses exactly that full commit id, whatever the submission's history", () => {
      const { repo, ids } = repoWith(4);
      expect(trusted(repo, { ASP_SELF_GATE_POLICY_REV: ids[0] as string })).toEqual({
        code: 0,
        out: `${ids[0]} pinned`,
        err: "",
      });
    });

    it.each(["HEAD~1", "HEAD", "main", "refs/remotes/origin/main", "0123456789ab"])(
      "refuses %s (not a full commit id) with exit 64 and the command that resolves one",
      (rev) => {
        const { repo } = repoWith(2);
        const r = trusted(repo, { ASP_SELF_GATE_POLICY_REV: rev });
        expect(r.code).toBe(64);
        expect(r.out).toBe("");
        expect(r.err).toContain("ASP_SELF_GATE_POLICY_REV=$(git rev-parse refs/remotes/origin/main) .ci/self-gate");
      },
    );

    it("refuses a full id this clone does not hold (exit 64)", () => {
      const { repo } = repoWith(2);
      const r = trusted(repo, { ASP_SELF_GATE_POLICY_REV: "0123456789abcdef0123456789abcdef01234567" });
      expect(r.code).toBe(64);
      expect(r.err).toContain("git fetch origin 0123456789abcdef0123456789abcdef01234567");
    });
  });

  describe("when the protected branch was fetched (refs/remotes/origin/main)", () => {
    it("trusts the merge-base, not HEAD~1: a two-commit push cannot move it", () => {
      const { repo, ids } = repoWith(4);
      git(repo, "update-ref", "refs/remotes/origin/main", ids[1] as string);
      expect(trusted(repo).out).toBe(`${ids[1]} protected`);
    });

    it("falls back to HEAD~1 when origin/main is HEAD itself (the clone of the submission)", () => {
      const { repo, ids } = repoWith(3);
      git(repo, "update-ref", "refs/remotes/origin/main", ids[2] as string);
      expect(trusted(repo).out).toBe(`${ids[1]} parent`);
    });
  });

  describe("when nothing trusted is given", () => {
    it("resolves HEAD~1 to its full id and says it is the parent (not candidate-proof)", () => {
      const { repo, ids } = repoWith(3);
      expect(trusted(repo)).toEqual({ code: 0, out: `${ids[1]} parent`, err: "" });
    });

    it("exits 3 (nothing to gate) on the first commit", () => {
      const { repo } = repoWith(1);
      expect(trusted(repo).code).toBe(3);
    });
  });

  it("refuses the retired ASP_SELF_GATE_BASE (exit 64) instead of ignoring it", () => {
    const { repo } = repoWith(2);
    const r = trusted(repo, { ASP_SELF_GATE_BASE: "origin/main" });
    expect(r.code).toBe(64);
    expect(r.err).toContain("ASP_SELF_GATE_POLICY_REV");
  });
});
