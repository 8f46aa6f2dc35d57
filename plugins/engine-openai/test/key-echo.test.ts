// The key never reaches a step: a server that echoes the Authorization header back (raw or
// encoded) in its prose, split across deltas anywhere, in a tool call's name, id or arguments,
// in the final answer, or in the error bodies it sends, never gets the key into any step the
// Engine yields, nor into a failure's message.
import type { EnginePortStep } from "@asp/contracts";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createOpenAIEngine } from "../src/engine.js";
import {
  type Answer,
  type ChatServer,
  chunk,
  drive,
  ManualTimers,
  type Received,
  runParams,
  say,
  sse,
  startChatServer,
  status,
  usageChunk,
} from "./helpers.js";

// `/`, `+` and `=` make every encoding differ from the raw key (percent, base64 and base64url).
const KEY = "sk-proj_T3st/Key+9f8e=7d6c5b4a39281706";
const ENV = { ASP_TEST_ENGINE_KEY: KEY };
const MARKER = "[redacted:api-key]";

const b64 = (s: string): string => Buffer.from(s, "utf8").toString("base64");
const hex = (s: string): string => Buffer.from(s, "utf8").toString("hex");
const pctAll = (s: string): string =>
  [...Buffer.from(s, "utf8")].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");

/** The encodings a hostile server echoes, by name. */
const ECHOES: ReadonlyArray<readonly [string, (key: string) => string]> = [
  ["raw", (k) => k],
  ["base64", b64],
  ["base64url", (k) => Buffer.from(k, "utf8").toString("base64url")],
  ["base64 of 'Bearer <key>'", (k) => b64(`Bearer ${k}`)],
  ["percent-encoded", encodeURIComponent],
  ["every byte percent-encoded, upper case", (k) => pctAll(k).toUpperCase()],
  ["hex", hex],
  ["HEX", (k) => hex(k).toUpperCase()],
  ["reversed", (k) => [...k].reverse().join("")],
];

/** What must never be seen: each encoding of the key, and a long stretch of the raw key. */
const FORBIDDEN = [...new Set([...ECHOES.map(([, f]) => f(KEY)), KEY.slice(8, 30)])];

function expectNoKey(steps: readonly EnginePortStep[]): void {
  const text = JSON.stringify(steps);
  for (const f of FORBIDDEN) expect(text, `the steps carry ${f}`).not.toContain(f);
}

/** The key the request carried: the server learns it from the Authorization header. */
const keyOf = (r: Received): string => String(r.headers.authorization ?? "").replace(/^Bearer /, "");

/** The text of every prose step, joined (what a reader of the stream sees). */
const proseOf = (steps: readonly EnginePortStep[]): string =>
  steps.flatMap((s) => (s.kind === "prose" ? [s.text] : [])).join("");

let server: ChatServer;
beforeEach(async () => {
  server = await startChatServer();
});
afterEach(async () => {
  await server.close();
});

const engine = () =>
  createOpenAIEngine({
    options: { baseUrl: server.baseUrl, model: "m", apiKeyEnv: "ASP_TEST_ENGINE_KEY", requestTimeoutMs: 600_000 },
    env: ENV,
    timers: new ManualTimers((ms) => ms !== 600_000),
  });

/** An answer whose prose is `before + echo(key) + after`, the echo cut into deltas at `cuts`. */
function echoInProse(echo: (key: string) => string, cuts: readonly number[]): Answer {
  return (res, r) => {
    const text = `Your header was ${echo(keyOf(r))} as sent.`;
    const at = [0, ...cuts.map((c) => "Your header was ".length + c), text.length];
    const pieces = at.slice(1).map((end, i) => text.slice(at[i], end));
    return sse([...pieces.map((p) => chunk({ content: p })), chunk({}, "stop"), usageChunk(1, 1)])(res, r);
  };
}

