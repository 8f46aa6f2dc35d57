import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProviderManifest, ProviderState } from "@asp/contracts";
import { afterEach, describe, expect, it } from "vitest";
import type { ComposedHost } from "../src/index.js";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// issue 32 audit, host §2 (H2a.5): every transition of the provider supervisor's lifecycle,
// driven with real subprocess fake providers and read back through `host/status`. Transient
// phases (initializing, active, shutting_down) are observed while `fake-lifecycle` holds the
// host's request (it answers only once the test releases it), so no observation depends on
// timing. Restart backoff is set far beyond the test so no background restart moves a state
// between the call and the observation.
//
// `launched` is not in any sequence: the supervisor sets it and replaces it with `initializing`
// in the same synchronous step, so no status read can show it (reported in the register row).

const NO_RESTART = { restartBackoffMs: 600_000, restartBackoffMaxMs: 600_000 };
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Wait until `path` exists (a safety net of 30 s, never an assertion on time). */
async function waitFile(path: string): Promise<void> {
  for (let i = 0; i < 3000 && !existsSync(path); i++) await new Promise((r) => setTimeout(r, 10));
  if (!existsSync(path)) throw new Error(`${path} never appeared`);
}

interface Scene {
  readonly host: ComposedHost;
  readonly repo: string;
  readonly dir: string;
  /** Record the provider's state (and its check family's) as `host/status` shows it now. */
  observe(): void;
  readonly seen: ProviderState[];
  readonly families: Array<ProviderState | undefined>;
  release(phase: "initialize" | "assess" | "shutdown"): void;
  held(phase: "initialize" | "assess" | "shutdown"): Promise<void>;
}

async function scene(
  build: (dir: string) => ProviderManifest,
  options: { timeoutMs?: number; initializeTimeoutMs?: number; quarantineAfterFailures?: number } = {},
): Promise<Scene> {
  const dir = tempDir("asp-lifecycle-");
  const provider = build(dir);
  const policy = policyFor([provider], {
    timeoutMs: options.timeoutMs ?? 30_000,
    ...(options.quarantineAfterFailures === undefined
      ? {}
      : { quarantineAfterFailures: options.quarantineAfterFailures }),
  });
  const { host } = await testHost({
    policy,
    providers: [provider],
    warm: false,
    timings: { initializeTimeoutMs: options.initializeTimeoutMs ?? 30_000, shutdownTimeoutMs: 30_000, ...NO_RESTART },
  });
  cleanups.push(() => host.close());
  const repo = tempRepo({ "src/a.ts": "export const a = 1;\n" });
  cleanups.push(() => rmSync(repo, { recursive: true, force: true }));
  const seen: ProviderState[] = [];
  const families: Array<ProviderState | undefined> = [];
  return {
    host,
    repo,
    dir,
    seen,
    families,
    observe() {
      const s = host.status().providers[0];
      if (s === undefined) throw new Error("no provider in host/status");
      seen.push(s.state);
      families.push(s.families.check);
    },
    release: (phase) => writeFileSync(join(dir, `${phase}.go`), "go"),
    held: (phase) => waitFile(join(dir, `${phase}.seen`)),
  };
}

const lifecycle =
  (hold: string, extra: string[] = []) =>
  (dir: string) =>
    manifest("fake-lifecycle", { source: "ts", args: ["--dir", dir, "--hold", hold, ...extra] });

