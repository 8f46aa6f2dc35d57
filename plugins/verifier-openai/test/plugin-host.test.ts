// Through the host's plugin machinery and the Auto Mode runner: the plugin packed and signed with
// a test key, verified, granted `review` and given its options by loadPlugins, registered by
// registerPlugins over a real level store's content, selected as an independent Reviewer by
// createAutoRunner, and answering from a real loopback chat-completions server.
import "reflect-metadata";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { createAutoRunner, createScriptedEngine, type ReviewerPort } from "@asp/auto-mode";
import type { Policy } from "@asp/contracts";
import { type Digest, openStore, type Store } from "@asp/evidence";
import { loadPlugins, readTrustRoots, registerPlugins, TOKENS, writeKeyPair } from "@asp/plugin-host";
import { packPlugin } from "@asp/plugin-pack";
import { createStageFlags } from "@asp/rollout";
import { container } from "tsyringe";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { openAIReviewerIdentity } from "../src/identity.js";
import type { OpenAIReviewerOptions } from "../src/options.js";
import { openAIReviewerPlugin, PLUGIN_ID } from "../src/plugin.js";
import {
  AUTO_RUN,
  type ChatServer,
  completionBody,
  decision,
  guardianRequest,
  issues,
  pass,
  raw,
  reply,
  startChatServer,
} from "./helpers.js";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const KEY_ENV = "ASP_TEST_VERIFIER_OPENAI_KEY";
const KEY = "sk-loader-test-0123456789abcdef";
const scratch = mkdtempSync(join(tmpdir(), "asp-verifier-openai-test-"));
let packed: { dir: string; digest: string; id: string };
let pub: string;

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
  rmSync(scratch, { recursive: true, force: true });
});

let server: ChatServer;
let store: Store;
let storeDir: string;
beforeEach(async () => {
  server = await startChatServer();
  storeDir = mkdtempSync(join(scratch, "store-"));
  store = await openStore(storeDir);
});
afterEach(async () => {
  await server.close();
  await store.close().catch(() => {});
});

function policy(capabilities: Array<"review" | "guardian">): Policy {
  return {
    apiVersion: "asp.policy/v1",
    requirements: [],
    providers: [],
    grants: [],
    plugins: [{ id: packed.id, digest: packed.digest, capabilities }],
  };
}

function options(over: Partial<OpenAIReviewerOptions> = {}): OpenAIReviewerOptions {
  return { baseUrl: server.baseUrl, model: "reviewer-model", apiKeyEnv: KEY_ENV, timeoutMs: 10_000, ...over };
}

function load(pluginOptions: unknown, capabilities: Array<"review" | "guardian"> = ["review", "guardian"]) {
  return loadPlugins({
    dirs: [packed.dir],
    trustRoots: readTrustRoots([pub]),
    policy: policy(capabilities),
    kinds: ["verifier"],
    pluginOptions: { [PLUGIN_ID]: pluginOptions },
  });
}

/** The loaded verifier, registered over the store's content, as the host resolves it (answers checked). */
async function registered(o: OpenAIReviewerOptions): Promise<ReviewerPort["verifier"]> {
  const result = await load(o);
  expect(result.refused).toEqual([]);
  const child = container.createChildContainer();
  registerPlugins(child, result, {
    clock: { now: () => new Date() },
    content: {
      read: async (d: Digest) => ((await store.objects.has("blob", d)) ? store.objects.readBlob(d) : null),
    },
  });
  const [verifier] = child.resolveAll(TOKENS.Verifier);
  if (verifier === undefined) throw new Error("no verifier registered");
  expect(verifier.capabilities).toEqual(["review", "guardian"]);
  return verifier;
}

/** The loaded, registered Reviewer as an Auto Mode ReviewerPort over the store's content. */
async function reviewerPort(o: OpenAIReviewerOptions): Promise<ReviewerPort> {
  return { identity: openAIReviewerIdentity(o, { sessionId: "review-session-1" }), verifier: await registered(o) };
}

const { run: RUN, producer: PRODUCER, reviewOnly: REVIEW_ONLY, completion: COMPLETION } = AUTO_RUN;
const FLAGS = createStageFlags(["stage2_auto_run_storage", "stage4_review_completion_gate"]);

async function autoRun(reviewer: ReviewerPort) {
  const runner = createAutoRunner({
    store,
    engine: createScriptedEngine({ actor: PRODUCER, steps: [COMPLETION] }),
    reviewers: [reviewer],
    flags: FLAGS,
    attemptTimeoutMs: 30_000,
  });
  return runner.run({ run: RUN, selection: REVIEW_ONLY });
}

