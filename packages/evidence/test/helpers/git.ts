import { execFileSync } from "node:child_process";

/** Run git with an argv array (never a shell) in `cwd`, with a fixed identity. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync(
    "git",
    ["-c", "user.name=ASP Test", "-c", "user.email=test@asp.local", "-c", "commit.gpgsign=false", ...args],
    {
      cwd,
      encoding: "utf8",
      env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: cwd },
    },
  );
}

/** `git init`, add everything, commit; returns the commit id. */
export function commitAll(cwd: string, message = "snapshot"): string {
  git(cwd, "init", "-q", "-b", "main");
  git(cwd, "add", "-A");
  git(cwd, "commit", "-q", "--allow-empty", "-m", message);
  return git(cwd, "rev-parse", "HEAD").trim();
}
