import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { CallSite, Policy, ProviderManifest } from "@asp/contracts";
import { blobDigest } from "@asp/evidence";
import { digestPlugin } from "@asp/plugin-host";
import { afterAll, beforeAll } from "vitest";
import { type ComposedHost, type ComposeHostOptions, composeHost, type FailOpen } from "../src/index.js";

export const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url));

/**
 * A trusted manifest launching `fixtures/<file>.mjs` with node, from the fixtures folder (never the repo).
 * By default its `root` is the fixtures folder and its `digest` that folder's measured tree digest
 * (the plugin digest), so grants are honoured; `root: false` leaves the root out (the digest is
 * then the script's blob digest, which the host cannot verify), `root: "<dir>"` names another one.
 */
export function manifest(
  file: string,
  options: { id?: string; source?: string; args?: string[]; version?: string; root?: string | false } = {},
): ProviderManifest {
  const path = join(FIXTURES, `${file}.mjs`);
  const id = options.id ?? file;
  const source = options.source ?? "fake";
  const root = options.root ?? FIXTURES.replace(/\/$/, "");
  return {
    id,
    version: options.version ?? "1.0.0",
    digest: root === false ? blobDigest(readFileSync(path)) : digestPlugin(root).digest,
    executable: process.execPath,
    args: [path, "--id", id, "--source", source, ...(options.args ?? [])],
    cwd: FIXTURES.replace(/\/$/, ""),
    ...(root === false ? {} : { root }),
    capabilities: ["check"],
    diagnosticSources: [source],
    protocolVersion: "1.0",
  };
}

/**
 * A provider folder of its own (a temp dir holding `provider.mjs`) that runs fixture `file`:
 * what an attacker who controls a provider's folder on disk can rewrite. The manifest pins the
 * folder's measured digest as it is now; `--pidfile` (outside the root) records each launch's pid.
 */
export function rootedProvider(
  file: string,
  options: { id?: string; source?: string; args?: string[] } = {},
): { root: string; script: string; pidFile: string; manifest: ProviderManifest } {
  const root = mkdtempSync(join(tmpdir(), "asp-ths-root-"));
  const script = join(root, "provider.mjs");
  const pidFile = join(mkdtempSync(join(tmpdir(), "asp-ths-pid-")), "pid");
  writeFileSync(
    script,
    [
      'import { writeFileSync } from "node:fs";',
      'const at = process.argv.indexOf("--pidfile");',
      "if (at > 0) writeFileSync(process.argv[at + 1], String(process.pid));",
      `await import(${JSON.stringify(pathToFileURL(join(FIXTURES, `${file}.mjs`)).href)});`,
      "",
    ].join("\n"),
  );
  const base = manifest(file, { ...options, root });
  return {
    root,
    script,
    pidFile,
    manifest: { ...base, args: [script, ...base.args.slice(1), "--pidfile", pidFile] },
  };
}

/** A policy with one requirement per granted provider (requirement id = `req-<provider id>`). */
export function policyFor(
  granted: readonly ProviderManifest[],
  options: {
    callSites?: CallSite[];
    timeoutMs?: number;
    failPolicy?: Policy["failPolicy"];
    extra?: Partial<Policy>;
    quarantineAfterFailures?: number;
  } = {},
): Policy {
  const callSites = options.callSites ?? ["interactive", "gate", "sweep"];
  const t = options.timeoutMs ?? 1500;
  return {
    apiVersion: "asp.policy/v1",
    requirements: granted.map((m) => ({
      id: `req-${m.id}`,
      capability: "check",
      sources: [...m.diagnosticSources],
      callSites,
    })),
    providers: granted.map((m) => ({ id: m.id, version: m.version, digest: m.digest })),
    grants: granted.map((m) => ({
      provider: m.id,
      version: m.version,
      digest: m.digest,
      requirement: `req-${m.id}`,
      callSites,
    })),
    ...(options.failPolicy === undefined ? {} : { failPolicy: options.failPolicy }),
    budgets: {
      timeoutMs: { interactive: t, gate: t, sweep: t },
      callbacksPerRequest: 50,
      callbacksPerSession: 100_000,
      maxResponseBytes: 256 * 1024,
      quarantineAfterFailures: options.quarantineAfterFailures ?? 100,
    },
    ...options.extra,
  };
}

/** A throwaway repository folder with these files. */
export function tempRepo(files: Record<string, string> = { "src/a.ts": "export const a = 1;\n" }): string {
  const dir = mkdtempSync(join(tmpdir(), "asp-ths-repo-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

/** A fixed clock. */
export const fakeClock = { now: () => new Date("2026-01-02T03:04:05.000Z") };

/** Compose a host over an in-memory store with a fake clock, collecting fail-opens. */
export async function testHost(
  options: Partial<ComposeHostOptions> & Pick<ComposeHostOptions, "policy">,
): Promise<{ host: ComposedHost; failOpens: Array<FailOpen & { decisionId: string }> }> {
  const failOpens: Array<FailOpen & { decisionId: string }> = [];
  const host = await composeHost({
    store: "memory:",
    clock: fakeClock,
    timings: { initializeTimeoutMs: 3000, shutdownTimeoutMs: 500, restartBackoffMs: 20, restartBackoffMaxMs: 200 },
    failOpenSink: { log: (e) => failOpens.push(e) },
    ...options,
  });
  return { host, failOpens };
}

/** Can bwrap create the namespaces a launch needs here? (sandbox-bubblewrap probes the same way.) */
export function bwrapRuns(): { ok: boolean; detail: string } {
  const r = spawnSync(
    "bwrap",
    ["--unshare-user", "--unshare-pid", "--unshare-net", "--die-with-parent", "--ro-bind", "/", "/", "true"],
    { encoding: "utf8" },
  );
  if (r.error !== undefined) return { ok: false, detail: `bwrap cannot be run: ${r.error.message}` };
  return r.status === 0 ? { ok: true, detail: "" } : { ok: false, detail: `bwrap fails: ${r.stderr.trim()}` };
}

/**
 * A loopback TCP listener for the file's tests (opened before them, closed after) that counts the
 * connections it gets and drops each: a sandboxed process that connected would show here.
 */
export function connectionCounter(): { readonly port: number; readonly connections: number } {
  const state = { port: 0, connections: 0 };
  let listener: Server | undefined;
  beforeAll(async () => {
    const server = createServer((socket) => {
      state.connections++;
      socket.destroy();
    });
    listener = server;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    state.port = (server.address() as { port: number }).port;
  });
  afterAll(
    () => new Promise<void>((resolve) => (listener === undefined ? resolve() : listener.close(() => resolve()))),
  );
  return state;
}

/**
 * Fresh folders under one temp folder of this test file (removed after its tests):
 * `fresh("store")` is a new, empty `<tmp>/store-<n>`.
 */
export function freshDirs(prefix: string): (name: string) => string {
  const tmp = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  let n = 0;
  return (name) => {
    const dir = join(tmp, `${name}-${n++}`);
    mkdirSync(dir, { recursive: true });
    return dir;
  };
}

export { writeVerifierPlugin } from "@asp/test-utils";
