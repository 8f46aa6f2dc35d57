import type {
  AbortSignalLike,
  ActionResult,
  EnginePort,
  EnginePortStep,
  EngineRunParams,
  EngineToolSpec,
  ProposedAction,
} from "@asp/contracts";
import { type ChatStream, type EngineTimers, postChat, RunAborted, SYSTEM_TIMERS } from "./client.js";
import { OpenAIEngineError } from "./errors.js";
import { type OpenAIEngineOptions, type ResolvedOptions, resolveOptions } from "./options.js";
import { createScrubber, jsonHolds, type Scrubber, StreamScrubber, scrubJson } from "./scrub.js";
import { DONE, SseDecoder } from "./sse.js";
import { parseToolCall, type RawToolCall, TurnAccumulator, type TurnAnswer } from "./turn.js";

/** The longest `Retry-After` honoured before the one retry of a 429 or 5xx; beyond it the run fails at once. */
export const RETRY_AFTER_CAP_MS = 30_000;
/** The wait before the retry when the answer names none. */
export const DEFAULT_RETRY_MS = 1_000;
/** The largest completion payload, in characters (what the host accepts in one step). */
export const MAX_PAYLOAD_CHARS = 1024 * 1024;
/** The largest prose step, in characters; longer streamed text becomes several steps. */
const MAX_PROSE_CHARS = 64 * 1024;

/** What {@link createOpenAIEngine} needs: its trusted options and its seams. */
export interface OpenAIEngineParams {
  readonly options: OpenAIEngineOptions;
  /** Where `apiKeyEnv` is looked up, at every request (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Where deadlines are scheduled (default the global timers): the stall deadline and the retry wait. */
  readonly timers?: EngineTimers;
  /** Milliseconds since the epoch, for a `Retry-After` given as an HTTP date (default `Date.now`). */
  readonly now?: () => number;
}

type Step = EnginePortStep;
type Run = AsyncGenerator<Step, void, ActionResult | undefined>;

type ChatMessage =
  | { readonly role: "system" | "user"; readonly content: string }
  | {
      readonly role: "assistant";
      readonly content: string | null;
      readonly tool_calls?: ReadonlyArray<{
        readonly id: string;
        readonly type: "function";
        readonly function: { readonly name: string; readonly arguments: string };
      }>;
    }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string };

// One printable header token: a key with CR, LF or spaces could split the header, and fetch's
// own complaint about it would quote the value.
const KEY = /^[\x21-\x7e]{1,4096}$/;

const badRequest = (message: string, field: string): OpenAIEngineError =>
  new OpenAIEngineError("ASP_ENGINE_OPENAI_BAD_REQUEST", message, { data: { field } });

/** The key, read from the environment at request time. */
function apiKey(env: Readonly<Record<string, string | undefined>>, name: string): string {
  const key = env[name];
  if (typeof key !== "string" || !KEY.test(key)) {
    throw new OpenAIEngineError(
      "ASP_ENGINE_OPENAI_NO_API_KEY",
      `the environment variable ${name} does not hold an API key (unset, empty or not one printable token)`,
      { data: { apiKeyEnv: name } },
    );
  }
  return key;
}

/** True once the run's signal aborted (a call, so a check made earlier does not narrow it). */
function aborted(params: EngineRunParams | undefined): boolean {
  return params?.signal?.aborted === true;
}

/** The run's task and tools, checked: what the Engine port promises the Engine. */
function checkParams(params: EngineRunParams): { task: string; tools: readonly EngineToolSpec[] } {
  if (typeof params?.task !== "string" || params.task.length === 0) throw badRequest("a run needs a task", "task");
  if (!Array.isArray(params.tools)) throw badRequest("a run's tools must be an array", "tools");
  if (typeof params.signal?.addEventListener !== "function") throw badRequest("a run needs an abort signal", "signal");
  for (const [i, t] of params.tools.entries()) {
    if (
      typeof t?.name !== "string" ||
      t.name === "" ||
      typeof t.description !== "string" ||
      typeof t.parameters !== "object" ||
      t.parameters === null
    ) {
      throw badRequest(`tool ${i} needs a name, a description and a parameters schema`, `tools/${i}`);
    }
  }
  return { task: params.task, tools: params.tools };
}

