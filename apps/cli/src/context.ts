import { readFileSync } from "node:fs";

/** Where the CLI writes; injected so tests can capture output without spawning. */
export interface CliIO {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly cwd: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** What every command receives. */
export interface CliContext {
  readonly io: CliIO;
  /** True when `--json` was given: print one JSON document on stdout, nothing else. */
  json(): boolean;
  /** Print a result: `human` for people, `machine` as JSON under `--json`. */
  print(human: string, machine: unknown): void;
  /** Set the process exit code the command ends with. */
  setExit(code: number): void;
}

/** The CLI's own version, read from its package.json (works from src/ and dist/). */
export function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
  return pkg.version;
}
