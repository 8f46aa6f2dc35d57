// A real loopback HTTP server speaking the streaming chat-completions API, in the test process,
// whose answers each test scripts (server-sent events, statuses, stalls); a timer seam the tests
// fire themselves; and a host loop that drives an Engine run the way the Auto Mode host does.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ActionResult, EnginePort, EnginePortStep, EngineRunParams, EngineToolSpec } from "@asp/contracts";
import type { EngineTimers } from "../src/client.js";

/** One request the server received. */
export interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: ChatBody;
  /** Resolves true when the client closed the connection before the server finished answering. */
  readonly aborted: Promise<boolean>;
}

/** The request body the Engine sends (the fields the tests read). */
export interface ChatBody {
  readonly model: string;
  readonly stream: boolean;
  readonly stream_options?: { include_usage?: boolean };
  readonly temperature?: number;
  readonly tools?: Array<{ type: string; function: { name: string; description: string; parameters: unknown } }>;
  readonly messages: Array<{
    role: string;
    content: string | null;
    tool_call_id?: string;
    tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  }>;
}

/** How the server answers one request. */
export type Answer = (res: ServerResponse, request: Received) => void | Promise<void>;

/** A running loopback chat-completions server. */
export interface ChatServer {
  /** `http://127.0.0.1:PORT/v1`: the `baseUrl` option. */
  readonly baseUrl: string;
  readonly received: Received[];
  /** Answer the next requests with these, in order; the last one stays in force. */
  script(...answers: Answer[]): void;
  close(): Promise<void>;
}

/** Start a server on 127.0.0.1, port 0. */
export async function startChatServer(...answers: Answer[]): Promise<ChatServer> {
  let queue = [...answers];
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: ChatBody;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatBody;
      } catch {
        body = null as unknown as ChatBody;
      }
      const aborted = new Promise<boolean>((resolve) => {
        res.on("close", () => resolve(!res.writableFinished));
      });
      const r: Received = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body, aborted };
      received.push(r);
      const answer = queue.length > 1 ? queue.shift() : queue[0];
      if (answer === undefined) {
        res.writeHead(500).end();
        return;
      }
      void answer(res, r);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    received,
    script: (...a) => {
      queue = [...a];
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on: bound, then closed (connection refused). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

// ---------------------------------------------------------------- the stream's chunks

/** One `chat.completion.chunk` with a delta for choice 0. */
export function chunk(delta: Record<string, unknown>, finish: string | null = null): unknown {
  return {
    id: "chatcmpl-test",
    object: "chat.completion.chunk",
    created: 0,
    model: "test-model",
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
}

/** The usage chunk `stream_options.include_usage` asks for (no choices). */
export function usageChunk(prompt: number, completion: number): unknown {
  return {
    id: "chatcmpl-test",
    object: "chat.completion.chunk",
    created: 0,
    model: "test-model",
    choices: [],
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
  };
}

/** A tool call as the model makes it. */
export interface ScriptedCall {
  readonly id?: string;
  readonly name: string;
  /** The arguments text, sent in two fragments. */
  readonly arguments: string;
}

/** The chunks of an answer that says `text` (in `pieces` deltas) and calls `calls`. */
export function answerChunks(
  text: string,
  calls: readonly ScriptedCall[] = [],
  options: { usage?: [number, number] | null; pieces?: number } = {},
): unknown[] {
  const out: unknown[] = [chunk({ role: "assistant", content: "" })];
  const pieces = options.pieces ?? 3;
  const size = Math.max(1, Math.ceil(text.length / pieces));
  for (let at = 0; at < text.length; at += size) out.push(chunk({ content: text.slice(at, at + size) }));
  // Interleaved, as servers stream parallel calls: every call's head, then each one's two halves.
  calls.forEach((c, index) => {
    out.push(
      chunk({
        tool_calls: [
          {
            index,
            ...(c.id === undefined ? {} : { id: c.id }),
            type: "function",
            function: { name: c.name, arguments: "" },
          },
        ],
      }),
    );
  });
  for (const half of [0, 1] as const) {
    calls.forEach((c, index) => {
      const mid = Math.floor(c.arguments.length / 2);
      const part = half === 0 ? c.arguments.slice(0, mid) : c.arguments.slice(mid);
      out.push(chunk({ tool_calls: [{ index, function: { arguments: part } }] }));
    });
  }
  out.push(chunk({}, calls.length > 0 ? "tool_calls" : "stop"));
  const usage: [number, number] | null = options.usage === undefined ? [11, 7] : options.usage;
  if (usage !== null) out.push(usageChunk(usage[0], usage[1]));
  return out;
}

const frame = (data: unknown): string => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;

/** Answer 200 with these chunks as server-sent events, then `data: [DONE]`. */
export function sse(chunks: readonly unknown[], options: { done?: boolean } = {}): Answer {
  return (res) => {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const c of chunks) res.write(frame(c));
    if (options.done !== false) res.write(frame("[DONE]"));
    res.end();
  };
}

/** Answer 200 with the events of a reply saying `text`. */
export const say = (text: string, options?: Parameters<typeof answerChunks>[2]): Answer =>
  sse(answerChunks(text, [], options));

/** Answer 200 with the events of a reply calling `calls` (and saying `text` first). */
export const call = (calls: readonly ScriptedCall[], text = ""): Answer => sse(answerChunks(text, calls));

/** Answer `status` with `body` and `headers`. */
export function status(code: number, headers: Record<string, string> = {}, body = "{}"): Answer {
  return (res) => {
    res.writeHead(code, { "content-type": "application/json", ...headers });
    res.end(body);
  };
}

/** Answer with these raw bytes as the event stream body. */
export function rawStream(body: string | Uint8Array): Answer {
  return (res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(body);
  };
}

/** A gate the test opens: `wait` resolves once `open` was called. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open = (): void => {};
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}

/**
 * Send `head` chunks, then stall forever (no byte more, connection kept open); `stalled` resolves
 * once the head was written. With no head, the headers are never sent either.
 */
export function stall(head: readonly unknown[] | null): Answer & { stalled: Promise<void> } {
  const g = gate();
  const answer = ((res: ServerResponse) => {
    if (head !== null) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const c of head) res.write(frame(c));
    }
    g.open();
  }) as unknown as Answer & { stalled: Promise<void> };
  answer.stalled = g.wait;
  return answer;
}