describe("verifier-openai through plugin-host and the Auto Mode runner", () => {
  it("the declaration claims exactly the capabilities its manifest declares (the loader checks only a subset)", () => {
    const manifest = JSON.parse(readFileSync(join(pkg, "asp-plugin.json"), "utf8")) as { capabilities: string[] };
    expect(manifest.capabilities).toEqual(["review", "guardian"]);
    expect(openAIReviewerPlugin.capabilities).toEqual(manifest.capabilities);
  });

  it("is refused ASP_PLUGIN_BAD_OPTIONS when the trusted options do not validate (a file: URL, the key itself)", async () => {
    for (const bad of [
      options({ baseUrl: "file:///etc/passwd" }),
      { ...options(), apiKey: KEY },
      { baseUrl: server.baseUrl, model: "m" },
    ]) {
      const result = await load(bad);
      expect(result.verifiers).toEqual([]);
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_BAD_OPTIONS"]);
      expect(JSON.stringify(result.refused)).not.toContain(KEY);
    }
  });

  it.each([
    ["review", ["guardian"]],
    ["guardian", ["review"]],
  ] as const)("is refused ASP_PLUGIN_CAPABILITY_NOT_GRANTED when the policy does not grant %s", async (_, granted) => {
    const result = await load(options(), [...granted]);
    expect(result.verifiers).toEqual([]);
    expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_CAPABILITY_NOT_GRANTED"]);
  });

  it("in the Guardian role, its answer passes the host's closed verify-response check", async () => {
    const verifier = await registered(options());
    const request = guardianRequest();
    for (const d of [decision(), decision({ decision: "deny", risk: "critical", recoverable: false })]) {
      // The endpoint's usage is not passed on: the host would refuse a Guardian answer carrying it.
      const body = completionBody(JSON.stringify(d)) as Record<string, unknown>;
      server.answer(raw(200, JSON.stringify({ ...body, usage: { prompt_tokens: 10, completion_tokens: 5 } })));
      expect(await verifier.verify(request)).toEqual({ kind: "guardian", ...d });
    }
    expect(server.received).toHaveLength(2);
    const sent = server.received[0]?.body as { response_format: { json_schema: { name: string } } };
    expect(sent.response_format.json_schema.name).toBe("asp_guardian_decision");
    // An allow at critical risk never reaches the host as an answer.
    server.answer(reply(decision({ risk: "critical" })));
    await expect(verifier.verify(request)).rejects.toThrowWithCode("ASP_OPENAI_SCHEMA_INVALID");
  });

  it("AM.states.3: a pass from the server, read over the store's real blobs, drives the run to Verified", async () => {
    server.answer(reply(pass()));
    const projection = await autoRun(await reviewerPort(options()));
    expect(projection.state).toBe("verified");
    expect(projection.user_truth).toMatch(/^Verified/);
    expect(projection.review_runs[0]?.reviewer).toMatchObject({
      actor_id: "asp.verifier-openai",
      fingerprint: expect.stringMatching(/^openai:reviewer-model@127\.0\.0\.1:\d+;cfg=[0-9a-f]{16}$/),
    });
    expect(projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual(["verdict"]);
    // The request carried the key, and the snapshot's blobs as the store holds them.
    expect(server.received).toHaveLength(1);
    expect(server.received[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    const body = server.received[0]?.body as { messages: Array<{ content: string }> };
    expect(JSON.parse(body.messages[1]?.content ?? "null")).toMatchObject({
      payload: { text: "The answer is 42." },
      refs: [
        { name: "artifact:result.csv", kind: "blob", text: "x,y\n40,2\n" },
        { name: "notes", kind: "blob", text: "42 = 40 + 2" },
      ],
    });
  });

  it("AM.findings.3: an issues verdict becomes open findings and completed_with_issues", async () => {
    server.answer(reply(issues(["artifact:result.csv"])));
    const projection = await autoRun(await reviewerPort(options()));
    expect(projection.state).toBe("completed_with_issues");
    expect(projection.findings.map((f) => [f.severity, f.category, f.evidence_refs, f.status])).toEqual([
      ["major", "correctness", ["artifact:result.csv"], "open"],
    ]);
  });

  it.each([
    ["a malformed body", raw(200, "{not json"), "unparseable"],
    ["schema-invalid content", reply({ verdict: "ok", findings: [], rationale: "" }), "unparseable"],
    ["a 500", raw(500, "{}"), "provider_failed"],
    ["a refusal", raw(200, JSON.stringify(completionBody(null, { refusal: "no" }))), "unparseable"],
    ["a finding citing a ref not in the snapshot", reply(issues(["artifact:invented.csv"])), "unparseable"],
  ])(
    "AM.states.8: %s on both attempts ends review_unavailable(no_admissible_verdict) with two recorded attempts, never a pass",
    async (_, answer, outcome) => {
      server.answer(answer);
      const projection = await autoRun(await reviewerPort(options()));
      expect(projection.state).toBe("review_unavailable");
      expect(projection.terminal?.unavailable_reason).toBe("no_admissible_verdict");
      expect(projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual([outcome, outcome]);
      expect(server.received).toHaveLength(2);
    },
  );

  it("AM.states.8: a slow server under the runner's deadline: two timeout attempts, each request aborted", async () => {
    server.answer(() => {});
    const runner = createAutoRunner({
      store,
      engine: createScriptedEngine({ actor: PRODUCER, steps: [COMPLETION] }),
      reviewers: [await reviewerPort(options())],
      flags: FLAGS,
      attemptTimeoutMs: 300,
    });
    const projection = await runner.run({ run: RUN, selection: REVIEW_ONLY });
    expect(projection.terminal?.unavailable_reason).toBe("no_admissible_verdict");
    expect(projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual(["timeout", "timeout"]);
    expect(await Promise.all(server.received.map((r) => r.aborted))).toEqual([true, true]);
  });

  it("AM.states.5: a Reviewer configured with the producer's own fingerprint is not eligible: no request is sent", async () => {
    const o = options();
    const port = await reviewerPort(o);
    const runner = createAutoRunner({
      store,
      engine: createScriptedEngine({
        actor: { ...PRODUCER, fingerprint: port.identity.fingerprint },
        steps: [COMPLETION],
      }),
      reviewers: [port],
      flags: FLAGS,
    });
    const projection = await runner.run({ run: RUN, selection: REVIEW_ONLY });
    expect(projection.terminal?.unavailable_reason).toBe("reviewer_independence_unavailable");
    expect(server.received).toHaveLength(0);
  });
});
