import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PluginCapability, PluginKind, Policy } from "@asp/contracts";
import { digestPlugin, readTrustRoots, type TrustRoot, writeKeyPair } from "../src/index.js";

export function tempDir(prefix = "asp-plugin-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A key pair in a temp folder: the secret key path and its trust roots. */
export function makeKey(dir = tempDir("asp-key-"), name = "team"): { key: string; pub: string; roots: TrustRoot[] } {
  const key = join(dir, name);
  writeKeyPair(key);
  return { key, pub: `${key}.pub`, roots: readTrustRoots([`${key}.pub`]) };
}

const ENTRIES: Record<PluginKind, (id: string, caps: readonly string[]) => string> = {
  provider: () => `process.stdout.write(JSON.stringify({ cwd: process.cwd(), argv: process.argv.slice(1) }));\n`,
  verifier: (id, caps) => `globalThis.__aspImported = { ...globalThis.__aspImported, ${JSON.stringify(id)}: true };
export default {
  $$type: "@asp/VerifierPlugin", version: 1, kind: "verifier", id: ${JSON.stringify(id)}, capabilities: ${JSON.stringify(caps)},
  optionsSchema: { type: "object", properties: { strict: { type: "boolean" } }, additionalProperties: false },
  register(reg) {
    reg.registerInit({
      deps: { clock: { $$type: "@asp/DependencyRef", key: "asp.plugin.Clock" } },
      init: ({ clock }, ctx) => ({
        verify: async (req) => ({ kind: "review", verdict: ctx.options.strict ? "issues" : "pass",
          findings: [{ severity: "info", category: "timing", claim: "checked", evidence_refs: [], title: "checked at " + clock.now().toISOString() }] }),
      }),
    });
  },
};
`,
  sandbox: (id, caps) => `globalThis.__aspImported = { ...globalThis.__aspImported, ${JSON.stringify(id)}: true };
export default {
  $$type: "@asp/SandboxPlugin", version: 1, kind: "sandbox", id: ${JSON.stringify(id)}, capabilities: ${JSON.stringify(caps)},
  register(reg) {
    reg.registerInit({ deps: {}, init: () => ({ stage: async () => ({ applied: true, guarantee: "staged_snapshot" }) }) });
  },
};
`,
  engine: (id, caps) => `globalThis.__aspImported = { ...globalThis.__aspImported, ${JSON.stringify(id)}: true };
export default {
  $$type: "@asp/EnginePlugin", version: 1, kind: "engine", id: ${JSON.stringify(id)}, capabilities: ${JSON.stringify(caps)},
  optionsSchema: { type: "object", properties: { greeting: { type: "string" } }, additionalProperties: false },
  register(reg) {
    reg.registerInit({
      deps: { clock: { $$type: "@asp/DependencyRef", key: "asp.plugin.Clock" } },
      init: ({ clock }, ctx) => ({
        async *run(params) {
          yield { kind: "prose", text: (ctx.options.greeting ?? "hello") + " at " + clock.now().toISOString() };
          const result = yield { kind: "action", action: { tool: "read_file", arguments: { path: "a.txt" }, call_id: "c1" } };
          yield { kind: "turn", usage: { input_tokens: 3, output_tokens: 4 } };
          const seen = result?.status === "executed" ? result.output : "refused " + result?.code;
          yield { kind: "completion", payload: params.task + ": " + seen, artifacts: [], evidence: [] };
        },
      }),
    });
  },
};
`,
};

const DEFAULT_CAPS: Record<PluginKind, PluginCapability[]> = {
  provider: ["check"],
  verifier: ["review"],
  sandbox: ["sandbox:staged_snapshot"],
  engine: ["engine"],
};

/** Write an unsigned plugin folder of `kind` and return its path. */
export function makePlugin(
  kind: PluginKind,
  options: { id?: string; parent?: string; capabilities?: PluginCapability[]; manifest?: Record<string, unknown> } = {},
): string {
  const id = options.id ?? `${kind}-test`;
  const dir = join(options.parent ?? tempDir(), id);
  mkdirSync(join(dir, "lib"), { recursive: true });
  const capabilities = options.capabilities ?? DEFAULT_CAPS[kind];
  const manifest = {
    id,
    version: "1.2.3",
    kind,
    entry: "main.mjs",
    capabilities,
    diagnosticSources: kind === "provider" ? ["test"] : [],
    protocolVersion: "1.0",
    engines: { node: ">=20" },
    ...options.manifest,
  };
  writeFileSync(join(dir, "asp-plugin.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  writeFileSync(join(dir, "main.mjs"), ENTRIES[kind](id, capabilities));
  writeFileSync(join(dir, "lib", "util.mjs"), "export const util = 1;\n");
  return dir;
}

/** A policy granting each plugin folder its id, current digest and capabilities. */
export function grantPolicy(
  plugins: Array<{ dir: string; capabilities?: PluginCapability[]; digest?: string; id?: string }>,
): Policy {
  return {
    apiVersion: "asp.policy/v1",
    requirements: [],
    providers: [],
    grants: [],
    plugins: plugins.map((p) => ({
      id: p.id ?? (p.dir.split("/").pop() as string),
      digest: p.digest ?? digestPlugin(p.dir).digest,
      capabilities: p.capabilities ?? ["check", "review", "guardian", "sandbox:staged_snapshot"],
    })),
  };
}
