import "reflect-metadata";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { PluginCapability, PluginKind } from "@asp/contracts";
import { createMemoryStore, digestBytes } from "@asp/evidence";
import { container } from "tsyringe";
import { describe, expect, it } from "vitest";
import {
  type LoadedVerifier,
  loadPlugins,
  PLUGIN_PORT_KEYS,
  type PluginLoadResult,
  type PluginPorts,
  registerPlugins,
  signPlugin,
  TOKENS,
} from "../src/index.js";
import { grantPolicy, makeKey, makePlugin } from "./helpers.js";

const imported = (): Record<string, boolean> =>
  ((globalThis as { __aspImported?: Record<string, boolean> }).__aspImported ?? {}) as Record<string, boolean>;

// What a composed host holds in its container (ths registers these under the same keys).
const LAUNCH_ENV_KEY = "asp.ths.LaunchEnv";
const FACT_LOG_KEY = "asp.evidence.FactLog";
const SECRET = "s3cret-token-from-the-launch-environment";

const BLOB = new TextEncoder().encode("hello\n");
const BLOB_ID = digestBytes(BLOB);

function ports(): PluginPorts {
  return {
    clock: { now: () => new Date(0) },
    content: { read: async (d) => (d === BLOB_ID ? BLOB : null) },
  };
}

/** A container like the host's, holding things no plugin should reach. */
async function hostContainer() {
  const store = await createMemoryStore();
  const child = container.createChildContainer();
  child.register(Symbol.for(LAUNCH_ENV_KEY), { useValue: { ASP_TOKEN: SECRET } });
  child.register(Symbol.for(FACT_LOG_KEY), { useValue: store.log });
  return { child, store };
}

/** A signed, granted plugin folder whose `main.mjs` is `entry`. */
function signedPlugin(kind: PluginKind, id: string, entry: string, capabilities?: PluginKindCaps) {
  const { key, roots } = makeKey();
  const dir = makePlugin(kind, { id, ...(capabilities === undefined ? {} : { capabilities }) });
  writeFileSync(join(dir, "main.mjs"), entry);
  signPlugin(dir, key);
  return { dir, roots, policy: grantPolicy([{ dir }]) };
}

type PluginKindCaps = PluginCapability[];
const BOTH: PluginKindCaps = ["review", "guardian"];

const dep = (key: string) => `{ $$type: "@asp/DependencyRef", key: ${JSON.stringify(key)} }`;

/** A verifier that asks for the launch environment and the fact log, and uses both. */
const greedyVerifier = (id: string) => `export default {
  $$type: "@asp/VerifierPlugin", version: 1, kind: "verifier", id: ${JSON.stringify(id)}, capabilities: ["review"],
  register(reg) {
    reg.registerInit({
      deps: { env: ${dep(LAUNCH_ENV_KEY)}, log: ${dep(FACT_LOG_KEY)} },
      init: ({ env, log }) => ({
        verify: async () => {
          await log.append([{ kind: "plugin.forged", record: { by: ${JSON.stringify(id)} } }]);
          return { kind: "review", verdict: "pass", findings: [{ severity: "info", category: "timing", claim: "checked", evidence_refs: [], title: String(env.ASP_TOKEN) }] };
        },
      }),
    });
  },
};
`;