/** Send `head`, wait for `until`, then send `tail` and `[DONE]`. */
export function paused(head: readonly unknown[], until: Promise<void>, tail: readonly unknown[]): Answer {
  return async (res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const c of head) res.write(frame(c));
    await until;
    for (const c of tail) res.write(frame(c));
    res.write(frame("[DONE]"));
    res.end();
  };
}

// ---------------------------------------------------------------- timers and the host loop

/**
 * Timers the test fires: nothing fires on its own except delays `autoFire` selects (fired on the
 * next macrotask, never after a wall-clock wait). Every requested delay is recorded.
 */
export class ManualTimers implements EngineTimers {
  readonly requested: number[] = [];
  readonly #pending = new Map<number, { callback: () => void; ms: number }>();
  #next = 1;

  constructor(private readonly autoFire: (ms: number) => boolean = () => false) {}

  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.#next++;
    this.requested.push(ms);
    this.#pending.set(id, { callback, ms });
    if (this.autoFire(ms)) setImmediate(() => this.#fire(id));
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#pending.delete(handle as number);
  }

  /** Delays still pending. */
  pending(): number[] {
    return [...this.#pending.values()].map((p) => p.ms);
  }

  /** Fire every pending timer; how many fired. */
  fireAll(): number {
    const ids = [...this.#pending.keys()];
    for (const id of ids) this.#fire(id);
    return ids.length;
  }

  #fire(id: number): void {
    const p = this.#pending.get(id);
    if (p === undefined) return;
    this.#pending.delete(id);
    p.callback();
  }
}

/** Resolve once `condition()` holds, checking after each turn of the event loop (no wall-clock wait). */
export async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

/** The tools the host offers in these tests. */
export const TOOLS: readonly EngineToolSpec[] = [
  {
    name: "read_file",
    description: "Read a file of the repository.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
  {
    name: "write_file",
    description: "Write a file of the repository.",
    parameters: {
      type: "object",
      properties: { path: { type: "string" }, content: { type: "string" } },
      required: ["path", "content"],
    },
  },
];

/** Run params for `task`, with a fresh abort controller. */
export function runParams(task = "Add a greeting to README.md", tools = TOOLS) {
  const controller = new AbortController();
  const params: EngineRunParams = {
    run: { root_frame_id: "frame-1", branch_id: "branch-1", turn_id: "turn-1", execution_id: "exec-1" },
    task,
    tools,
    signal: controller.signal,
  };
  return { params, controller };
}

/** Drive a whole run as the host does: every action answered by `answer`; the steps in order. */
export async function drive(
  engine: EnginePort,
  params: EngineRunParams,
  answer: (action: Extract<EnginePortStep, { kind: "action" }>["action"], n: number) => ActionResult = () => ({
    status: "executed",
    action_digest: "sha256:0",
    output: "ok",
  }),
): Promise<EnginePortStep[]> {
  const it = engine.run(params);
  const steps: EnginePortStep[] = [];
  let result: ActionResult | undefined;
  let actions = 0;
  for (;;) {
    const r = await it.next(result);
    if (r.done) return steps;
    steps.push(r.value);
    result = r.value.kind === "action" ? answer(r.value.action, actions++) : undefined;
  }
}

/** The kinds of `steps`, in order. */
export const kinds = (steps: readonly EnginePortStep[]): string[] => steps.map((s) => s.kind);