describe("H2a.5 the provider lifecycle, transition by transition (host status)", () => {
  it("H2a.5 H2a.6 host §2: exited → initializing → initialized → active → initialized → shutting_down → exited (the check family too)", async () => {
    const s = await scene(lifecycle("initialize,assess,shutdown"));
    s.observe();
    const warming = s.host.warm(30_000);
    await s.held("initialize");
    s.observe();
    s.release("initialize");
    await warming;
    s.observe();
    const checking = s.host.gate({ repo: s.repo });
    await s.held("assess");
    s.observe();
    s.release("assess");
    const { envelope } = await checking;
    expect(envelope.decision).toBe("allow");
    s.observe();
    const closing = s.host.close();
    await s.held("shutdown");
    s.observe();
    s.release("shutdown");
    await closing;
    s.observe();
    expect(s.seen).toEqual([
      "exited",
      "initializing",
      "initialized",
      "active",
      "initialized",
      "shutting_down",
      "exited",
    ]);
    // The check family follows the provider through every phase.
    expect(s.families).toEqual(s.seen);
  });

  // From a warm, initialized provider, one request: what the request's failure makes of it.
  const fromActive: Array<{
    to: ProviderState;
    fixture: (dir: string) => ProviderManifest;
    drive: (s: Scene) => Promise<void>;
    timeoutMs?: number;
    quarantineAfterFailures?: number;
  }> = [
    {
      to: "cancelled",
      fixture: lifecycle("assess"),
      drive: async (s) => {
        const abort = new AbortController();
        const checking = s.host.gate({ repo: s.repo, signal: abort.signal });
        await s.held("assess");
        s.observe();
        abort.abort();
        // The cancelled session is retired (killed): read the state while it is `cancelled`, before
        // the exit of the killed process moves it on (when that lands depends on the machine's load).
        for (let i = 0; i < 10_000 && s.host.status().providers[0]?.state !== "cancelled"; i++) {
          await new Promise((r) => setImmediate(r));
        }
        s.observe();
        await checking;
      },
    },
    {
      to: "timed_out",
      timeoutMs: 4000,
      fixture: lifecycle("assess"),
      // Never released: the request was in flight (assess.seen) when its budget ran out.
      drive: async (s) => {
        await s.host.gate({ repo: s.repo });
        expect(existsSync(join(s.dir, "assess.seen"))).toBe(true);
      },
    },
    { to: "crashed", fixture: () => manifest("fake-crash-mid", { source: "ts" }), drive: (s) => gateOnce(s) },
    { to: "malformed", fixture: () => manifest("fake-non-json", { source: "ts" }), drive: (s) => gateOnce(s) },
    { to: "degraded", fixture: () => manifest("fake-stale", { source: "ts" }), drive: (s) => gateOnce(s) },
    {
      to: "quarantined",
      quarantineAfterFailures: 1,
      fixture: () => manifest("fake-error", { source: "ts" }),
      drive: (s) => gateOnce(s),
    },
  ];
  const gateOnce = async (s: Scene): Promise<void> => {
    await s.host.gate({ repo: s.repo });
  };

  it.each(fromActive)("H2a.5 host §2: initialized → active → $to", async (row) => {
    const s = await scene(row.fixture, {
      ...(row.timeoutMs === undefined ? {} : { timeoutMs: row.timeoutMs }),
      ...(row.quarantineAfterFailures === undefined ? {} : { quarantineAfterFailures: row.quarantineAfterFailures }),
    });
    await s.host.warm(30_000);
    s.observe();
    await row.drive(s);
    if (row.to === "cancelled") {
      // `cancelled` also shows the held request as active; what the retired session becomes after is not this row's.
      expect(s.seen).toEqual(["initialized", "active", "cancelled"]);
      expect(s.families.at(-1)).toBe("cancelled");
      return;
    }
    s.observe();
    expect(s.seen).toEqual(["initialized", row.to]);
    expect(s.families.at(-1)).toBe(row.to);
  });

  // From a cold host, the launch itself: what a failed start makes of the provider.
  const fromStart: Array<{
    to: ProviderState;
    fixture: (dir: string) => ProviderManifest;
    initializeTimeoutMs?: number;
  }> = [
    { to: "crashed", fixture: () => manifest("fake-crash-start", { source: "ts" }) },
    { to: "incompatible", fixture: () => manifest("fake-incompatible", { source: "ts" }) },
    {
      to: "malformed",
      fixture: () => manifest("fake-claims-conformance", { source: "ts", args: ["--claim", "initialize"] }),
    },
    // Held at initialize and never released: the initialize deadline passes.
    { to: "timed_out", initializeTimeoutMs: 4000, fixture: lifecycle("initialize") },
    {
      to: "unavailable",
      fixture: (dir) => ({ ...manifest("fake-honest-ts", { source: "ts" }), executable: join(dir, "no-such-node") }),
    },
  ];

  it.each(fromStart)("H2a.5 host §2: exited → initializing → $to", async (row) => {
    const s = await scene(row.fixture, {
      ...(row.initializeTimeoutMs === undefined ? {} : { initializeTimeoutMs: row.initializeTimeoutMs }),
    });
    s.observe();
    await s.host.warm(30_000);
    s.observe();
    expect(s.seen).toEqual(["exited", row.to]);
    if (row.to === "timed_out") expect(existsSync(join(s.dir, "initialize.seen"))).toBe(true);
    // A start that failed is never a provider that served: a gate on it is not allow.
    const { envelope } = await s.host.gate({ repo: s.repo });
    expect(envelope.decision).not.toBe("allow");
  });

  it("H2a.5 host §2: crashed → initializing → initialized (a restart serves the next request)", async () => {
    const dir = tempDir("asp-lifecycle-restart-");
    const provider = manifest("fake-lifecycle", {
      source: "ts",
      args: ["--crash-once", join(dir, "crashed"), "--launch-log", join(dir, "launches")],
    });
    const { host } = await testHost({
      policy: policyFor([provider], { timeoutMs: 30_000 }),
      providers: [provider],
      timings: { initializeTimeoutMs: 30_000, shutdownTimeoutMs: 30_000, restartBackoffMs: 0, restartBackoffMaxMs: 0 },
    });
    cleanups.push(() => host.close());
    const repo = tempRepo({ "src/a.ts": "export const a = 1;\n" });
    cleanups.push(() => rmSync(repo, { recursive: true, force: true }));
    const first = await host.gate({ repo });
    expect(first.envelope.coverage.degraded).toEqual([
      expect.objectContaining({ provider: provider.id, reason: "crashed", providerState: "crashed" }),
    ]);
    const second = await host.gate({ repo });
    expect(second.envelope.decision).toBe("allow");
    expect(host.status().providers[0]?.state).toBe("initialized");
    expect(readFileSync(join(dir, "launches"), "utf8").trim().split("\n")).toHaveLength(2);
  });
});
