import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type CliIO, runCli } from "../src/index.js";

/** Run `asp` in-process and capture what it prints. */
export async function runInProcess(
  argv: string[],
  options: { cwd?: string; env?: Record<string, string | undefined> } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const io: CliIO = {
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
    cwd: options.cwd ?? process.cwd(),
    env: options.env ?? {},
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

/** The built binary (the root test command builds before vitest runs). */
export const BIN = fileURLToPath(new URL("../dist/bin.js", import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** Run the built `asp` binary as a real subprocess. */
export function runBinary(argv: string[], cwd = REPO_ROOT): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...argv], { cwd, encoding: "utf8", env: { PATH: process.env.PATH } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
