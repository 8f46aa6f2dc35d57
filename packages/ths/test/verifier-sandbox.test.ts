import "reflect-metadata";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Policy } from "@asp/contracts";
import {
  digestPlugin,
  type LoadedVerifier,
  loadPlugins,
  TOKENS as PLUGIN_TOKENS,
  readTrustRoots,
  registerPlugins,
  type Sandbox,
  signPlugin,
  writeKeyPair,
} from "@asp/plugin-host";
import { container } from "tsyringe";
import { describe, expect, it } from "vitest";
import { type LaunchedVerifier, launchVerifier } from "../src/index.js";
import { bwrapRuns, connectionCounter, freshDirs, writeVerifierPlugin } from "./helpers.js";

// Issue 27 item 4 / AM.invariants.1 / THREAT-MODEL invariant 12: a verifier runs in its own
// process under the granted sandbox plugin (the real, signed sandbox-bubblewrap), like a provider.
// A verifier fixture that tries to write the candidate repository, read the store, open a socket
// and reach an endpoint it was not granted fails at each, the host records what it mediated, and
// its answer still comes back. Through an unconfining sandbox (fault injection) the same write
// lands: the attack is real, the sandbox is what stops it.

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const SANDBOX = join(ROOT, "plugins", "sandbox-bubblewrap", "dist", "plugin");
const TRUST_ROOT = join(ROOT, "examples", "keys", "example.key.pub");

const bwrap = bwrapRuns();
const skipWithoutBwrap = !bwrap.ok && process.env.ASP_TEST_NO_BWRAP === "1";

const fresh = freshDirs("asp-ths-verifier-");

const clock = { now: () => new Date("2026-01-02T03:04:05.000Z") };
const PORTS = { clock, content: { read: async () => null } };

/** The hostile verifier: every attack, each outcome (an error code or "ok") in its one finding's claim. */
const ESCAPE_ENTRY = `import * as fs from "node:fs";
import * as net from "node:net";
const attempt = async (fn) => { try { await fn(); return "ok"; } catch (e) { return e?.code ?? e?.cause?.code ?? String(e); } };
export default {
  $$type: "@asp/VerifierPlugin", id: "acme.verifier-escape", capabilities: ["review"],
  register(reg) {
    reg.registerInit({ deps: {}, init: () => ({ verify: async (req) => {
      const t = req.subject;
      const out = {
        write: await attempt(() => fs.writeFileSync(t.repoFile, "// injected by the Reviewer\\n")),
        store: await attempt(() => fs.readFileSync(t.storeFile, "utf8")),
        socket: await attempt(() => new Promise((resolve, reject) => {
          const s = net.connect(t.port, "127.0.0.1", () => { s.destroy(); resolve(); });
          s.on("error", reject);
        })),
        fetch: await attempt(() => fetch("http://127.0.0.1:" + t.port + "/", { method: "POST", body: "x" })),
        scratch: await attempt(() => { fs.writeFileSync("/tmp/scratch.txt", "mine"); if (fs.readFileSync("/tmp/scratch.txt", "utf8") !== "mine") throw new Error("lost"); }),
        home: process.env.HOME ?? null,
      };
      return { kind: "review", verdict: "pass", findings: [{ severity: "info", category: "probe", claim: JSON.stringify(out), evidence_refs: [], title: "probe" }] };
    } }) });
  },
};
`;

/** The escape fixture, signed by a fresh key and granted `review`, loaded for a subprocess (never imported here). */
async function escapeVerifier(): Promise<LoadedVerifier> {
  const dir = writeVerifierPlugin(fresh("verifier"), "acme.verifier-escape", ESCAPE_ENTRY);
  const key = join(fresh("key"), "team");
  writeKeyPair(key);
  signPlugin(dir, key);
  const policy: Policy = {
    apiVersion: "asp.policy/v1",
    requirements: [],
    providers: [],
    grants: [],
    plugins: [{ id: "acme.verifier-escape", digest: digestPlugin(dir).digest, capabilities: ["review"] }],
  };
  const result = await loadPlugins({
    dirs: [dir],
    trustRoots: readTrustRoots([`${key}.pub`]),
    policy,
    verifierIsolation: "subprocess",
    cacheDir: fresh("cache"),
  });
  const [v] = result.verifiers;
  if (v === undefined) throw new Error(`not loaded: ${JSON.stringify(result.refused)}`);
  return v;
}

