import { describe, expect, it } from "vitest";
import {
  createDependencyRef,
  defineSandbox,
  defineVerifier,
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

describe("createDependencyRef", () => {
  it("rejects an empty key", () => {
    expect(() => createDependencyRef("")).toThrowWithCode("ASP_SDK_INVALID_DEFINITION");
  });
});
