import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AutoRunProjection } from "@asp/auto-mode";
import { git } from "@asp/test-utils";
import { describe, expect, it } from "vitest";
import { AUTO_MODE, autoModeCopy, exampleCopy, FAKE_AWS_KEY } from "./example-copy.js";
import { REPO_ROOT, runBinary } from "./helpers.js";

// Issue 32 hole 2 (critical), THREAT-MODEL invariant 11: the judged after-state holds every file
// the candidate commit (or the index) tracks, whatever ignore files, folder names, markers or name
// bytes the candidate carries. Each trick below turned a committed fake AWS key into ALLOW, for a
// worktree gate and a `--base` gate alike, through the real CLI and the real signed plugins.

const KEY_LINE = `AWS_ACCESS_KEY_ID=${FAKE_AWS_KEY}\n`;

type Trick = {
  readonly name: string;
  /** Lay the trick out in `repo` and commit it (the key is committed; whatever hides it too, where git can hold it). */
  readonly lay: (repo: string) => void;
  /** What the gate must say: a deny finding the key, or a coded refusal for a name the host cannot hold. */
  readonly expect: "deny" | "refused";
};

function write(repo: string, path: string | Buffer, text: string): void {
  const abs = typeof path === "string" ? join(repo, path) : Buffer.concat([Buffer.from(`${repo}/`), path]);
  mkdirSync(join(repo, typeof path === "string" ? join(path, "..") : "."), { recursive: true });
  writeFileSync(abs, text);
}

const commitAll = (repo: string, message: string): void => {
  git(repo, "add", "-A", "-f");
  git(repo, "commit", "-q", "-m", message);
};

const TRICKS: readonly Trick[] = [
  {
    name: "a root .gitignore line naming the tracked file",
    lay: (repo) => {
      write(repo, "creds.env", KEY_LINE);
      write(repo, ".gitignore", "creds.env\n");
      commitAll(repo, "key, hidden by .gitignore");
    },
    expect: "deny",
  },
  {
    name: "a nested .gitignore naming the tracked file",
    lay: (repo) => {
      write(repo, "config/prod.env", KEY_LINE);
      write(repo, "config/.gitignore", "*.env\n");
      commitAll(repo, "key, hidden by a nested .gitignore");
    },
    expect: "deny",
  },
  {
    name: "the file inside a folder named node_modules (no package.json)",
    lay: (repo) => {
      write(repo, "tools/node_modules/cfg/creds.env", KEY_LINE);
      commitAll(repo, "key under node_modules");
    },
    expect: "deny",
  },
  {
    name: "the file inside a folder named .asp (root and nested)",
    lay: (repo) => {
      write(repo, ".asp/creds.env", KEY_LINE);
      write(repo, "lib/.asp/creds.env", KEY_LINE);
      commitAll(repo, "key under .asp");
    },
    expect: "deny",
  },
  {
    name: "an empty file named .git beside the tracked file (a fake nested repository)",
    lay: (repo) => {
      write(repo, "vendor/creds.env", KEY_LINE);
      commitAll(repo, "key in vendor");
      writeFileSync(join(repo, "vendor", ".git"), ""); // in the worktree only: git cannot track it
    },
    expect: "deny",
  },
  {
    name: "a file name with a byte that is not UTF-8",
    lay: (repo) => {
      write(repo, Buffer.from([0x63, 0x72, 0x65, 0x64, 0x73, 0xff, 0x2e, 0x65, 0x6e, 0x76]), KEY_LINE);
      commitAll(repo, "key under a name that is not UTF-8");
    },
    expect: "refused",
  },
];

describe("asp gate judges every tracked file (hole 2)", { timeout: 300_000 }, () => {
  for (const trick of TRICKS) {
    it(`inv. 11: ${trick.name}: ${trick.expect === "deny" ? "DENY" : "a coded refusal"} for the worktree and for --base, never ALLOW`, () => {
      const { repo, config } = exampleCopy();
      const base = git(repo, "rev-parse", "HEAD").trim();
      trick.lay(repo);
      for (const argv of [[], ["--base", base]]) {
        const r = runBinary(["gate", "--config", config, "--repo", repo, ...argv]);
        const all = `${argv.join(" ")}\n${r.stdout}\n${r.stderr}`;
        expect(r.stdout, all).not.toMatch(/^ALLOW/);
        if (trick.expect === "deny") {
          expect(r.stdout, all).toMatch(/^DENY \(gate\)/);
          expect(r.code).toBe(1);
          expect(r.stdout).toContain("secrets");
        } else {
          // A coded failure (input, exit 64) with the code and what to do, never a silent omission.
          expect(r.code, all).toBe(64);
          expect(r.stderr).toContain("ASP_EVIDENCE_UNREPRESENTABLE_NAME");
        }
        expect(r.stdout + r.stderr).not.toContain(FAKE_AWS_KEY);
      }
    });
  }

  it("an untracked file that .gitignore names is not part of the change: the gate allows", () => {
    const { repo, config } = exampleCopy();
    write(repo, ".gitignore", "local.env\n");
    commitAll(repo, "ignore local.env");
    write(repo, "local.env", KEY_LINE);
    const r = runBinary(["gate", "--config", config, "--repo", repo, "--base", "HEAD"]);
    expect(r.stdout, r.stderr).toMatch(/^ALLOW \(gate\)/);
    // Reported, never silent: what the snapshot left out is on the decision (and in --json).
    expect(r.stdout).toMatch(/^left out: 1 untracked files or folders/m);
    const json = runBinary(["gate", "--json", "--config", config, "--repo", repo, "--base", "HEAD"]);
    expect(JSON.parse(json.stdout).judged).toEqual({ leftOut: 1, submodules: [] });
  });
});

describe("asp auto run judges every file the agent left (hole 2, Auto Mode)", { timeout: 120_000 }, () => {
  it("inv. 11: a leaking file plus a .gitignore line naming it never ends Verified", () => {
    const { repo, config } = autoModeCopy([join(REPO_ROOT, "plugins", "verifier-host-checks", "dist", "plugin")], {
      autoMode: AUTO_MODE,
    });
    write(repo, "leak.env", KEY_LINE);
    write(repo, ".gitignore", "leak.env\n");
    const r = runBinary([
      "auto",
      "run",
      "--engine",
      "scripted",
      "--reviewer",
      "host-checks",
      "--json",
      "--config",
      config,
      repo,
    ]);
    const projection = JSON.parse(r.stdout || "null") as AutoRunProjection;
    // Before the fix: verified, with .gitignore as its only artifact.
    expect(projection.state).not.toBe("verified");
    expect(projection.candidate?.artifact_versions.map((a) => a.artifact_id).sort()).toEqual([
      ".gitignore",
      "leak.env",
    ]);
  });
});
