import { readFile } from "node:fs/promises";
import { isAbsolute } from "node:path";
import { runFile } from "@asp/evidence";
import { policyError } from "../errors.js";
import type { PolicySource, PolicyText } from "../source.js";

/** Options of {@link createFilePolicySource}. */
export interface FilePolicySourceOptions {
  /** Absolute path of the trusted policy file, as the composing host configured it. */
  readonly path: string;
}

/**
 * A {@link PolicySource} reading a trusted file. The path must be absolute: a relative path
 * would resolve against whatever directory the host runs in, which may be the candidate
 * repository.
 *
 * @throws PolicyError `ASP_POLICY_UNTRUSTED_SOURCE` for a relative path; `read()` rejects with
 *   `ASP_POLICY_SOURCE_UNREADABLE` when the file cannot be read.
 */
export function createFilePolicySource(options: FilePolicySourceOptions): PolicySource {
  const { path } = options;
  if (typeof path !== "string" || !isAbsolute(path)) {
    throw policyError("ASP_POLICY_UNTRUSTED_SOURCE", "a policy file source needs an absolute path", {
      pointer: "/path",
    });
  }
  return Object.freeze({
    async read(): Promise<PolicyText> {
      try {
        return { text: await readFile(path, "utf8"), origin: { kind: "file" as const, path } };
      } catch (cause) {
        throw policyError(
          "ASP_POLICY_SOURCE_UNREADABLE",
          `cannot read policy file ${path}: ${(cause as NodeJS.ErrnoException).code ?? "error"}`,
          { path },
          { cause },
        );
      }
    },
  });
}

/** Options of {@link createGitPolicySource}. */
export interface GitPolicySourceOptions {
  /** Absolute path of the repository (work tree or bare). */
  readonly repository: string;
  /** The base revision: a branch, tag or commit id of the target branch (e.g. `main`). */
  readonly revision: string;
  /** Path of the policy file inside the revision, relative and normalized. */
  readonly path: string;
  /** The git binary; defaults to `git` on PATH. */
  readonly git?: string;
}

const SAFE_REVISION = /^(?!-)[A-Za-z0-9._/@{}^~-]+$/;
const SAFE_PATH = /^(?!\/)(?!.*\/\/)(?!(?:.*\/)?\.\.?(?:\/|$))[^\0:\\]+(?<!\/)$/;

async function run(git: string, args: ReadonlyArray<string>): Promise<string> {
  // argv array, never a shell string; no textconv or pager, no prompts; no inherited descriptor.
  const { stdout } = await runFile(git, args, {
    maxBuffer: 16 * 1024 * 1024,
    env: { ...process.env, GIT_TERMINAL_PROMPT: "0", GIT_PAGER: "cat", LC_ALL: "C" },
  });
  return stdout.toString("utf8");
}

/**
 * A {@link PolicySource} reading the policy of a base revision: `git rev-parse` pins the
 * revision to a commit, then `git show --no-textconv <commit>:<path>` reads the blob, both run
 * through the real `git` binary with an argv array. The revision is recorded as the exact
 * commit, so the same source read twice reads the same bytes even if the branch moves between.
 *
 * @throws PolicyError `ASP_POLICY_UNTRUSTED_SOURCE` for a relative repository, an option-like or
 *   malformed revision, or a path that is absolute or climbs out; `read()` rejects with
 *   `ASP_POLICY_SOURCE_UNREADABLE` when git fails or the revision has no such file.
 */
export function createGitPolicySource(options: GitPolicySourceOptions): PolicySource {
  const { repository, revision, path } = options;
  const git = options.git ?? "git";
  if (typeof repository !== "string" || !isAbsolute(repository)) {
    throw policyError("ASP_POLICY_UNTRUSTED_SOURCE", "a git policy source needs an absolute repository path", {
      pointer: "/repository",
    });
  }
  if (typeof revision !== "string" || !SAFE_REVISION.test(revision) || revision.includes("..")) {
    throw policyError(
      "ASP_POLICY_UNTRUSTED_SOURCE",
      "the revision must be a branch, tag or commit id (no leading '-', no ranges)",
      { pointer: "/revision" },
    );
  }
  if (typeof path !== "string" || !SAFE_PATH.test(path)) {
    throw policyError("ASP_POLICY_UNTRUSTED_SOURCE", "the policy path must be relative and normalized", {
      pointer: "/path",
    });
  }
  return Object.freeze({
    async read(): Promise<PolicyText> {
      let commit: string;
      try {
        commit = (
          await run(git, [
            "-C",
            repository,
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            `${revision}^{commit}`,
          ])
        ).trim();
      } catch (cause) {
        throw policyError(
          "ASP_POLICY_SOURCE_UNREADABLE",
          `revision ${revision} does not name a commit in ${repository}`,
          { repository, revision },
          { cause },
        );
      }
      try {
        const text = await run(git, ["-C", repository, "show", "--no-textconv", `${commit}:${path}`]);
        return { text, origin: { kind: "git" as const, repository, revision, commit, path } };
      } catch (cause) {
        throw policyError(
          "ASP_POLICY_SOURCE_UNREADABLE",
          `revision ${revision} (${commit.slice(0, 12)}) has no readable ${path}`,
          { repository, revision, commit, path },
          { cause },
        );
      }
    },
  });
}
