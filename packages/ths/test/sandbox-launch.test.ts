import { cpSync, existsSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { DecisionEnvelope, Policy, ProviderManifest } from "@asp/contracts";
import { digestPlugin, PluginError, type Sandbox } from "@asp/plugin-host";
import { describe, expect, it } from "vitest";
import { type ComposedHost, composeHost, THS_TOKENS } from "../src/index.js";
import {
  bwrapRuns,
  connectionCounter,
  FIXTURES,
  fakeClock,
  freshDirs,
  manifest,
  policyFor,
  tempRepo,
} from "./helpers.js";

// host §3 / THREAT-MODEL invariant 6: a provider that tries to write the worktree, read the store,
// open a socket or spawn a process that writes outside fails at each under sandbox-bubblewrap
// (the test states the mode it ran in), and the gate still decides on its answer; without a
// sandbox the same provider is reported advisory with direct-write risk, and the worktree
// re-check catches its write.

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** The real, built and signed sandbox plugin (`pnpm build`), signed by the example key. */
const SANDBOX = join(ROOT, "plugins", "sandbox-bubblewrap", "dist", "plugin");
const TRUST_ROOT = join(ROOT, "examples", "keys", "example.key.pub");
const SANDBOX_ID = "asp.sandbox-bubblewrap";

const bwrap = bwrapRuns();
const skipWithoutBwrap = !bwrap.ok && process.env.ASP_TEST_NO_BWRAP === "1";
if (skipWithoutBwrap) {
  process.stderr.write(`sandbox-launch.test: SKIPPING the bubblewrap tests (ASP_TEST_NO_BWRAP=1): ${bwrap.detail}\n`);
}

const fresh = freshDirs("asp-ths-sandbox-");

/**
 * A provider folder that holds everything it runs (the fixture, its plumbing and vscode-jsonrpc):
 * under bubblewrap nothing outside its read-only copy and the runtime exists, so the module
 * resolution through parent folders the plain fixtures rely on is gone.
 */
function selfContained(file: string, args: string[]): ProviderManifest {
  const root = fresh("provider");
  cpSync(join(FIXTURES, `${file}.mjs`), join(root, `${file}.mjs`));
  cpSync(join(FIXTURES, "lib"), join(root, "lib"), { recursive: true });
  const jsonrpc = realpathSync(join(FIXTURES, "..", "..", "node_modules", "vscode-jsonrpc"));
  cpSync(jsonrpc, join(root, "node_modules", "vscode-jsonrpc"), { recursive: true, dereference: true });
  const base = manifest(file, { source: "secrets", root, args });
  return { ...base, args: [join(root, `${file}.mjs`), ...base.args.slice(1)], cwd: root };
}

/** A sandbox as plugin-host hands it to the host (verified identity + methods), for the launch-path tests. */
function fakeSandbox(id: string, fill: string, launch: NonNullable<Sandbox["launch"]>): Sandbox {
  return { id, version: "1.0.0", digest: `sha256:${fill.repeat(64)}`, capabilities: ["sandbox:bubblewrap"], launch };
}

const hex = (s: string): string => Buffer.from(s).toString("hex");

/** The policy granting `provider`, plus the sandbox plugin's grant when `sandboxed`. */
function policyWith(provider: ProviderManifest, sandboxed: boolean): Policy {
  const p = policyFor([provider], { timeoutMs: 8000 });
  return sandboxed
    ? {
        ...p,
        plugins: [{ id: SANDBOX_ID, digest: digestPlugin(SANDBOX).digest, capabilities: ["sandbox:bubblewrap"] }],
      }
    : p;
}

function host(
  provider: ProviderManifest,
  store: string,
  sandboxed: boolean,
  pluginOptions?: Record<string, unknown>,
): Promise<ComposedHost> {
  return composeHost({
    store,
    policy: policyWith(provider, sandboxed),
    providers: [provider],
    ...(sandboxed ? { plugins: [SANDBOX], trustRoots: [TRUST_ROOT] } : {}),
    ...(pluginOptions === undefined ? {} : { pluginOptions }),
    clock: fakeClock,
    timings: { initializeTimeoutMs: 8000, shutdownTimeoutMs: 500, restartBackoffMs: 20, restartBackoffMaxMs: 200 },
    failOpenSink: { log() {} },
  });
}

const escapes = (e: DecisionEnvelope): string[] =>
  e.findings.map((f) => f.diagnostic.code).filter((c) => c.includes("/escape-"));
const reasons = (e: DecisionEnvelope): string[] => e.coverage.degraded.map((d) => d.reason);
const modeOf = (e: DecisionEnvelope, id: string) => e.assurance.providers?.find((p) => p.provider === id);

const net = connectionCounter();

/** One attack: its flags, given the repo and store of the run, and what proves it escaped. */
interface Attack {
  readonly name: "write" | "read" | "net" | "spawn";
  readonly target: (ctx: { repo: string; store: string; marker: string }) => string;
}
const ATTACKS: readonly Attack[] = [
  { name: "write", target: ({ repo }) => join(repo, "src", "a.ts") },
  { name: "read", target: ({ store }) => store },
  { name: "net", target: () => String(net.port) },
  { name: "spawn", target: ({ marker }) => marker },
];

async function run(attack: Attack, sandboxed: boolean) {
  const repo = tempRepo({ "src/a.ts": "export const a = 1;\n" });
  const store = join(fresh("store"), "store");
  const marker = join(fresh("marker"), "escaped");
  const provider = selfContained("fake-escape", [
    "--attack",
    attack.name,
    "--target-hex",
    hex(attack.target({ repo, store, marker })),
  ]);
  const before = net.connections;
  const h = await host(provider, store, sandboxed);
  try {
    const { envelope, receipt } = await h.gate({ repo });
    return {
      envelope,
      receipt,
      id: provider.id,
      wrote: readFileSync(join(repo, "src", "a.ts"), "utf8").includes("injected"),
      connected: net.connections > before,
      marked: existsSync(marker),
    };
  } finally {
    await h.close();
  }
}

describe("providers launched through sandbox-bubblewrap", () => {
  it.runIf(!bwrap.ok && !skipWithoutBwrap)("bubblewrap runs on this machine (set ASP_TEST_NO_BWRAP=1 to skip)", () => {
    throw new Error(
      `the sandbox tests need a working bwrap (apt-get install -y bubblewrap): ${bwrap.detail}; set ASP_TEST_NO_BWRAP=1 to skip them`,
    );
  });

  describe.skipIf(!bwrap.ok)("when bwrap can create namespaces", () => {
    for (const attack of ATTACKS) {
      it(`H3.2 H6.8 H10.3 host §3: a provider that tries to ${attack.name} fails under bubblewrap (isolated) and the gate decides on its answer`, async () => {
        const r = await run(attack, true);
        // The mode it ran in.
        expect(modeOf(r.envelope, r.id)).toMatchObject({
          mode: "isolated",
          directWrite: false,
          sandbox: { id: SANDBOX_ID, digest: digestPlugin(SANDBOX).digest },
        });
        expect(r.envelope.assurance).toMatchObject({ mode: "isolated", directWriteRisk: false });
        expect(r.envelope.authority.find((a) => a.providerId === r.id)?.isolation).toBe("verified");
        // Nothing escaped, and the decision is the provider's honest answer.
        expect({ wrote: r.wrote, connected: r.connected, marked: r.marked }).toEqual({
          wrote: false,
          connected: false,
          marked: false,
        });
        expect(escapes(r.envelope)).toEqual([]);
        expect(r.envelope.decision).toBe("allow");
        expect(r.envelope.coverage.ran).toEqual([`req-${r.id}`]);
        // The receipt records the same per-provider assurance.
        expect(r.receipt.assurance).toEqual(r.envelope.assurance);
      }, 30_000);
    }

    it("H3.2 host §3: the provider's gate answer still decides under bubblewrap (a finding denies)", async () => {
      const repo = tempRepo({ "src/a.ts": "const key = 'ASP-MARKER';\n" });
      const provider = selfContained("fake-escape", ["--attack", "none"]);
      const h = await host(provider, join(fresh("store"), "store"), true);
      try {
        const { envelope } = await h.gate({ repo });
        expect(modeOf(envelope, provider.id)?.mode).toBe("isolated");
        expect(envelope.decision).toBe("deny");
        expect(envelope.findings.map((f) => f.diagnostic.code)).toEqual(["secrets/marker"]);
      } finally {
        await h.close();
      }
    }, 30_000);
  });
});

describe("providers launched without a sandbox plugin", () => {
  for (const attack of ATTACKS) {
    it(`H3.3 host §3: the same ${attack.name} attack succeeds, reported advisory with direct-write risk, and never allows`, async () => {
      const r = await run(attack, false);
      expect(modeOf(r.envelope, r.id)).toMatchObject({
        mode: "advisory",
        directWrite: true,
        sandbox: null,
        mechanism: "plain subprocess",
      });
      expect(modeOf(r.envelope, r.id)?.reason).toContain("no sandbox plugin");
      expect(r.envelope.assurance).toMatchObject({ mode: "gated", directWriteRisk: true });
      expect(r.envelope.authority.find((a) => a.providerId === r.id)?.isolation).toBe("unverified");
      expect(r.envelope.decision).not.toBe("allow");
      if (attack.name === "write") {
        // invariant 6: the worktree re-check catches the write.
        expect(r.wrote).toBe(true);
        expect(reasons(r.envelope)).toContain("worktree-changed");
      } else {
        expect(escapes(r.envelope)).toEqual([`secrets/escape-${attack.name}`]);
        if (attack.name === "net") expect(r.connected).toBe(true);
        if (attack.name === "spawn") expect(r.marked).toBe(true);
      }
    }, 30_000);
  }
});

/** A host over `provider` whose only sandbox is `sandbox` (in place of the verified plugins). */
function hostWith(
  sandbox: Sandbox,
  provider: ProviderManifest,
  options: { store?: string; warm?: boolean } = {},
): Promise<ComposedHost> {
  return composeHost({
    store: options.store ?? "memory:",
    policy: policyFor([provider]),
    providers: [provider],
    clock: fakeClock,
    failOpenSink: { log() {} },
    warm: options.warm ?? true,
    register: (c) => c.register(THS_TOKENS.Sandboxes, { useValue: { sandboxes: [sandbox] } }),
  });
}

describe("the launch path", () => {
  it("H3.2 host §3: a sandbox whose launch throws leaves a plain subprocess reported advisory, with its error code", async () => {
    const provider = manifest("fake-honest-secrets", { source: "secrets" });
    const throwing: Sandbox = fakeSandbox("acme.sandbox-broken", "a", async () => {
      throw new PluginError("ASP_PLUGIN_BAD_OUTPUT", "the launch result does not validate");
    });
    const h = await hostWith(throwing, provider);
    try {
      const { envelope } = await h.gate({ repo: tempRepo() });
      expect(modeOf(envelope, provider.id)).toMatchObject({ mode: "advisory", directWrite: true, sandbox: null });
      expect(modeOf(envelope, provider.id)?.reason).toContain("ASP_PLUGIN_BAD_OUTPUT");
      expect(envelope.assurance).toMatchObject({ mode: "gated", directWriteRisk: true });
    } finally {
      await h.close();
    }
  });

  it("H3.2 host §3: a sandbox that answers advisory (no bwrap) is reported as such, with its reason, never isolated", async () => {
    const provider = manifest("fake-honest-secrets", { source: "secrets" });
    const advisory: Sandbox = fakeSandbox("acme.sandbox-nobwrap", "b", async (req) => ({
      executable: req.executable,
      args: [...req.args],
      cwd: req.cwd,
      env: { ...req.env },
      mode: "advisory" as const,
      mechanism: "plain subprocess (bubblewrap unavailable)",
      directWrite: true,
      reason: "bwrap not found on the host's PATH nor at /usr/bin/bwrap",
    }));
    const h = await hostWith(advisory, provider);
    try {
      const { envelope } = await h.gate({ repo: tempRepo() });
      expect(modeOf(envelope, provider.id)).toEqual({
        provider: provider.id,
        mode: "advisory",
        mechanism: "plain subprocess (bubblewrap unavailable)",
        sandbox: { id: "acme.sandbox-nobwrap", digest: `sha256:${"b".repeat(64)}` },
        directWrite: true,
        reason: "bwrap not found on the host's PATH nor at /usr/bin/bwrap",
      });
      expect(envelope.decision).toBe("allow"); // the example policy's gate needs gated: decided as before
    } finally {
      await h.close();
    }
  });

  it("the launch request denies the candidate repository and the store family, and binds only the provider's code", async () => {
    const provider = manifest("fake-honest-secrets", { source: "secrets" });
    const seen: Array<{ readOnly: readonly string[]; deny: readonly string[] }> = [];
    const recording: Sandbox = fakeSandbox("acme.sandbox-recording", "c", async (req) => {
      seen.push({ readOnly: req.readOnly, deny: req.deny });
      const { readOnly: _r, deny: _d, ...launch } = req;
      return { ...launch, args: [...req.args], mode: "advisory" as const, mechanism: "recorded", directWrite: true };
    });
    const store = join(fresh("store"), "store");
    const repo = tempRepo();
    const h = await hostWith(recording, provider, { store, warm: false });
    try {
      await h.gate({ repo });
      expect(seen).toHaveLength(1);
      expect(seen[0]?.readOnly).toEqual([FIXTURES.replace(/\/$/, "")]);
      expect(seen[0]?.deny).toEqual([store, `${store}.plugins`, `${store}.stat-cache`, `${store}.journal`, repo]);
    } finally {
      await h.close();
    }
  });
});

describe("lazy launch", () => {
  it("an edit-only provider's process does not exist after compose and gate", async () => {
    const checker = manifest("fake-honest-secrets", { source: "secrets" });
    const launchLog = join(fresh("launch"), "edit.log");
    const editor: ProviderManifest = {
      ...manifest("fake-honest-ts", { id: "fake-editor", source: "ts", args: ["--launch-log", launchLog] }),
      capabilities: ["edit"],
    };
    const checkLog = join(fresh("launch"), "check.log");
    const checking = { ...checker, args: [...checker.args, "--launch-log", checkLog] };
    const h = await composeHost({
      store: "memory:",
      policy: policyFor([checking]),
      providers: [checking, editor],
      clock: fakeClock,
      failOpenSink: { log() {} },
    });
    try {
      expect(existsSync(checkLog)).toBe(true); // check providers are warmed at compose
      const { envelope } = await h.gate({ repo: tempRepo() });
      expect(envelope.decision).toBe("allow");
      expect(existsSync(launchLog)).toBe(false);
      expect(h.status().providers.find((p) => p.id === "fake-editor")?.state).toBe("exited");
    } finally {
      await h.close();
    }
  });
});

// issue 32 hole 9 (THREAT-MODEL invariant 12, and 5): a provider that runs its sandbox out of
// disk (the /tmp budget of sandbox-bubblewrap) fails as that provider; the gate it was required
// for is indeterminate, never allow.
describe.skipIf(!bwrap.ok)("a provider that exhausts its sandbox's budget", () => {
  it("issue 32 hole 9 (THREAT-MODEL inv. 12): filling /tmp stops at the budget, the provider fails, the gate is not allow", async () => {
    const repo = tempRepo({ "src/a.ts": "export const a = 1;\n" });
    const provider = selfContained("fake-exhaust", []);
    const h = await host(provider, join(fresh("store"), "store"), true);
    try {
      const { envelope, receipt } = await h.gate({ repo });
      const launched = envelope.assurance.providers?.find((p) => p.provider === provider.id);
      expect(launched).toMatchObject({ mode: "isolated", sandbox: { id: SANDBOX_ID } });
      expect(launched?.mechanism).toContain("tmpfs /tmp 64 MiB");
      expect(envelope.decision).not.toBe("allow");
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.coverage.ran).toEqual([]);
      expect(envelope.coverage.degraded.map((d) => [d.provider, d.reason, d.failOpen])).toEqual([
        [provider.id, "crashed", false],
      ]);
      // It ran into the budget, not into the end of its own loop.
      expect(envelope.coverage.degraded[0]?.detail).toContain("ENOSPC after 67108864 bytes");
      expect(receipt.decision).toBe(envelope.decision);
    } finally {
      await h.close();
    }
  }, 60_000);

  it("issue 32 hole 9: the budget comes from the trusted configuration's pluginOptions of the sandbox", async () => {
    const repo = tempRepo({ "a.txt": "fine\n" });
    const provider = selfContained("fake-exhaust", []);
    const h = await host(provider, join(fresh("store"), "store"), true, {
      [SANDBOX_ID]: { limits: { tmpBytes: 1024 * 1024 } },
    });
    try {
      const { envelope } = await h.gate({ repo });
      expect(modeOf(envelope, provider.id)?.mechanism, JSON.stringify(modeOf(envelope, provider.id))).toContain(
        "tmpfs /tmp 1 MiB",
      );
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.coverage.degraded[0]?.detail).toContain("ENOSPC after 1048576 bytes");
    } finally {
      await h.close();
    }
  }, 60_000);
});