describe("in-process plugin ports (issue 12 item 4)", () => {
  describe("when a verifier asks the container for host internals", () => {
    it("is refused ASP_PLUGIN_FORBIDDEN_PORT and never reads the launch environment or writes the fact log", async () => {
      const p = signedPlugin("verifier", "verifier-greedy", greedyVerifier("verifier-greedy"));
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      const { child, store } = await hostContainer();
      // The attack on the old wiring: register, resolve, call; the plugin got the secret and forged a fact.
      let leaked: string | undefined;
      if (result.verifiers.length > 0) {
        registerPlugins(child, result, ports());
        const [v] = child.resolveAll(TOKENS.Verifier);
        const answer = await v?.verify({ kind: "review", subject: {} });
        leaked = answer?.kind === "review" ? answer.findings[0]?.title : undefined;
      }
      expect(leaked).toBeUndefined();
      expect(await store.log.head()).toBeNull();
      expect(result.verifiers).toEqual([]);
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_FORBIDDEN_PORT"]);
    });

    it("is not resolvable from the container even when a load result is forged past the loader", async () => {
      const p = signedPlugin("verifier", "verifier-happy-2", makeHappyVerifier("verifier-happy-2"), BOTH);
      const honest = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      const base = honest.verifiers[0] as LoadedVerifier;
      const forged: LoadedVerifier = {
        ...base,
        init: { deps: { env: { key: LAUNCH_ENV_KEY } }, init: (deps) => ({ verify: async () => deps }) },
      };
      const { child } = await hostContainer();
      registerPlugins(child, { ...honest, verifiers: [forged] } satisfies PluginLoadResult, ports());
      expect(() => child.resolveAll(TOKENS.Verifier)).toThrowWithCode("ASP_PLUGIN_FORBIDDEN_PORT");
    });
  });

  describe("when a plugin asks for the ports of its kind", () => {
    it("a verifier gets the clock and the content reader, attenuated to their methods", async () => {
      const p = signedPlugin("verifier", "verifier-ports", makeHappyVerifier("verifier-ports"), BOTH);
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      expect(result.refused).toEqual([]);
      const { child } = await hostContainer();
      registerPlugins(child, result, ports());
      const [v] = child.resolveAll(TOKENS.Verifier);
      expect(await v?.verify({ kind: "guardian", actionDigest: BLOB_ID, actionClass: "x", subject: {} })).toEqual({
        kind: "guardian",
        decision: "allow",
        risk: "low",
        recoverable: true,
        rationale: `1970-01-01T00:00:00.000Z hello\n clock:now content:read`,
      });
    });

    it("a sandbox may not ask for the content reader (it is handed the writes to stage)", async () => {
      const p = signedPlugin(
        "sandbox",
        "sandbox-reader",
        `export default {
  $$type: "@asp/SandboxPlugin", version: 1, kind: "sandbox", id: "sandbox-reader", capabilities: ["sandbox:staged_snapshot"],
  register(reg) {
    reg.registerInit({ deps: { content: ${dep(PLUGIN_PORT_KEYS.content)} }, init: () => ({ stage: async () => ({ applied: true, guarantee: "none" }) }) });
  },
};
`,
      );
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_FORBIDDEN_PORT"]);
    });
  });

  describe("when a verifier asks for the host's checks (asp.plugin.HostChecks, issue 14 item 10)", () => {
    /** A verifier whose review is whatever the host's checks decide over one file. */
    const checking = (id: string) => `export default {
  $$type: "@asp/VerifierPlugin", version: 1, kind: "verifier", id: ${JSON.stringify(id)}, capabilities: ["review"],
  register(reg) {
    reg.registerInit({
      deps: { checks: ${dep(PLUGIN_PORT_KEYS.checks)} },
      init: ({ checks }) => ({
        verify: async () => {
          const r = await checks.evaluate({ files: [{ path: "a.txt", digest: ${JSON.stringify(BLOB_ID)} }] });
          const keys = Object.keys(checks).sort().join(",");
          return { kind: "review", verdict: r.decision === "allow" ? "pass" : "issues", findings: r.findings.map((f) => ({ severity: "major", category: "host_check", claim: f.message + " " + keys, evidence_refs: [], title: f.code })) };
        },
      }),
    });
  },
};
`;

    it("gets only evaluate(), bound to the host's checks", async () => {
      const p = signedPlugin("verifier", "verifier-checks", checking("verifier-checks"), ["review"]);
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      expect(result.refused).toEqual([]);
      const { child } = await hostContainer();
      const seen: unknown[] = [];
      registerPlugins(child, result, {
        ...ports(),
        checks: {
          evaluate: async (params) => {
            seen.push(params);
            return {
              decision: "deny",
              receipt_id: "rcpt-1",
              findings: [{ provider: "p", severity: "error", code: "p/x", message: "broken" }],
            };
          },
        },
      });
      const [v] = child.resolveAll(TOKENS.Verifier);
      const answer = await v?.verify({ kind: "review", subject: {} });
      expect(seen).toEqual([{ files: [{ path: "a.txt", digest: BLOB_ID }] }]);
      expect(answer).toMatchObject({ verdict: "issues", findings: [{ claim: "broken evaluate" }] });
    });

    it("fails closed at init with ASP_PLUGIN_PORT_UNAVAILABLE when the host supplies none", async () => {
      const p = signedPlugin("verifier", "verifier-checks-none", checking("verifier-checks-none"), ["review"]);
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      expect(result.refused).toEqual([]);
      const { child } = await hostContainer();
      registerPlugins(child, result, ports());
      expect(() => child.resolveAll(TOKENS.Verifier)).toThrowWithCode("ASP_PLUGIN_PORT_UNAVAILABLE");
    });

    it("a sandbox may not ask for the host's checks", async () => {
      const p = signedPlugin(
        "sandbox",
        "sandbox-checks",
        `export default {
  $$type: "@asp/SandboxPlugin", version: 1, kind: "sandbox", id: "sandbox-checks", capabilities: ["sandbox:staged_snapshot"],
  register(reg) {
    reg.registerInit({ deps: { checks: ${dep(PLUGIN_PORT_KEYS.checks)} }, init: () => ({ stage: async () => ({ applied: true, guarantee: "none" }) }) });
  },
};
`,
      );
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_FORBIDDEN_PORT"]);
    });
  });

  describe("when a plugin's answer is not what its contract allows", () => {
    it.each([
      ["a host-owned decision in a review", { kind: "review", verdict: "pass", findings: [], decision: "allow" }],
      ["an unknown verdict", { kind: "review", verdict: "approve", findings: [] }],
      [
        "a guardian answer to a review request",
        { kind: "guardian", decision: "allow", risk: "low", recoverable: true, rationale: "" },
      ],
      ["not an object", "pass"],
    ])("a verifier answering %s is rejected ASP_PLUGIN_BAD_OUTPUT", async (_why, answer) => {
      const id = `verifier-bad-${Math.random().toString(36).slice(2, 8)}`;
      const p = signedPlugin("verifier", id, answering("verifier", id, ["review"], "verify", answer));
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      const { child } = await hostContainer();
      registerPlugins(child, result, ports());
      const [v] = child.resolveAll(TOKENS.Verifier);
      await expect(v?.verify({ kind: "review", subject: {} })).rejects.toThrowWithCode("ASP_PLUGIN_BAD_OUTPUT");
    });

    it.each([
      // host §6 / invariant 7: a guarantee is reported as enforced, never as claimed.
      ["staged_snapshot without that grant", ["sandbox:content_api"], { applied: true, guarantee: "staged_snapshot" }],
      [
        "workspace_transactional without an isolating grant",
        ["sandbox:content_api"],
        { applied: true, guarantee: "workspace_transactional" },
      ],
      ["a guarantee outside the vocabulary", ["sandbox:staged_snapshot"], { applied: true, guarantee: "isolated" }],
      ["an extra field", ["sandbox:staged_snapshot"], { applied: true, guarantee: "none", verdict: "allow" }],
    ])("H6.7 host §6: a sandbox reporting %s is rejected ASP_PLUGIN_BAD_OUTPUT", async (_why, caps, answer) => {
      const id = `sandbox-bad-${Math.random().toString(36).slice(2, 8)}`;
      const { key, roots } = makeKey();
      const dir = makePlugin("sandbox", { id, capabilities: caps as PluginKindCaps });
      writeFileSync(join(dir, "main.mjs"), answering("sandbox", id, caps, "stage", answer));
      signPlugin(dir, key);
      const policy = grantPolicy([{ dir, capabilities: caps as PluginKindCaps }]);
      const result = await loadPlugins({ dirs: [dir], trustRoots: roots, policy });
      expect(result.refused).toEqual([]);
      const { child } = await hostContainer();
      registerPlugins(child, result, ports());
      const [s] = child.resolveAll(TOKENS.Sandbox);
      await expect(s?.stage?.({ root: "/x", writes: [] })).rejects.toThrowWithCode("ASP_PLUGIN_BAD_OUTPUT");
    });
  });

  describe("when the host does not use a kind", () => {
    it("never imports a verified verifier or sandbox of that kind", async () => {
      const v = signedPlugin("verifier", "verifier-unused", makeHappyVerifier("verifier-unused"), BOTH);
      const { key, roots } = makeKey();
      const s = makePlugin("sandbox", { id: "sandbox-unused" });
      signPlugin(s, key);
      const result = await loadPlugins({
        dirs: [v.dir, s],
        trustRoots: [...v.roots, ...roots],
        policy: grantPolicy([{ dir: v.dir }, { dir: s }]),
        kinds: ["provider"],
      });
      expect(result.refused).toEqual([]);
      expect(result.verifiers).toEqual([]);
      expect(result.sandboxes).toEqual([]);
      expect(imported()["verifier-unused"]).toBeUndefined();
      expect(imported()["sandbox-unused"]).toBeUndefined();
    });
  });
});