/** The real signed sandbox-bubblewrap plugin, verified and granted, as a host resolves it. */
async function bubblewrap(): Promise<Sandbox> {
  const policy: Policy = {
    apiVersion: "asp.policy/v1",
    requirements: [],
    providers: [],
    grants: [],
    plugins: [
      { id: "asp.sandbox-bubblewrap", digest: digestPlugin(SANDBOX).digest, capabilities: ["sandbox:bubblewrap"] },
    ],
  };
  const result = await loadPlugins({
    dirs: [SANDBOX],
    trustRoots: readTrustRoots([TRUST_ROOT]),
    policy,
    kinds: ["sandbox"],
    cacheDir: fresh("sandbox-cache"),
  });
  const c = container.createChildContainer();
  registerPlugins(c, result, PORTS);
  const [s] = c.resolveAll(PLUGIN_TOKENS.Sandbox);
  if (s === undefined) throw new Error(`sandbox not loaded: ${JSON.stringify(result.refused)}`);
  return s;
}

/** FAKE (fault injection): claims confinement and launches the child as asked, so the attack's effect shows. */
const unconfining: Sandbox = {
  id: "acme.fake-unconfining",
  version: "1.0.0",
  digest: `sha256:${"e".repeat(64)}`,
  capabilities: ["sandbox:bubblewrap"],
  launch: async (r) => ({ ...r, mode: "isolated", mechanism: "fake (test): not confined", directWrite: false }),
};

const net = connectionCounter();

async function attack(sandbox: Sandbox) {
  const repo = fresh("repo");
  const repoFile = join(repo, "a.ts");
  writeFileSync(repoFile, "export const a = 1;\n");
  const store = join(fresh("store-parent"), "store");
  mkdirSync(store);
  const storeFile = join(store, "CURRENT");
  writeFileSync(storeFile, "store-secret-bytes\n");
  const before = net.connections;
  const v: LaunchedVerifier = await launchVerifier(await escapeVerifier(), {
    sandbox,
    ports: PORTS,
    deny: [repo, store, `${store}.plugins`],
  });
  try {
    const answer = (await v.verify({
      kind: "review",
      subject: { repoFile, storeFile, port: net.port },
    })) as unknown as {
      findings: { claim: string }[];
    };
    return {
      v,
      seen: JSON.parse(answer.findings[0]?.claim ?? "{}") as Record<string, string | null>,
      wrote: readFileSync(repoFile, "utf8").includes("injected"),
      connected: net.connections > before,
      attempts: v.attempts(),
    };
  } finally {
    await v.close();
  }
}

describe("verifiers launched through sandbox-bubblewrap (issue 27 item 4)", { timeout: 60_000 }, () => {
  it.runIf(!bwrap.ok && !skipWithoutBwrap)("bubblewrap runs on this machine (set ASP_TEST_NO_BWRAP=1 to skip)", () => {
    throw new Error(`the sandbox tests need a working bwrap (apt-get install -y bubblewrap): ${bwrap.detail}`);
  });

  it.skipIf(!bwrap.ok)(
    "AM.invariants.1 H3.2: a Reviewer that tries to write the repository, read the store, open a socket or reach another endpoint fails at each; its scratch works; the host records what it mediated",
    async () => {
      const r = await attack(await bubblewrap());
      expect(r.v.launch).toMatchObject({
        mode: "isolated",
        directWrite: false,
        sandbox: { id: "asp.sandbox-bubblewrap", digest: digestPlugin(SANDBOX).digest },
      });
      expect(r.v.launch.mechanism).toContain("net");
      // The repository and the store do not exist in its view; there is no network namespace to connect from.
      expect(r.seen.write).toMatch(/^(ENOENT|EROFS|EACCES)$/);
      expect(r.seen.store).toMatch(/^(ENOENT|EACCES)$/);
      expect(r.seen.socket).toMatch(/^(ENETUNREACH|ECONNREFUSED|EACCES|EPERM)$/);
      expect(r.seen.fetch).toBe("ASP_PLUGIN_NETWORK_DENIED");
      expect(r.seen.scratch).toBe("ok");
      expect(r.seen.home).toBeNull();
      expect({ wrote: r.wrote, connected: r.connected }).toEqual({ wrote: false, connected: false });
      expect(JSON.stringify(r.seen)).not.toContain("store-secret-bytes");
      expect(r.attempts.map((a) => a.kind)).toEqual(["network_denied"]);
    },
  );

  it("AM.invariants.1: through a sandbox that does not confine (fault injection) the same write lands and the socket connects: the attack is real", async () => {
    const r = await attack(unconfining);
    expect(r.seen.write).toBe("ok");
    expect(r.wrote).toBe(true);
    expect(r.seen.store).toBe("ok");
    expect(r.connected).toBe(true);
    // The host-mediated path is refused even then.
    expect(r.seen.fetch).toBe("ASP_PLUGIN_NETWORK_DENIED");
  });
});
