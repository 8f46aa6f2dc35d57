import "reflect-metadata";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ActionResult, EnginePortStep } from "@asp/contracts";
import { createMemoryStore } from "@asp/evidence";
import { container } from "tsyringe";
import { describe, expect, it } from "vitest";
import {
  type Engine,
  loadPlugins,
  PLUGIN_PORT_KEYS,
  type PluginLoadResult,
  registerPlugins,
  signPlugin,
  TOKENS,
} from "../src/index.js";
import { grantPolicy, makeKey, makePlugin } from "./helpers.js";

// Engine plugins (issue 25 item 7): an agent Engine loads exactly as a verifier does (signature by
// a trusted key, tree digest, a trusted-policy grant of `engine`), gets the clock port only, and
// every step it yields is checked before the host sees it.

const imported = (): Record<string, boolean> =>
  ((globalThis as { __aspImported?: Record<string, boolean> }).__aspImported ?? {}) as Record<string, boolean>;

const PORTS = { clock: { now: () => new Date(0) }, content: { read: async () => null } };
const PARAMS = {
  run: { root_frame_id: "f", branch_id: "b", turn_id: "t", execution_id: "e" },
  task: "summarize",
  tools: [{ name: "read_file", description: "read a file", parameters: { type: "object" } }],
  signal: new AbortController().signal,
};

/** A signed engine folder (the helpers' engine entry unless `entry` is given), granted `engine`. */
function signedEngine(id: string, entry?: string) {
  const { key, roots } = makeKey();
  const dir = makePlugin("engine", { id });
  if (entry !== undefined) writeFileSync(join(dir, "main.mjs"), entry);
  signPlugin(dir, key);
  return { dir, roots, policy: grantPolicy([{ dir, capabilities: ["engine"] }]) };
}

function resolveEngine(result: PluginLoadResult): Engine {
  const child = container.createChildContainer();
  registerPlugins(child, result, PORTS);
  const [engine] = child.resolveAll(TOKENS.Engine);
  if (engine === undefined) throw new Error("no engine registered");
  return engine;
}

/** Drive a run as the host does: each action answered with `answer(action)`. */
async function drive(engine: Engine, answer: (step: EnginePortStep) => ActionResult) {
  const it = engine.run(PARAMS);
  const steps: EnginePortStep[] = [];
  let result: ActionResult | undefined;
  for (;;) {
    const r = await it.next(result);
    if (r.done) return steps;
    steps.push(r.value);
    result = r.value.kind === "action" ? answer(r.value) : undefined;
  }
}

const dep = (key: string) => `{ $$type: "@asp/DependencyRef", key: ${JSON.stringify(key)} }`;

/** An engine entry whose run yields `steps` (JSON), recording on globalThis when its run was closed. */
function yielding(id: string, steps: unknown[], deps = "{}"): string {
  return `export default {
  $$type: "@asp/EnginePlugin", version: 1, kind: "engine", id: ${JSON.stringify(id)}, capabilities: ["engine"],
  register(reg) {
    reg.registerInit({ deps: ${deps}, init: () => ({
      async *run() {
        try { for (const s of ${JSON.stringify(steps)}) yield s; }
        finally { globalThis.__aspClosed = { ...globalThis.__aspClosed, ${JSON.stringify(id)}: true }; }
      },
    }) });
  },
};
`;
}

