import { execFileSync } from "node:child_process";

/**
 * Run real git in `repo` with a fixed author and committer, and return its trimmed stdout.
 * Tests build real repositories with it (never a fake git).
 * @throws the child process error when git exits non-zero.
 */
export function git(repo: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd: repo,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@t",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@t",
    },
  }).trim();
}
