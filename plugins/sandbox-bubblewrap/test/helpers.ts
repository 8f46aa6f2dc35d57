import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { closedStdio, type LaunchResult } from "@asp/contracts";

/** What a launched process printed and how it ended. */
export interface RunOutput {
  readonly status: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Spawn a sandbox's launch the way the host's provider connection does (structured argv, no
 * shell, the launch's own environment, its stdio pipes and /dev/null at every other descriptor
 * number), optionally under a `prefix` command (`setpriv` to run as another user).
 */
export function runLaunch(r: LaunchResult, prefix: readonly string[] = []): Promise<RunOutput> {
  const [exe, ...args] = prefix.length > 0 ? [...prefix, r.executable, ...r.args] : [r.executable, ...r.args];
  return new Promise((resolve) => {
    const child = spawn(exe ?? r.executable, args, {
      cwd: r.cwd,
      env: { ...r.env },
      shell: false,
      stdio: closedStdio(fs) as ["pipe", "pipe", "pipe", ...number[]],
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (c: Buffer) => {
      stdout += c.toString("utf8");
    });
    child.stderr?.on("data", (c: Buffer) => {
      stderr += c.toString("utf8");
    });
    child.stdin?.end();
    child.on("close", (status, signal) => resolve({ status, signal, stdout, stderr }));
  });
}

/** The `[source, dest]` pairs of every `--ro-bind` before the command. */
export function roBinds(args: readonly string[]): string[][] {
  const flags = args.slice(0, args.indexOf("--"));
  return flags.flatMap((f, i) => (f === "--ro-bind" ? [[flags[i + 1] ?? "", flags[i + 2] ?? ""]] : []));
}
