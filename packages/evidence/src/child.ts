import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { closedStdio } from "@asp/contracts";

/** Options of {@link runFile}. */
export interface RunFileOptions {
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** The most stdout bytes kept; more fails the run (default 64 MiB). */
  readonly maxBuffer?: number;
}

/** What {@link runFile} resolves with. */
export interface RunFileResult {
  readonly stdout: Buffer;
  readonly stderr: string;
}

/** How {@link runFile} failed: the exit code or signal, and the stderr it printed. */
export interface RunFileError extends Error {
  readonly code?: number | string | null;
  readonly signal?: string | null;
  readonly stderr: string;
}

/**
 * Run `file` with an argv array (never a shell) like `execFile`, except that the child inherits
 * no descriptor of this process but its three pipes: every other number holds `/dev/null`
 * (`closedStdio`, THREAT-MODEL invariant 12: a `git` the host starts runs the repository's hooks
 * and configured commands, and must not hold the store's files). Rejects on a non-zero exit.
 *
 * @example
 * ```ts
 * const { stdout } = await runFile("git", ["rev-parse", "HEAD"], { cwd: repo });
 * ```
 */
export function runFile(file: string, args: readonly string[], options: RunFileOptions = {}): Promise<RunFileResult> {
  const max = options.maxBuffer ?? 64 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    const child = spawn(file, [...args], {
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      env: { ...(options.env ?? process.env) },
      shell: false,
      stdio: closedStdio(fs, ["ignore", "pipe", "pipe"]) as ["ignore", "pipe", "pipe"],
      windowsHide: true,
    });
    const out: Buffer[] = [];
    let size = 0;
    let stderr = "";
    let failure: RunFileError | null = null;
    child.stdout?.on("data", (d: Buffer) => {
      size += d.length;
      if (size > max) {
        failure ??= Object.assign(new Error(`${file}: stdout over ${max} bytes`), {
          code: "ERR_CHILD_MAX_BUFFER",
          stderr,
        });
        child.kill("SIGKILL");
      } else out.push(d);
    });
    child.stderr?.on("data", (d: Buffer) => {
      if (stderr.length < 64 * 1024) stderr += d.toString("utf8");
    });
    child.on("error", (e) => {
      failure ??= Object.assign(e, { stderr });
    });
    child.on("close", (code, signal) => {
      if (failure !== null) reject(Object.assign(failure, { stderr }));
      else if (code !== 0) {
        const e = new Error(
          `${file} ${args.join(" ")} exited with ${signal ?? `code ${code}`}: ${stderr.trim().slice(0, 500)}`,
        );
        reject(Object.assign(e, { code, signal, stderr }));
      } else resolve({ stdout: Buffer.concat(out), stderr });
    });
  });
}