describe("engine plugins", () => {
  describe("when the engine is signed by a trusted key and granted engine", () => {
    it("loads, registers under TOKENS.Engine, and hands each ActionResult to the next step", async () => {
      const p = signedEngine("engine-happy");
      const store = await createMemoryStore();
      const result = await loadPlugins({
        dirs: [p.dir],
        trustRoots: p.roots,
        policy: p.policy,
        pluginOptions: { "engine-happy": { greeting: "hi" } },
        factLog: store.log,
      });
      expect(result.refused).toEqual([]);
      expect(result.engines?.map((e) => e.plugin.id)).toEqual(["engine-happy"]);
      expect(result.engines?.[0]?.evidence).toMatchObject({
        identity: "verified",
        integrity: "verified",
        authorityGrant: "verified",
        capabilities: ["engine"],
      });
      const engine = resolveEngine(result);
      expect(engine).toMatchObject({ id: "engine-happy", version: "1.2.3", capabilities: ["engine"] });
      expect(engine.digest).toBe(result.engines?.[0]?.evidence.digest);
      const steps = await drive(engine, () => ({ status: "executed", action_digest: "sha256:a", output: "42" }));
      expect(steps).toEqual([
        { kind: "prose", text: "hi at 1970-01-01T00:00:00.000Z" },
        { kind: "action", action: { tool: "read_file", arguments: { path: "a.txt" }, call_id: "c1" } },
        { kind: "turn", usage: { input_tokens: 3, output_tokens: 4 } },
        { kind: "completion", payload: "summarize: 42", artifacts: [], evidence: [] },
      ]);
      const refused = await drive(engine, () => ({
        status: "refused",
        action_digest: null,
        code: "ASP_X",
        reason: "no",
      }));
      expect(refused.at(-1)).toMatchObject({ payload: "summarize: refused ASP_X" });
      const facts = await store.log.list();
      expect(facts.map((f) => [f.kind, (f.record as { kind: string }).kind])).toEqual([["plugin.loaded", "engine"]]);
      await store.close();
    });

    it("is refused ASP_PLUGIN_BAD_OPTIONS when its trusted options fail its optionsSchema", async () => {
      const p = signedEngine("engine-options");
      const result = await loadPlugins({
        dirs: [p.dir],
        trustRoots: p.roots,
        policy: p.policy,
        pluginOptions: { "engine-options": { greeting: 1 } },
      });
      expect(result.engines).toEqual([]);
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_BAD_OPTIONS"]);
    });
  });

  describe("when the engine is not signed, trusted or granted", () => {
    it.each([
      ["unsigned", "ASP_PLUGIN_UNSIGNED"],
      ["signed by a key the host does not trust", "ASP_PLUGIN_UNTRUSTED_KEY"],
      ["not granted by trusted policy", "ASP_PLUGIN_NOT_GRANTED"],
      ["granted another capability only", "ASP_PLUGIN_CAPABILITY_NOT_GRANTED"],
    ] as const)("is refused when %s (%s), and nothing of it is imported", async (how, code) => {
      const id = `engine-refused-${code.toLowerCase()}`;
      const dir = makePlugin("engine", { id });
      const signer = makeKey();
      const other = makeKey();
      if (how !== "unsigned") signPlugin(dir, signer.key);
      const policy =
        how === "not granted by trusted policy"
          ? grantPolicy([])
          : grantPolicy([{ dir, capabilities: how === "granted another capability only" ? ["review"] : ["engine"] }]);
      const result = await loadPlugins({
        dirs: [dir],
        trustRoots: how === "signed by a key the host does not trust" ? other.roots : signer.roots,
        policy,
      });
      expect(result.engines).toEqual([]);
      expect(result.refused.map((r) => r.code)).toEqual([code]);
      expect(imported()[id]).toBeUndefined();
    });

    it("is never imported into a host that does not use the engine kind", async () => {
      const p = signedEngine("engine-unused");
      const result = await loadPlugins({
        dirs: [p.dir],
        trustRoots: p.roots,
        policy: p.policy,
        kinds: ["verifier", "sandbox"],
      });
      expect(result.refused).toEqual([]);
      expect(result.engines).toEqual([]);
      expect(imported()["engine-unused"]).toBeUndefined();
    });
  });

  describe("when the manifest and the capability engine disagree", () => {
    it.each([
      ["an engine declaring review", "engine", ["review"]],
      ["an engine declaring engine and review", "engine", ["engine", "review"]],
      ["a verifier declaring engine", "verifier", ["engine"]],
    ] as const)("refuses %s ASP_PLUGIN_BAD_MANIFEST", async (_what, kind, capabilities) => {
      const { key, roots } = makeKey();
      const dir = makePlugin(kind, { id: `mixed-${kind}-${capabilities.length}`, capabilities: [...capabilities] });
      signPlugin(dir, key);
      const result = await loadPlugins({
        dirs: [dir],
        trustRoots: roots,
        policy: grantPolicy([{ dir, capabilities: [...capabilities] }]),
      });
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_BAD_MANIFEST"]);
    });

    it("refuses an engine whose default export carries another kind's brand ASP_PLUGIN_LOAD_FAILED", async () => {
      const p = signedEngine(
        "engine-verifier-brand",
        `export default { $$type: "@asp/VerifierPlugin", version: 1, kind: "verifier", id: "engine-verifier-brand", capabilities: ["engine"], register() {} };\n`,
      );
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_LOAD_FAILED"]);
    });
  });

  describe("when an engine reaches for more than its ports", () => {
    it.each([
      ["the content reader", PLUGIN_PORT_KEYS.content],
      ["the host's checks", PLUGIN_PORT_KEYS.checks],
      ["the fact log", "asp.evidence.FactLog"],
    ])("asking for %s is refused ASP_PLUGIN_FORBIDDEN_PORT at load", async (_what, key) => {
      const id = `engine-greedy-${key.replace(/\W/g, "-").toLowerCase()}`;
      const p = signedEngine(id, yielding(id, [], `{ port: ${dep(key)} }`));
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      expect(result.engines).toEqual([]);
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_FORBIDDEN_PORT"]);
    });

    it("gets the clock attenuated to now()", async () => {
      const id = "engine-clock";
      const p = signedEngine(
        id,
        `export default {
  $$type: "@asp/EnginePlugin", version: 1, kind: "engine", id: "engine-clock", capabilities: ["engine"],
  register(reg) {
    reg.registerInit({ deps: { clock: ${dep(PLUGIN_PORT_KEYS.clock)} }, init: ({ clock }) => ({
      async *run() { yield { kind: "completion", payload: Object.keys(clock).join(",") + " " + clock.now().getTime(), artifacts: [], evidence: [] }; },
    }) });
  },
};
`,
      );
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      const steps = await drive(resolveEngine(result), () => {
        throw new Error("no action expected");
      });
      expect(steps).toEqual([{ kind: "completion", payload: "now 0", artifacts: [], evidence: [] }]);
    });

    it("an init that returns no run() fails at resolve ASP_PLUGIN_LOAD_FAILED", async () => {
      const p = signedEngine(
        "engine-no-run",
        `export default { $$type: "@asp/EnginePlugin", version: 1, kind: "engine", id: "engine-no-run", capabilities: ["engine"],
  register(reg) { reg.registerInit({ deps: {}, init: () => ({ verify: async () => ({}) }) }); } };\n`,
      );
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      expect(result.refused).toEqual([]);
      expect(() => resolveEngine(result)).toThrowWithCode("ASP_PLUGIN_LOAD_FAILED");
    });
  });

  describe("when an engine yields a step its contract does not allow", () => {
    it.each([
      ["an unknown kind", { kind: "verdict", verdict: "pass" }],
      [
        "a host-owned action digest on an action",
        { kind: "action", action: { tool: "t", arguments: {}, action_digest: "x" } },
      ],
      [
        "a host-owned decision beside an action",
        { kind: "action", action: { tool: "t", arguments: {} }, decision: "allow" },
      ],
      ["arguments that are not an object", { kind: "action", action: { tool: "t", arguments: [1] } }],
      ["an action without a tool", { kind: "action", action: { tool: "", arguments: {} } }],
      ["negative token usage", { kind: "turn", usage: { input_tokens: -1, output_tokens: 0 } }],
      ["a failure without a code", { kind: "failed", code: "oops", outcome: "timeout", message: "" }],
      [
        "a completion whose artifact has no bytes",
        { kind: "completion", payload: "", artifacts: [{ artifact_id: "a", version_id: "v" }], evidence: [] },
      ],
      ["not an object", "done"],
    ])("%s rejects next() ASP_PLUGIN_BAD_OUTPUT and ends the plugin's run", async (_what, step) => {
      const id = `engine-bad-${Math.random().toString(36).slice(2, 8)}`;
      const p = signedEngine(id, yielding(id, [{ kind: "prose", text: "ok" }, step, { kind: "prose", text: "never" }]));
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      const it = resolveEngine(result).run(PARAMS);
      expect(await it.next()).toEqual({ done: false, value: { kind: "prose", text: "ok" } });
      await expect(it.next()).rejects.toThrowWithCode("ASP_PLUGIN_BAD_OUTPUT");
      expect((globalThis as { __aspClosed?: Record<string, boolean> }).__aspClosed?.[id]).toBe(true);
    });

    it("a run that stops before any terminal step rejects ASP_PLUGIN_BAD_OUTPUT, unless its signal aborted", async () => {
      const id = "engine-no-end";
      const p = signedEngine(id, yielding(id, [{ kind: "prose", text: "and then nothing" }]));
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      const engine = resolveEngine(result);
      const it = engine.run(PARAMS);
      await it.next();
      await expect(it.next()).rejects.toThrowWithCode("ASP_PLUGIN_BAD_OUTPUT");
      const controller = new AbortController();
      const aborted = engine.run({ ...PARAMS, signal: controller.signal });
      await aborted.next();
      controller.abort();
      expect(await aborted.next()).toEqual({ done: true, value: undefined });
    });
  });

  describe("when an engine yields past its terminal step", () => {
    it.each([
      ["completion", { kind: "completion", payload: "42", artifacts: [], evidence: [] }],
      ["failed", { kind: "failed", code: "ASP_X_DOWN", outcome: "provider_error", message: "down" }],
      ["max_turns", { kind: "max_turns", turns: 3 }],
      ["cancelled", { kind: "cancelled" }],
    ])("after %s the run is done: nothing more is seen, and the plugin's run is closed", async (_k, terminal) => {
      const id = `engine-past-${(terminal as { kind: string }).kind}`;
      const p = signedEngine(id, yielding(id, [terminal, { kind: "action", action: { tool: "rm", arguments: {} } }]));
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      const it = resolveEngine(result).run(PARAMS);
      expect(await it.next()).toEqual({ done: false, value: terminal });
      expect(await it.next()).toEqual({ done: true, value: undefined });
      expect(await it.next()).toEqual({ done: true, value: undefined });
      expect((globalThis as { __aspClosed?: Record<string, boolean> }).__aspClosed?.[id]).toBe(true);
    });
  });

  describe("when an engine's run is not an iterator", () => {
    it("a run() that returns no iterator throws ASP_PLUGIN_BAD_OUTPUT", async () => {
      const p = signedEngine(
        "engine-no-iterator",
        `export default { $$type: "@asp/EnginePlugin", version: 1, kind: "engine", id: "engine-no-iterator", capabilities: ["engine"],
  register(reg) { reg.registerInit({ deps: {}, init: () => ({ run: () => "steps" }) }); } };\n`,
      );
      const result = await loadPlugins({ dirs: [p.dir], trustRoots: p.roots, policy: p.policy });
      expect(() => resolveEngine(result).run(PARAMS)).toThrowWithCode("ASP_PLUGIN_BAD_OUTPUT");
    });
  });
});