/** The host's answer to an action, checked; anything else is the host breaking the protocol. */
function checkResult(result: unknown): ActionResult {
  const r = result as Partial<Record<string, unknown>> | null | undefined;
  if (r?.status === "executed" && typeof r.output === "string") return r as ActionResult;
  if (r?.status === "refused" && typeof r.code === "string" && typeof r.reason === "string") return r as ActionResult;
  throw badRequest("the host answered an action with no ActionResult", "result");
}

/** What the model reads for one answered tool call. */
function toolMessage(id: string, result: ActionResult): ChatMessage {
  return {
    role: "tool",
    tool_call_id: id,
    content: result.status === "executed" ? result.output : `Refused by the host (${result.code}): ${result.reason}`,
  };
}

/**
 * The delay before the one retry, from `Retry-After` (delta-seconds or an HTTP date), or
 * {@link DEFAULT_RETRY_MS} when it is absent or unreadable.
 */
export function retryDelayMs(header: string | null, now: number): number {
  if (header === null) return DEFAULT_RETRY_MS;
  const text = header.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? DEFAULT_RETRY_MS : Math.max(0, at - now);
}

/** Wait `ms` on the timer seam; false when the run's signal aborted first. */
function sleep(ms: number, signal: AbortSignalLike, timers: EngineTimers): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const onAbort = (): void => {
      timers.clearTimeout(handle);
      resolve(false);
    };
    const handle = timers.setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** The failure of a status the Engine does not retry, or retried once already. */
function statusFailure(status: number, retried: boolean, retryAfterMs: number | null): OpenAIEngineError {
  const after = retried
    ? " again after one retry"
    : retryAfterMs === null
      ? ""
      : `, asking for a wait over the ${RETRY_AFTER_CAP_MS} ms cap`;
  if (status === 429) {
    return new OpenAIEngineError(
      "ASP_ENGINE_OPENAI_RATE_LIMITED",
      `the server answered 429 Too Many Requests${after}`,
      {
        data: { status, retried, ...(retryAfterMs === null ? {} : { retryAfterMs }) },
      },
    );
  }
  return new OpenAIEngineError("ASP_ENGINE_OPENAI_HTTP_STATUS", `the server answered HTTP ${status}${after}`, {
    data: { status, retried },
  });
}

/** Per-run state: the conversation, the keys used (for the scrub) and the turn count. */
class Conversation {
  readonly messages: ChatMessage[];
  readonly #keys = new Set<string>();
  #scrubber: Scrubber = createScrubber([]);
  turns = 0;

  constructor(options: ResolvedOptions, task: string) {
    this.messages = [
      { role: "system", content: options.systemPrompt },
      { role: "user", content: task },
    ];
  }