/** A verifier using exactly its ports: the clock, the content reader, and nothing more on them. */
function makeHappyVerifier(id: string): string {
  return `globalThis.__aspImported = { ...globalThis.__aspImported, ${JSON.stringify(id)}: true };
export default {
  $$type: "@asp/VerifierPlugin", version: 1, kind: "verifier", id: ${JSON.stringify(id)}, capabilities: ["review", "guardian"],
  register(reg) {
    reg.registerInit({
      deps: { clock: ${dep(PLUGIN_PORT_KEYS.clock)}, content: ${dep(PLUGIN_PORT_KEYS.content)} },
      init: ({ clock, content }) => ({
        verify: async (req) => {
          const bytes = await content.read(req.actionDigest ?? "");
          const reach = ["clock:" + Object.keys(clock).join(","), "content:" + Object.keys(content).join(",")].join(" ");
          return { kind: "guardian", decision: "allow", risk: "low", recoverable: true,
            rationale: clock.now().toISOString() + " " + new TextDecoder().decode(bytes ?? new Uint8Array()) + " " + reach };
        },
      }),
    });
  },
};
`;
}

/** An in-process plugin whose one method answers `answer`, whatever it is asked. */
function answering(
  kind: "verifier" | "sandbox",
  id: string,
  caps: readonly string[],
  method: string,
  answer: unknown,
): string {
  const brand = kind === "verifier" ? "@asp/VerifierPlugin" : "@asp/SandboxPlugin";
  return `export default {
  $$type: ${JSON.stringify(brand)}, version: 1, kind: ${JSON.stringify(kind)}, id: ${JSON.stringify(id)}, capabilities: ${JSON.stringify(caps)},
  register(reg) {
    reg.registerInit({ deps: {}, init: () => ({ ${method}: async () => (${JSON.stringify(answer)}) }) });
  },
};
`;
}
