// Through the host's plugin machinery: the plugin packed and signed with a test key (exactly as
// `pnpm build` packs dist/plugin), verified, granted `engine` and given its options by
// loadPlugins, registered by registerPlugins (every step checked), and driven against a real
// loopback chat-completions server.
import "reflect-metadata";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { Policy } from "@asp/contracts";
import {
  loadPlugins,
  readTrustRoots,
  registerPlugins,
  removePluginCache,
  TOKENS,
  writeKeyPair,
} from "@asp/plugin-host";
import { packPlugin } from "@asp/plugin-pack";
import { container } from "tsyringe";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { OpenAIEngineOptions } from "../src/options.js";
import { PLUGIN_ID } from "../src/plugin.js";
import { type ChatServer, call, drive, kinds, runParams, say, startChatServer } from "./helpers.js";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const KEY_ENV = "ASP_TEST_ENGINE_OPENAI_KEY";
const KEY = "sk-engine-loader-test-0123456789abcdef";
const scratch = mkdtempSync(join(tmpdir(), "asp-engine-openai-test-"));
let packed: { dir: string; digest: string; id: string };
let pub: string;
const caches: string[] = [];

beforeAll(async () => {
  // A package folder whose entry is this plugin's source entry: packPlugin bundles (ajv included)
  // and signs it exactly as `pnpm build` does for dist/plugin, without a prior build.
  const at = mkdtempSync(join(scratch, "pack-"));
  copyFileSync(join(pkg, "asp-plugin.json"), join(at, "asp-plugin.json"));
  writeFileSync(
    join(at, "package.json"),
    JSON.stringify({ aspPlugin: { entry: relative(at, join(pkg, "src", "main.ts")) } }),
  );
  const key = join(mkdtempSync(join(scratch, "key-")), "team");
  writeKeyPair(key);
  pub = `${key}.pub`;
  packed = await packPlugin(at, key);
  process.env[KEY_ENV] = KEY;
}, 60_000);

afterAll(() => {
  delete process.env[KEY_ENV];
  for (const c of caches) removePluginCache(c);
  rmSync(scratch, { recursive: true, force: true });
});

let server: ChatServer;
beforeEach(async () => {
  server = await startChatServer();
});
afterEach(async () => {
  await server.close();
});

function policy(capabilities: Array<"engine" | "review">, digest = packed.digest): Policy {
  return {
    apiVersion: "asp.policy/v1",
    requirements: [],
    providers: [],
    grants: [],
    plugins: [{ id: packed.id, digest, capabilities }],
  };
}

function options(over: Partial<OpenAIEngineOptions> = {}): OpenAIEngineOptions {
  return { baseUrl: server.baseUrl, model: "engine-model", apiKeyEnv: KEY_ENV, requestTimeoutMs: 30_000, ...over };
}

async function load(pluginOptions: unknown, p: Policy = policy(["engine"])) {
  const result = await loadPlugins({
    dirs: [packed.dir],
    trustRoots: readTrustRoots([pub]),
    policy: p,
    kinds: ["engine"],
    pluginOptions: { [PLUGIN_ID]: pluginOptions },
  });
  if (result.cacheDir !== null) caches.push(result.cacheDir);
  return result;
}

describe("engine-openai through plugin-host", () => {
  it("loads as a verified, granted engine and runs a tool call and a completion against the server", async () => {
    const result = await load(options());
    expect(result.refused).toEqual([]);
    expect(result.engines?.map((e) => [e.plugin.id, e.plugin.kind, e.evidence.authorityGrant])).toEqual([
      ["asp.engine-openai", "engine", "verified"],
    ]);
    const child = container.createChildContainer();
    registerPlugins(child, result, { clock: { now: () => new Date() }, content: { read: async () => null } });
    const [engine] = child.resolveAll(TOKENS.Engine);
    if (engine === undefined) throw new Error("no engine registered");
    expect(engine).toMatchObject({ id: "asp.engine-openai", digest: packed.digest, capabilities: ["engine"] });
    server.script(call([{ id: "c1", name: "read_file", arguments: '{"path":"README.md"}' }]), say("It greets."));
    const steps = await drive(engine, runParams().params, () => ({
      status: "executed",
      action_digest: "sha256:1",
      output: "# Hello",
    }));
    expect(kinds(steps).filter((k) => k !== "prose")).toEqual(["turn", "action", "turn", "completion"]);
    expect(steps.at(-1)).toMatchObject({ payload: "It greets." });
    expect(server.received[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(server.received[1]?.body.messages.at(-1)).toEqual({ role: "tool", tool_call_id: "c1", content: "# Hello" });
    expect(JSON.stringify(steps)).not.toContain(KEY);
  });

  it.each([
    ["a file: URL", () => options({ baseUrl: "file:///etc/passwd" })],
    ["the key itself", () => ({ ...options(), apiKey: KEY })],
    ["no apiKeyEnv", () => ({ baseUrl: server.baseUrl, model: "m" })],
  ])("is refused ASP_PLUGIN_BAD_OPTIONS for options with %s, and the refusal never holds the key", async (_w, bad) => {
    const result = await load(bad());
    expect(result.engines).toEqual([]);
    expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_BAD_OPTIONS"]);
    expect(JSON.stringify(result.refused)).not.toContain(KEY);
  });

  it("is refused ASP_PLUGIN_CAPABILITY_NOT_GRANTED when the policy grants it another capability", async () => {
    const result = await load(options(), policy(["review"]));
    expect(result.engines).toEqual([]);
    expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_CAPABILITY_NOT_GRANTED"]);
  });

  it("is refused ASP_PLUGIN_NOT_GRANTED when the policy pins another digest", async () => {
    const result = await load(options(), policy(["engine"], `sha256:${"0".repeat(64)}`));
    expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_NOT_GRANTED"]);
  });

  it("is refused ASP_PLUGIN_UNTRUSTED_KEY when signed by a key the host does not trust", async () => {
    const other = join(mkdtempSync(join(scratch, "other-")), "other");
    writeKeyPair(other);
    const result = await loadPlugins({
      dirs: [packed.dir],
      trustRoots: readTrustRoots([`${other}.pub`]),
      policy: policy(["engine"]),
      kinds: ["engine"],
      pluginOptions: { [PLUGIN_ID]: options() },
    });
    expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_UNTRUSTED_KEY"]);
  });
});
