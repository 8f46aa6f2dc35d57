import type { EnginePortStep } from "@asp/contracts";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createOpenAIEngine, DEFAULT_RETRY_MS, RETRY_AFTER_CAP_MS } from "../src/engine.js";
import type { OpenAIEngineOptions } from "../src/options.js";
import {
  answerChunks,
  type ChatServer,
  call,
  chunk,
  closedPort,
  drive,
  gate,
  kinds,
  ManualTimers,
  paused,
  rawStream,
  runParams,
  say,
  sse,
  stall,
  startChatServer,
  status,
  TOOLS,
  until,
  usageChunk,
} from "./helpers.js";

const KEY = "sk-test-engine-0123456789abcdef";
const ENV = { ASP_TEST_ENGINE_KEY: KEY };
/** The stall deadline: the tests fire it themselves, so its value never matters. */
const IDLE_MS = 600_000;

let server: ChatServer;
let timers: ManualTimers;
beforeEach(async () => {
  server = await startChatServer();
  // Everything but the stall deadline (the retry wait) fires on the next macrotask: no test sleeps.
  timers = new ManualTimers((ms) => ms !== IDLE_MS);
});
afterEach(async () => {
  await server.close();
});

function engine(over: Partial<OpenAIEngineOptions> = {}, env: Record<string, string | undefined> = ENV) {
  return createOpenAIEngine({
    options: {
      baseUrl: server.baseUrl,
      model: "engine-model",
      apiKeyEnv: "ASP_TEST_ENGINE_KEY",
      requestTimeoutMs: IDLE_MS,
      ...over,
    },
    env,
    timers,
    now: () => Date.parse("2026-01-01T00:00:00Z"),
  });
}

const failed = (steps: readonly EnginePortStep[]) => {
  const last = steps.at(-1);
  return last?.kind === "failed" ? { code: last.code, outcome: last.outcome } : null;
};