  /** Remember a key this run sent, so everything shown afterwards is scrubbed of it. */
  useKey(key: string): void {
    if (this.#keys.has(key)) return;
    this.#keys.add(key);
    this.#scrubber = createScrubber([...this.#keys]);
  }

  get scrubber(): Scrubber {
    return this.#scrubber;
  }
}

/** The proposed actions of an answer's tool calls, each with the id the model reads back. */
function actionsOf(
  answer: TurnAnswer,
  turn: number,
  scrubber: Scrubber,
): Array<{ id: string; raw: RawToolCall; action: ProposedAction }> {
  return answer.toolCalls.map((raw) => {
    const call = parseToolCall(raw);
    const id = raw.id ?? `call_${turn}_${raw.index}`;
    const args = scrubJson(call.arguments, scrubber) as Record<string, unknown>;
    const tool = scrubber.scrub(call.name);
    const callId = scrubber.scrub(id);
    if (jsonHolds(args, scrubber) || scrubber.holds(tool) || scrubber.holds(callId)) {
      throw new OpenAIEngineError("ASP_ENGINE_OPENAI_MALFORMED_STREAM", "the answer keeps reforming the key", {
        data: { reason: "key reforms after scrub" },
      });
    }
    return {
      id,
      raw,
      action: { tool, arguments: args, ...(callId.length <= 256 ? { call_id: callId } : {}) },
    };
  });
}

/** Prose steps for `text`, each at most {@link MAX_PROSE_CHARS}. */
function* proseSteps(text: string, scrubber: Scrubber): Generator<Step> {
  if (scrubber.holds(text)) {
    throw new OpenAIEngineError("ASP_ENGINE_OPENAI_MALFORMED_STREAM", "the answer keeps reforming the key", {
      data: { reason: "key reforms after scrub" },
    });
  }
  for (let at = 0; at < text.length; at += MAX_PROSE_CHARS) {
    yield { kind: "prose", text: text.slice(at, at + MAX_PROSE_CHARS) };
  }
}

/** How a finished answer ends the run, or null when its tool calls go on to the host. */
function answerFailure(answer: TurnAnswer, sawDone: boolean): OpenAIEngineError | null {
  if (answer.refusal !== "" || answer.finishReason === "content_filter") {
    return new OpenAIEngineError("ASP_ENGINE_OPENAI_REFUSAL", "the model refused the request", {
      data: { finish_reason: answer.finishReason },
    });
  }
  if (answer.finishReason === "length") {
    return new OpenAIEngineError("ASP_ENGINE_OPENAI_MALFORMED_STREAM", "the answer was cut off at its length limit", {
      data: { reason: "cut off (finish_reason length)" },
    });
  }
  if (!sawDone && answer.finishReason === null) {
    return new OpenAIEngineError("ASP_ENGINE_OPENAI_MALFORMED_STREAM", "the stream ended before the answer did", {
      data: { reason: "ended early" },
    });
  }
  return null;
}

/**
 * Create the Engine: `run(params)` drives one agent run against the configured
 * chat-completions endpoint, streaming (`stream: true`, `stream_options.include_usage`), the task
 * as the user message and `params.tools` as function tools. Content deltas become `prose` steps
 * as they arrive; after the stream, a `turn` step carries the call's usage; each tool call becomes
 * an `action` step, and the host's `ActionResult` (the value of the next `next()`) is sent back as
 * that call's `tool` message. An answer without tool calls ends the run with a `completion` whose
 * payload is its text; `maxTurns` model calls end it `max_turns`; every failure is a `failed` step
 * with its code and attempt outcome. When `params.signal` aborts, the in-flight request is
 * aborted and the run returns without another step. The Engine never runs a tool.
 *
 * @throws OpenAIEngineError `ASP_ENGINE_OPENAI_BAD_OPTIONS` at creation.
 * @example
 * ```ts
 * const engine = createOpenAIEngine({
 *   options: { baseUrl: "https://api.openai.com/v1", model: "gpt-4o-mini", apiKeyEnv: "OPENAI_API_KEY" },
 * });
 * const it = engine.run({ run, task: "Fix the failing test", tools, signal });
 * ```
 */
export function createOpenAIEngine(params: OpenAIEngineParams): EnginePort {
  const options = resolveOptions(params.options);
  const env = params.env ?? process.env;
  const timers = params.timers ?? SYSTEM_TIMERS;
  const now = params.now ?? Date.now;
  const url = `${options.baseUrl}/chat/completions`;

  /** One model call's stream, with the one retry of a 429/5xx; null when the run was aborted. */
  async function open(convo: Conversation, tools: readonly EngineToolSpec[], signal: AbortSignalLike) {
    for (let attempt = 0; ; attempt++) {
      const key = apiKey(env, options.apiKeyEnv);
      convo.useKey(key);
      const answer = await postChat({
        url,
        apiKey: key,
        idleTimeoutMs: options.requestTimeoutMs,
        signal,
        timers,
        body: {
          model: options.model,
          messages: convo.messages,
          stream: true,
          stream_options: { include_usage: true },
          ...(tools.length === 0
            ? {}
            : {
                tools: tools.map((t) => ({
                  type: "function",
                  function: { name: t.name, description: t.description, parameters: t.parameters },
                })),
              }),
          ...(options.temperature === null ? {} : { temperature: options.temperature }),
        },
      });
      if (answer.kind === "aborted") return null;
      if (answer.kind === "stream") return answer.stream;
      const retryable = answer.status === 429 || (answer.status >= 500 && answer.status <= 599);
      if (!retryable || attempt > 0) throw statusFailure(answer.status, attempt > 0, null);
      const wait = retryDelayMs(answer.retryAfter, now());
      if (wait > RETRY_AFTER_CAP_MS) throw statusFailure(answer.status, false, wait);
      if (!(await sleep(wait, signal, timers))) return null;
    }
  }

  /** Read one answer's stream: its prose as it arrives, then the answer and whether `[DONE]` came. */
  async function* readAnswer(
    stream: ChatStream,
    scrubber: Scrubber,
  ): AsyncGenerator<Step, { answer: TurnAnswer; sawDone: boolean }, ActionResult | undefined> {
    const sse = new SseDecoder();
    const turn = new TurnAccumulator();
    const shown = new StreamScrubber(scrubber);
    let sawDone = false;
    while (!sawDone) {
      const bytes = await stream.read();
      const events = bytes === null ? sse.end() : sse.push(bytes);
      for (const data of events) {
        if (data === DONE) {
          sawDone = true;
          break;
        }
        const text = turn.apply(data);
        if (text !== "") yield* proseSteps(shown.push(text), scrubber);
      }
      if (bytes === null) break;
    }
    await stream.close();
    yield* proseSteps(shown.flush(), scrubber);
    return { answer: turn.answer(), sawDone };
  }

  /** The run, one model call per loop: the named steps above, in order. */
  async function* drive(params: EngineRunParams, convo: Conversation, tools: readonly EngineToolSpec[]): Run {
    const signal = params.signal;
    for (;;) {
      const stream = await open(convo, tools, signal);
      if (stream === null) return;
      let read: { answer: TurnAnswer; sawDone: boolean };
      try {
        read = yield* readAnswer(stream, convo.scrubber);
      } finally {
        await stream.close();
      }
      if (signal.aborted) return;
      convo.turns++;
      const { answer, sawDone } = read;
      yield { kind: "turn", usage: answer.usage };
      if (signal.aborted) return;
      const failure = answerFailure(answer, sawDone);
      if (failure !== null) throw failure;
      if (answer.toolCalls.length === 0) {
        const payload = convo.scrubber.scrub(answer.content);
        if (convo.scrubber.holds(payload)) {
          throw new OpenAIEngineError("ASP_ENGINE_OPENAI_MALFORMED_STREAM", "the answer keeps reforming the key", {
            data: { reason: "key reforms after scrub" },
          });
        }
        if (payload.length > MAX_PAYLOAD_CHARS) {
          throw new OpenAIEngineError("ASP_ENGINE_OPENAI_RESPONSE_TOO_LARGE", "the final answer exceeds a payload", {
            data: { limit: MAX_PAYLOAD_CHARS },
          });
        }
        yield { kind: "completion", payload, artifacts: [], evidence: [] };
        return;
      }
      const actions = actionsOf(answer, convo.turns, convo.scrubber);
      // The model's calls would be answered after the last turn it has: nothing is proposed.
      if (convo.turns >= options.maxTurns) {
        yield { kind: "max_turns", turns: convo.turns };
        return;
      }
      convo.messages.push({
        role: "assistant",
        content: answer.content === "" ? null : answer.content,
        tool_calls: actions.map((a) => ({
          id: a.id,
          type: "function",
          function: { name: a.raw.name, arguments: a.raw.arguments },
        })),
      });
      for (const a of actions) {
        const result = yield { kind: "action", action: a.action };
        if (signal.aborted) return;
        convo.messages.push(toolMessage(a.id, checkResult(result)));
      }
    }
  }

  return {
    async *run(params: EngineRunParams): Run {
      if (aborted(params)) return;
      try {
        const { task, tools } = checkParams(params);
        yield* drive(params, new Conversation(options, task), tools);
      } catch (error) {
        if (error instanceof RunAborted || aborted(params)) return;
        if (!(error instanceof OpenAIEngineError)) throw error;
        yield { kind: "failed", code: error.code, outcome: error.outcome, message: error.message };
      }
    },
  };
}
