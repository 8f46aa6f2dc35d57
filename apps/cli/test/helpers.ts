import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ProviderManifest } from "@asp/contracts";
import { digestPlugin } from "@asp/plugin-host";
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

/** The host's fault fixtures: real subprocess providers (see packages/ths/test/fixtures/README.md). */
export const FIXTURES = join(REPO_ROOT, "packages/ths/test/fixtures");

/** A trusted manifest launching `fixtures/<file>.mjs` with node from the fixtures folder, declaring `source`. */
export function fixtureManifest(file: string, source: string, args: readonly string[] = []): ProviderManifest {
  const path = join(FIXTURES, `${file}.mjs`);
  return {
    id: file,
    version: "1.0.0",
    // Pinned to the measured digest of its root, the fixtures folder (host §1: measured integrity).
    digest: digestPlugin(FIXTURES).digest,
    executable: process.execPath,
    args: [path, "--id", file, "--source", source, ...args],
    cwd: FIXTURES,
    root: FIXTURES,
    capabilities: ["check"],
    diagnosticSources: [source],
    protocolVersion: "1.0",
  };
}

/**
 * A temp folder with a host config (own store at `store/`) over these providers, all granted at
 * every call-site, with a per-call-site provider timeout of `timeoutMs` (default 3 s).
 */
export function hostConfig(
  providers: ProviderManifest[],
  timeoutMs = 3000,
): { dir: string; config: string; store: string } {
  const dir = mkdtempSync(join(tmpdir(), "asp-cli-host-"));
  const sites = ["interactive", "gate", "sweep"] as const;
  const policy = {
    apiVersion: "asp.policy/v1",
    requirements: providers.map((m) => ({
      id: `req-${m.id}`,
      capability: "check",
      sources: m.diagnosticSources,
      callSites: sites,
    })),
    providers: providers.map((m) => ({ id: m.id, version: m.version, digest: m.digest })),
    grants: providers.map((m) => ({
      provider: m.id,
      version: m.version,
      digest: m.digest,
      requirement: `req-${m.id}`,
      callSites: sites,
    })),
    budgets: { timeoutMs: { interactive: timeoutMs, gate: timeoutMs, sweep: timeoutMs } },
  };
  writeFileSync(join(dir, "policy.json"), JSON.stringify(policy));
  const config = join(dir, "asp.host.json");
  writeFileSync(config, JSON.stringify({ store: "store", policy: "policy.json", providers }));
  return { dir, config, store: join(dir, "store") };
}

/**
 * The built `asp` as a child process, asynchronously (so a loopback server in the test process
 * can answer it meanwhile), with only PATH and `env` in its environment. `whileRunning` gets the
 * child once it started (e.g. to signal it).
 */
export async function runBinaryAsync(
  argv: string[],
  env: Readonly<Record<string, string>> = {},
  whileRunning?: (child: ChildProcess) => Promise<void>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...argv], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
  });
  void whileRunning?.(child);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (b: Buffer) => {
    stdout += b.toString("utf8");
  });
  child.stderr.on("data", (b: Buffer) => {
    stderr += b.toString("utf8");
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  return { code, stdout, stderr };
}