describe("createOpenAIEngine", () => {
  describe("when the model calls a tool", () => {
    it("proposes it as an action, sends the host's result back as the tool message, and completes on prose", async () => {
      server.script(
        call([{ id: "call_a", name: "read_file", arguments: '{"path":"README.md"}' }], "Let me look."),
        say("Done: README.md greets."),
      );
      const { params } = runParams();
      const steps = await drive(engine(), params, () => ({
        status: "executed",
        action_digest: "sha256:1",
        output: "# Hello\n",
      }));
      expect(kinds(steps).filter((k) => k !== "prose")).toEqual(["turn", "action", "turn", "completion"]);
      // Prose before the first turn is the first answer's text, after the action the second's.
      const prose = (from: number, to: number) =>
        steps
          .slice(from, to)
          .flatMap((s) => (s.kind === "prose" ? [s.text] : []))
          .join("");
      const [first = -1, second = -1] = steps.flatMap((s, i) => (s.kind === "turn" ? [i] : []));
      expect(prose(0, first)).toBe("Let me look.");
      expect(prose(first, second)).toBe("Done: README.md greets.");
      expect(steps.find((s) => s.kind === "action")).toEqual({
        kind: "action",
        action: { tool: "read_file", arguments: { path: "README.md" }, call_id: "call_a" },
      });
      expect(steps.filter((s) => s.kind === "turn")).toEqual([
        { kind: "turn", usage: { input_tokens: 11, output_tokens: 7 } },
        { kind: "turn", usage: { input_tokens: 11, output_tokens: 7 } },
      ]);
      expect(steps.at(-1)).toEqual({
        kind: "completion",
        payload: "Done: README.md greets.",
        artifacts: [],
        evidence: [],
      });
      // The second request carries the assistant's call and the host's result for it.
      expect(server.received).toHaveLength(2);
      const messages = server.received[1]?.body.messages ?? [];
      expect(messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
      expect(messages[2]).toEqual({
        role: "assistant",
        content: "Let me look.",
        tool_calls: [
          { id: "call_a", type: "function", function: { name: "read_file", arguments: '{"path":"README.md"}' } },
        ],
      });
      expect(messages[3]).toEqual({ role: "tool", tool_call_id: "call_a", content: "# Hello\n" });
    });

    it("sends a refusal back as a short text naming the host's code and reason", async () => {
      server.script(
        call([{ id: "call_w", name: "write_file", arguments: '{"path":".env","content":"x"}' }]),
        say("ok"),
      );
      const { params } = runParams();
      const steps = await drive(engine(), params, () => ({
        status: "refused",
        action_digest: "sha256:2",
        code: "ASP_AUTO_MODE_DENIED",
        reason: "the credential fence covers .env",
      }));
      expect(kinds(steps).at(-1)).toBe("completion");
      expect(server.received[1]?.body.messages.at(-1)).toEqual({
        role: "tool",
        tool_call_id: "call_w",
        content: "Refused by the host (ASP_AUTO_MODE_DENIED): the credential fence covers .env",
      });
    });

    it("proposes several calls of one answer in index order, and answers each", async () => {
      server.script(
        call([
          { id: "c1", name: "read_file", arguments: '{"path":"a.txt"}' },
          { id: "c2", name: "read_file", arguments: '{"path":"b.txt"}' },
          { name: "write_file", arguments: '{"path":"c.txt","content":"3"}' },
        ]),
        say("all read"),
      );
      const { params } = runParams();
      const steps = await drive(engine(), params, (action, n) => ({
        status: "executed",
        action_digest: `sha256:${n}`,
        output: `out ${String(action.arguments.path)}`,
      }));
      const actions = steps.flatMap((s) => (s.kind === "action" ? [s.action] : []));
      expect(actions).toEqual([
        { tool: "read_file", arguments: { path: "a.txt" }, call_id: "c1" },
        { tool: "read_file", arguments: { path: "b.txt" }, call_id: "c2" },
        // A call without an id gets one the model reads back with its result.
        { tool: "write_file", arguments: { path: "c.txt", content: "3" }, call_id: "call_1_2" },
      ]);
      const messages = server.received[1]?.body.messages ?? [];
      expect(messages.slice(3)).toEqual([
        { role: "tool", tool_call_id: "c1", content: "out a.txt" },
        { role: "tool", tool_call_id: "c2", content: "out b.txt" },
        { role: "tool", tool_call_id: "call_1_2", content: "out c.txt" },
      ]);
      expect(messages[2]?.tool_calls?.map((c) => c.id)).toEqual(["c1", "c2", "call_1_2"]);
    });

    it("a call without parameters may send empty arguments: {}", async () => {
      server.script(call([{ id: "c", name: "read_file", arguments: "" }]), say("ok"));
      const steps = await drive(engine(), runParams().params);
      expect(steps.find((s) => s.kind === "action")).toMatchObject({ action: { arguments: {} } });
    });

    it.each([
      ["arguments that are not JSON", '{"path": "README.md"'],
      ["arguments that are a JSON array", '["README.md"]'],
      ["arguments that are a JSON string", '"README.md"'],
    ])(
      "%s: the turn, then failed ASP_ENGINE_OPENAI_BAD_TOOL_CALL (parse_error), nothing proposed",
      async (_what, args) => {
        server.script(call([{ id: "c", name: "read_file", arguments: args }]));
        const steps = await drive(engine(), runParams().params);
        expect(kinds(steps).filter((k) => k !== "prose")).toEqual(["turn", "failed"]);
        expect(failed(steps)).toEqual({ code: "ASP_ENGINE_OPENAI_BAD_TOOL_CALL", outcome: "parse_error" });
        expect(server.received).toHaveLength(1);
      },
    );

    it("more tool calls in one answer than the bound is ASP_ENGINE_OPENAI_BAD_TOOL_CALL", async () => {
      server.script(call(Array.from({ length: 65 }, (_, i) => ({ id: `c${i}`, name: "read_file", arguments: "{}" }))));
      expect(failed(await drive(engine(), runParams().params))).toEqual({
        code: "ASP_ENGINE_OPENAI_BAD_TOOL_CALL",
        outcome: "parse_error",
      });
    });

    it("a tool call without a name is ASP_ENGINE_OPENAI_BAD_TOOL_CALL", async () => {
      server.script(call([{ id: "c", name: "", arguments: "{}" }]));
      expect(failed(await drive(engine(), runParams().params))).toEqual({
        code: "ASP_ENGINE_OPENAI_BAD_TOOL_CALL",
        outcome: "parse_error",
      });
    });
  });

  describe("when the model only writes prose", () => {
    it("streams each piece as a prose step before the answer has ended", async () => {
      const rest = gate();
      server.script(
        paused([chunk({ role: "assistant", content: "" }), chunk({ content: "Hel" })], rest.wait, [
          chunk({ content: "lo, " }),
          chunk({ content: "world." }),
          chunk({}, "stop"),
          usageChunk(5, 3),
        ]),
      );
      const it = engine().run(runParams().params);
      // The first piece arrives while the server still holds the rest of the answer.
      expect(await it.next()).toEqual({ done: false, value: { kind: "prose", text: "Hel" } });
      rest.open();
      const steps: EnginePortStep[] = [];
      for (let r = await it.next(); !r.done; r = await it.next()) steps.push(r.value);
      expect(steps).toEqual([
        { kind: "prose", text: "lo, " },
        { kind: "prose", text: "world." },
        { kind: "turn", usage: { input_tokens: 5, output_tokens: 3 } },
        { kind: "completion", payload: "Hello, world.", artifacts: [], evidence: [] },
      ]);
    });

    it("sends the task, the system prompt, the tools as function tools, stream and include_usage", async () => {
      server.script(say("ok"));
      await drive(engine({ temperature: 0.2, systemPrompt: "Be brief." }), runParams("Fix the typo").params);
      const r = server.received[0];
      expect(r?.method).toBe("POST");
      expect(r?.url).toBe("/v1/chat/completions");
      expect(r?.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(r?.headers.accept).toBe("text/event-stream");
      expect(r?.body).toEqual({
        model: "engine-model",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Fix the typo" },
        ],
        stream: true,
        stream_options: { include_usage: true },
        tools: TOOLS.map((t) => ({
          type: "function",
          function: { name: t.name, description: t.description, parameters: t.parameters },
        })),
        temperature: 0.2,
      });
    });

    it("offers no tools field when the host offers no tools", async () => {
      server.script(say("ok"));
      await drive(engine(), runParams("t", []).params);
      expect(server.received[0]?.body).not.toHaveProperty("tools");
    });

    it("counts 0 tokens when the server sends no usage chunk", async () => {
      server.script(say("ok", { usage: null }));
      const steps = await drive(engine(), runParams().params);
      expect(steps.find((s) => s.kind === "turn")).toEqual({
        kind: "turn",
        usage: { input_tokens: 0, output_tokens: 0 },
      });
      expect(kinds(steps).at(-1)).toBe("completion");
    });

    it("takes an answer whose stream ends without [DONE] when its finish reason came", async () => {
      server.script(sse(answerChunks("fine"), { done: false }));
      expect(kinds(await drive(engine(), runParams().params)).at(-1)).toBe("completion");
    });
  });

  describe("when the run reaches maxTurns", () => {
    it("ends max_turns after the last model call, without proposing that call's tools", async () => {
      server.script(call([{ id: "c", name: "read_file", arguments: '{"path":"a"}' }]));
      const steps = await drive(engine({ maxTurns: 2 }), runParams().params);
      expect(kinds(steps).filter((k) => k !== "prose")).toEqual(["turn", "action", "turn", "max_turns"]);
      expect(steps.at(-1)).toEqual({ kind: "max_turns", turns: 2 });
      expect(server.received).toHaveLength(2);
    });
  });

  describe("when the server fails", () => {
    it("429 then success: one retry after the Retry-After wait, then the answer", async () => {
      server.script(status(429, { "retry-after": "2" }), say("after the wait"));
      const steps = await drive(engine(), runParams().params);
      expect(steps.at(-1)).toMatchObject({ kind: "completion", payload: "after the wait" });
      expect(server.received).toHaveLength(2);
      expect(timers.requested.filter((ms) => ms !== IDLE_MS)).toEqual([2000]);
    });

    it("reads a Retry-After given as an HTTP date against the clock", async () => {
      server.script(status(503, { "retry-after": "Thu, 01 Jan 2026 00:00:05 GMT" }), say("ok"));
      expect(kinds(await drive(engine(), runParams().params)).at(-1)).toBe("completion");
      expect(timers.requested.filter((ms) => ms !== IDLE_MS)).toEqual([5000]);
    });

    it("500 twice: failed ASP_ENGINE_OPENAI_HTTP_STATUS (provider_error) after one retry", async () => {
      server.script(status(500));
      const steps = await drive(engine(), runParams().params);
      expect(steps).toEqual([
        {
          kind: "failed",
          code: "ASP_ENGINE_OPENAI_HTTP_STATUS",
          outcome: "provider_error",
          message: "the server answered HTTP 500 again after one retry",
        },
      ]);
      expect(server.received).toHaveLength(2);
      expect(timers.requested.filter((ms) => ms !== IDLE_MS)).toEqual([DEFAULT_RETRY_MS]);
    });

    it("429 twice: failed ASP_ENGINE_OPENAI_RATE_LIMITED (provider_error)", async () => {
      server.script(status(429, { "retry-after": "1" }));
      expect(failed(await drive(engine(), runParams().params))).toEqual({
        code: "ASP_ENGINE_OPENAI_RATE_LIMITED",
        outcome: "provider_error",
      });
      expect(server.received).toHaveLength(2);
    });

    it("a Retry-After beyond the cap fails at once, without a retry", async () => {
      server.script(status(429, { "retry-after": String(RETRY_AFTER_CAP_MS / 1000 + 1) }), say("never"));
      expect(failed(await drive(engine(), runParams().params))).toEqual({
        code: "ASP_ENGINE_OPENAI_RATE_LIMITED",
        outcome: "provider_error",
      });
      expect(server.received).toHaveLength(1);
    });

    it.each([
      [401, "ASP_ENGINE_OPENAI_HTTP_STATUS"],
      [400, "ASP_ENGINE_OPENAI_HTTP_STATUS"],
    ])("HTTP %i is not retried: failed %s", async (code, expected) => {
      server.script(status(code), say("never"));
      expect(failed(await drive(engine(), runParams().params))).toEqual({ code: expected, outcome: "provider_error" });
      expect(server.received).toHaveLength(1);
    });

    it("a redirect is never followed (the key would travel with it)", async () => {
      const other = await startChatServer(say("followed"));
      server.script(status(307, { location: `${other.baseUrl}/chat/completions` }));
      expect(failed(await drive(engine(), runParams().params))).toEqual({
        code: "ASP_ENGINE_OPENAI_HTTP_STATUS",
        outcome: "provider_error",
      });
      expect(other.received).toHaveLength(0);
      await other.close();
    });

    it("a refused connection is ASP_ENGINE_OPENAI_CONNECTION_FAILED (provider_error)", async () => {
      const steps = await drive(engine({ baseUrl: `http://127.0.0.1:${await closedPort()}/v1` }), runParams().params);
      expect(failed(steps)).toEqual({ code: "ASP_ENGINE_OPENAI_CONNECTION_FAILED", outcome: "provider_error" });
    });

    it.each([
      [
        "an event that is not JSON",
        rawStream("data: {not json\n\n"),
        "ASP_ENGINE_OPENAI_MALFORMED_STREAM",
        "parse_error",
      ],
      [
        "a body that is not UTF-8",
        rawStream(new Uint8Array([0x64, 0x61, 0x74, 0x61, 0x3a, 0x20, 0xff, 0x0a, 0x0a])),
        "ASP_ENGINE_OPENAI_MALFORMED_STREAM",
        "parse_error",
      ],
      [
        "a stream that ends before the answer does",
        sse([chunk({ content: "half" })], { done: false }),
        "ASP_ENGINE_OPENAI_MALFORMED_STREAM",
        "parse_error",
      ],
      [
        "an answer cut off at its length limit",
        sse([chunk({ content: "cut" }), chunk({}, "length")]),
        "ASP_ENGINE_OPENAI_MALFORMED_STREAM",
        "parse_error",
      ],
      [
        "a JSON body instead of a stream",
        status(200, {}, JSON.stringify({ choices: [{ message: { content: "x" } }] })),
        "ASP_ENGINE_OPENAI_MALFORMED_STREAM",
        "parse_error",
      ],
      [
        "a refusal",
        sse([chunk({ refusal: "I can't help with that." }), chunk({}, "stop")]),
        "ASP_ENGINE_OPENAI_REFUSAL",
        "parse_error",
      ],
      [
        "a content filter stop",
        sse([chunk({ content: "x" }), chunk({}, "content_filter")]),
        "ASP_ENGINE_OPENAI_REFUSAL",
        "parse_error",
      ],
      [
        "an answer over the byte bound",
        rawStream(`data: ${JSON.stringify(chunk({ content: "x".repeat(5 * 1024 * 1024) }))}\n\n`),
        "ASP_ENGINE_OPENAI_RESPONSE_TOO_LARGE",
        "parse_error",
      ],
      [
        "an error event in the stream",
        sse([{ error: { message: "overloaded", type: "server_error" } }]),
        "ASP_ENGINE_OPENAI_STREAM_ERROR",
        "provider_error",
      ],
    ])("%s: failed %s (%s)", async (_what, answer, code, outcome) => {
      server.script(answer);
      expect(failed(await drive(engine(), runParams().params))).toEqual({ code, outcome });
    });
  });

  describe("when the server stalls", () => {
    it("before its headers: failed ASP_ENGINE_OPENAI_TIMEOUT (timeout) at the stall deadline, the request aborted", async () => {
      const answer = stall(null);
      server.script(answer);
      const it = engine().run(runParams().params);
      const step = it.next();
      await answer.stalled;
      await until(() => timers.pending().includes(IDLE_MS));
      timers.fireAll();
      expect(await step).toEqual({
        done: false,
        value: {
          kind: "failed",
          code: "ASP_ENGINE_OPENAI_TIMEOUT",
          outcome: "timeout",
          message: `no byte of the answer for ${IDLE_MS} ms; the request was aborted`,
        },
      });
      expect(await it.next()).toEqual({ done: true, value: undefined });
      expect(await server.received[0]?.aborted).toBe(true);
    });

    it("mid-answer: the prose so far, then failed ASP_ENGINE_OPENAI_TIMEOUT; the host holding a step never counts", async () => {
      const answer = stall([chunk({ role: "assistant", content: "" }), chunk({ content: "Working" })]);
      server.script(answer);
      const it = engine().run(runParams().params);
      // While the host holds the prose step no deadline is armed: only a wait for bytes counts.
      expect(await it.next()).toEqual({ done: false, value: { kind: "prose", text: "Working" } });
      expect(timers.pending()).toEqual([]);
      const step = it.next();
      await until(() => timers.pending().length > 0);
      timers.fireAll();
      expect(await step).toMatchObject({
        done: false,
        value: { kind: "failed", code: "ASP_ENGINE_OPENAI_TIMEOUT", outcome: "timeout" },
      });
      expect(await server.received[0]?.aborted).toBe(true);
    });
  });

  describe("when the run's signal aborts", () => {
    it("mid-stream: the in-flight request is aborted and the run returns with no further step", async () => {
      const answer = stall([chunk({ role: "assistant", content: "" }), chunk({ content: "Thinking" })]);
      server.script(answer);
      const { params, controller } = runParams();
      const it = engine().run(params);
      expect(await it.next()).toMatchObject({ value: { kind: "prose" } });
      const step = it.next();
      await until(() => timers.pending().length > 0);
      controller.abort();
      expect(await step).toEqual({ done: true, value: undefined });
      expect(await server.received[0]?.aborted).toBe(true);
      expect(await it.next()).toEqual({ done: true, value: undefined });
    });

    it("while the host holds a step: the connection closes at once, and the next next() is done", async () => {
      server.script(stall([chunk({ role: "assistant", content: "" }), chunk({ content: "Thinking" })]));
      const { params, controller } = runParams();
      const it = engine().run(params);
      expect(await it.next()).toMatchObject({ value: { kind: "prose" } });
      controller.abort();
      expect(await server.received[0]?.aborted).toBe(true);
      expect(await it.next()).toEqual({ done: true, value: undefined });
    });

    it("during the retry wait: no second request", async () => {
      const manual = new ManualTimers();
      timers = manual;
      server.script(status(503, { "retry-after": "3" }), say("never"));
      const { params, controller } = runParams();
      const it = engine().run(params);
      const step = it.next();
      await until(() => manual.pending().includes(3000));
      controller.abort();
      expect(await step).toEqual({ done: true, value: undefined });
      expect(server.received).toHaveLength(1);
    });

    it("before the run: nothing is sent", async () => {
      server.script(say("never"));
      const { params, controller } = runParams();
      controller.abort();
      expect(await drive(engine(), params)).toEqual([]);
      expect(server.received).toHaveLength(0);
    });

    it("after an action, before its result is used: nothing more is sent", async () => {
      server.script(call([{ id: "c", name: "read_file", arguments: "{}" }]), say("never"));
      const { params, controller } = runParams();
      const it = engine().run(params);
      let r = await it.next();
      while (!r.done && r.value.kind !== "action") r = await it.next();
      controller.abort();
      expect(await it.next({ status: "executed", action_digest: "sha256:0", output: "x" })).toEqual({
        done: true,
        value: undefined,
      });
      expect(server.received).toHaveLength(1);
    });
  });

  describe("when the key or the params are not there", () => {
    it.each([
      ["unset", {}],
      ["empty", { ASP_TEST_ENGINE_KEY: "" }],
      ["not one token", { ASP_TEST_ENGINE_KEY: "sk-a\r\nX-Evil: 1" }],
    ])(
      "a key that is %s: failed ASP_ENGINE_OPENAI_NO_API_KEY, nothing sent, the value never quoted",
      async (_w, env) => {
        server.script(say("never"));
        const steps = await drive(engine({}, env), runParams().params);
        expect(failed(steps)).toEqual({ code: "ASP_ENGINE_OPENAI_NO_API_KEY", outcome: "provider_error" });
        expect(JSON.stringify(steps)).not.toContain("X-Evil");
        expect(server.received).toHaveLength(0);
      },
    );

    it("reads the key at each request, not at creation", async () => {
      const env: Record<string, string | undefined> = {};
      const e = engine({}, env);
      env.ASP_TEST_ENGINE_KEY = "sk-set-after-creation-1234";
      server.script(say("ok"));
      await drive(e, runParams().params);
      expect(server.received[0]?.headers.authorization).toBe("Bearer sk-set-after-creation-1234");
    });

    it("a host that answers an action with no ActionResult: failed ASP_ENGINE_OPENAI_BAD_REQUEST", async () => {
      server.script(call([{ id: "c", name: "read_file", arguments: "{}" }]), say("never"));
      const it = engine().run(runParams().params);
      let r = await it.next();
      while (!r.done && r.value.kind !== "action") r = await it.next();
      expect(await it.next()).toMatchObject({ value: { kind: "failed", code: "ASP_ENGINE_OPENAI_BAD_REQUEST" } });
      expect(server.received).toHaveLength(1);
    });

    it("a run without a task: failed ASP_ENGINE_OPENAI_BAD_REQUEST, nothing sent", async () => {
      const { params } = runParams();
      expect(failed(await drive(engine(), { ...params, task: "" }))).toEqual({
        code: "ASP_ENGINE_OPENAI_BAD_REQUEST",
        outcome: "provider_error",
      });
      expect(server.received).toHaveLength(0);
    });

    it.each([
      ["a file: URL", { baseUrl: "file:///etc/passwd" }],
      ["credentials in the URL", { baseUrl: "https://user:pw@example.test/v1" }],
      ["the key itself as an option", { apiKey: KEY }],
      ["a turn limit of 0", { maxTurns: 0 }],
    ])("options with %s are refused ASP_ENGINE_OPENAI_BAD_OPTIONS at creation", (_w, over) => {
      expect(() => engine(over as Partial<OpenAIEngineOptions>)).toThrowWithCode("ASP_ENGINE_OPENAI_BAD_OPTIONS");
    });
  });
});