describe("the API key never reaches a step", () => {
  it.each(ECHOES)(
    "echoed %s in prose split into three deltas: scrubbed from the prose and the payload",
    async (_n, echo) => {
      const encoded = echo(KEY);
      server.script(echoInProse(echo, [Math.floor(encoded.length / 3), Math.floor((2 * encoded.length) / 3)]));
      const steps = await drive(engine(), runParams().params);
      expectNoKey(steps);
      // The stream shows what the payload says: the key's stretch replaced (for base64 of
      // "Bearer <key>", the part only "Bearer " determines stays).
      expect(proseOf(steps)).toMatch(/^Your header was .*\[redacted:api-key\].* as sent\.$/);
      expect(steps.at(-1)).toMatchObject({ kind: "completion", payload: proseOf(steps) });
    },
  );

  it("the raw key split into two deltas at every position is never shown in halves", async () => {
    for (let cut = 1; cut < KEY.length; cut++) {
      server.script(echoInProse((k) => k, [cut]));
      const steps = await drive(engine(), runParams().params);
      expectNoKey(steps);
      // Neither half of the key shows up as the edge of a prose step.
      expect(proseOf(steps), `cut at ${cut}`).toBe(`Your header was ${MARKER} as sent.`);
    }
  });

  it.each(ECHOES)("echoed %s in a tool call's name, id and arguments (keys and values): scrubbed", async (_n, echo) => {
    server.script((res, r) => {
      const e = echo(keyOf(r));
      const args = JSON.stringify({ path: `notes/${e}.txt`, [e]: [e, { nested: `x${e}y` }] });
      return sse([
        chunk({
          tool_calls: [{ index: 0, id: `call_${e}`, type: "function", function: { name: `read_${e}`, arguments: "" } }],
        }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(0, 20) } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(20) } }] }),
        chunk({}, "tool_calls"),
        usageChunk(1, 1),
      ])(res, r);
    }, say("done"));
    const steps = await drive(engine(), runParams().params);
    expectNoKey(steps);
    const action = steps.find((s) => s.kind === "action");
    // The echo as scrubbed: the marker (beside what "Bearer " alone determines, for that encoding),
    // the same in every field.
    const e = (action?.kind === "action" ? action.action.tool : "").slice("read_".length);
    expect(e).toContain(MARKER);
    expect(action).toEqual({
      kind: "action",
      action: {
        tool: `read_${e}`,
        call_id: `call_${e}`,
        arguments: { path: `notes/${e}.txt`, [e]: [e, { nested: `x${e}y` }] },
      },
    });
    // The model still reads its own id back: only what the host sees is scrubbed.
    expect(server.received[1]?.body.messages.at(-1)?.tool_call_id).toBe(`call_${echo(KEY)}`);
  });

  it.each([
    [
      "a 500 whose body holds the key (twice)",
      (k: string) => status(500, { "x-echo": b64(k) }, JSON.stringify({ error: k })),
    ],
    ["a 429 whose body holds the key (twice)", (k: string) => status(429, { "retry-after": "0" }, k)],
    ["a 401 whose body holds the key", (k: string) => status(401, {}, `bad key ${k}`)],
    ["an error event holding the key", (k: string) => sse([{ error: { message: `invalid key ${k}` } }])],
    ["a refusal quoting the key", (k: string) => sse([chunk({ refusal: `I won't use ${k}` }), chunk({}, "stop")])],
    [
      "a malformed event quoting the key",
      (k: string) => (res: Parameters<Answer>[0]) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end(`data: {"oops": ${k}\n\n`);
      },
    ],
    [
      "tool arguments that are not JSON, quoting the key",
      (k: string) =>
        sse([
          chunk({ tool_calls: [{ index: 0, id: "c", function: { name: "read_file", arguments: `{"path": ${k}` } }] }),
          chunk({}, "tool_calls"),
        ]),
    ],
  ])("%s: failed, and neither its message nor any step holds the key", async (_what, make) => {
    server.script((res, r) => make(keyOf(r))(res, r));
    const steps = await drive(engine(), runParams().params);
    expect(steps.at(-1)?.kind).toBe("failed");
    expectNoKey(steps);
    expect(server.received.length).toBeGreaterThan(0);
  });
});
