import { describe, expect, it } from "vitest";
import {
  type ActionResult,
  createDependencyRef,
  defineEngine,
  defineSandbox,
  defineVerifier,
  type EnginePort,
  type EngineStep,
  isEnginePlugin,
  isSandboxPlugin,
  isVerifierPlugin,
  type Verifier,
} from "../src/index.js";

describe("defineVerifier", () => {
  it("brands the declaration and runs nothing until the host registers it", () => {
    let registered = false;
    const plugin = defineVerifier({
      id: "verifier-x",
      capabilities: ["review"],
      register() {
        registered = true;
      },
    });
    expect(isVerifierPlugin(plugin)).toBe(true);
    expect(isSandboxPlugin(plugin)).toBe(false);
    expect(plugin.kind).toBe("verifier");
    expect(registered).toBe(false);
  });

  it("hands typed dependencies to init", async () => {
    const clock = createDependencyRef<{ now(): Date }>("asp.evidence.Clock");
    let verifier: Verifier | undefined;
    const plugin = defineVerifier({
      id: "verifier-x",
      capabilities: ["guardian"],
      register(reg) {
        reg.registerInit({
          deps: { clock },
          init: ({ clock }) => ({
            verify: async () => ({
              kind: "guardian",
              decision: "deny",
              risk: "high",
              recoverable: true,
              rationale: `at ${clock.now().toISOString()}`,
            }),
          }),
        });
      },
    });
    plugin.register({
      registerInit(init) {
        verifier = init.init({ clock: { now: () => new Date(0) } } as never, { id: plugin.id, options: {} });
      },
    });
    const r = await verifier?.verify({ kind: "guardian", actionDigest: "a", actionClass: "shell", subject: null });
    expect(r).toMatchObject({ decision: "deny", rationale: "at 1970-01-01T00:00:00.000Z" });
  });

  it.each([
    ["an unknown capability", { id: "v", capabilities: ["sandbox:bubblewrap"], register() {} }],
    ["no capabilities", { id: "v", capabilities: [], register() {} }],
    ["an empty id", { id: "", capabilities: ["review"], register() {} }],
    ["no register", { id: "v", capabilities: ["review"] }],
  ])("rejects %s", (_what, decl) => {
    expect(() => defineVerifier(decl as never)).toThrowWithCode("ASP_SDK_INVALID_DEFINITION");
  });
});

describe("defineSandbox", () => {
  it("brands a sandbox and checks its capabilities", () => {
    const plugin = defineSandbox({ id: "sandbox-x", capabilities: ["sandbox:staged_snapshot"], register() {} });
    expect(isSandboxPlugin(plugin)).toBe(true);
    expect(() => defineSandbox({ id: "s", capabilities: ["review"] as never, register() {} })).toThrowWithCode(
      "ASP_SDK_INVALID_DEFINITION",
    );
  });
});

describe("defineEngine", () => {
  /** An engine that proposes one read, then completes with what the host answered. */
  const plugin = defineEngine({
    id: "engine-x",
    capabilities: ["engine"],
    register(reg) {
      reg.registerInit({
        deps: {},
        init: () => ({
          async *run(params) {
            const result = yield { kind: "action", action: { tool: "read_file", arguments: { path: "a.txt" } } };
            yield { kind: "turn", usage: { input_tokens: 1, output_tokens: 2 } };
            yield {
              kind: "completion",
              payload: `${params.task}: ${result?.status === "executed" ? result.output : "refused"}`,
              artifacts: [],
              evidence: [],
            };
          },
        }),
      });
    },
  });

  it("brands the declaration, as no other kind", () => {
    expect(isEnginePlugin(plugin)).toBe(true);
    expect(isVerifierPlugin(plugin)).toBe(false);
    expect(isSandboxPlugin(plugin)).toBe(false);
    expect(isEnginePlugin(defineSandbox({ id: "s", capabilities: ["sandbox:content_api"], register() {} }))).toBe(
      false,
    );
    expect(plugin).toMatchObject({ kind: "engine", version: 1, capabilities: ["engine"] });
  });

  it("hands the host's ActionResult to the step after an action", async () => {
    let engine: EnginePort | undefined;
    plugin.register({
      registerInit(init) {
        engine = init.init({} as never, { id: plugin.id, options: {} });
      },
    });
    const it = engine?.run({ run: {}, task: "read", tools: [], signal: new AbortController().signal });
    const steps: EngineStep[] = [];
    const result: ActionResult = { status: "executed", action_digest: "sha256:x", output: "hello" };
    let answer: ActionResult | undefined;
    for (;;) {
      const r = await it?.next(answer);
      if (r === undefined || r.done) break;
      steps.push(r.value);
      answer = r.value.kind === "action" ? result : undefined;
    }
    expect(steps.map((s) => s.kind)).toEqual(["action", "turn", "completion"]);
    expect(steps[2]).toMatchObject({ payload: "read: hello" });
  });

  it.each([
    ["a verifier capability", { id: "e", capabilities: ["review"], register() {} }],
    ["no capabilities", { id: "e", capabilities: [], register() {} }],
    ["an empty id", { id: "", capabilities: ["engine"], register() {} }],
    ["no register", { id: "e", capabilities: ["engine"] }],
  ])("rejects %s", (_what, decl) => {
    expect(() => defineEngine(decl as never)).toThrowWithCode("ASP_SDK_INVALID_DEFINITION");
  });

  it("a verifier or a sandbox may not claim the engine capability", () => {
    expect(() => defineVerifier({ id: "v", capabilities: ["engine"] as never, register() {} })).toThrowWithCode(
      "ASP_SDK_INVALID_DEFINITION",
    );
    expect(() => defineSandbox({ id: "s", capabilities: ["engine"] as never, register() {} })).toThrowWithCode(
      "ASP_SDK_INVALID_DEFINITION",
    );
  });
});

describe("createDependencyRef", () => {
  it("rejects an empty key", () => {
    expect(() => createDependencyRef("")).toThrowWithCode("ASP_SDK_INVALID_DEFINITION");
  });
});
