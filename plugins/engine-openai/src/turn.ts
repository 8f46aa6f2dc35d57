import type { EngineUsage } from "@asp/contracts";
import { OpenAIEngineError } from "./errors.js";

/** The most tool calls one answer may carry. */
export const MAX_TOOL_CALLS = 64;

/** One tool call as the stream assembled it (raw: as the server sent it). */
export interface RawToolCall {
  readonly index: number;
  readonly id: string | null;
  readonly name: string;
  readonly arguments: string;
}

/** What one model call answered, once its stream ended. */
export interface TurnAnswer {
  /** The assistant's text, every content delta joined. */
  readonly content: string;
  readonly toolCalls: readonly RawToolCall[];
  /** From the stream's usage chunk; zeros when the server sent none (`usageReported: false`). */
  readonly usage: EngineUsage;
  readonly usageReported: boolean;
  readonly finishReason: string | null;
  /** The model's `refusal` text, every refusal delta joined (empty: none). */
  readonly refusal: string;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const count = (v: unknown): number | null => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : null);

const malformed = (reason: string): OpenAIEngineError =>
  new OpenAIEngineError(
    "ASP_ENGINE_OPENAI_MALFORMED_STREAM",
    `the answer is not a chat-completions stream (${reason})`,
    {
      data: { reason },
    },
  );

const badToolCall = (reason: string, index: number | null): OpenAIEngineError =>
  new OpenAIEngineError("ASP_ENGINE_OPENAI_BAD_TOOL_CALL", `the model's tool call is unusable (${reason})`, {
    data: { reason, ...(index === null ? {} : { index }) },
  });

/**
 * Assembles one streamed answer from its `chat.completion.chunk` events: content deltas in order,
 * tool-call deltas by their `index` (id and name from the first delta that has them, `arguments`
 * fragments joined), the finish reason, and the usage chunk (`stream_options.include_usage`).
 * Only the first choice is read (the request asks for one).
 */
export class TurnAccumulator {
  #content: string[] = [];
  #refusal: string[] = [];
  #calls = new Map<number, { id: string | null; name: string; args: string[] }>();
  #lastIndex = 0;
  #finish: string | null = null;
  #usage: EngineUsage | null = null;

  /**
   * Apply one event's data; returns the content text it added (empty when none).
   *
   * @throws OpenAIEngineError `ASP_ENGINE_OPENAI_MALFORMED_STREAM` (not a JSON chunk),
   *   `ASP_ENGINE_OPENAI_STREAM_ERROR` (an `error` event), `ASP_ENGINE_OPENAI_BAD_TOOL_CALL` (a
   *   tool-call delta with a bad index, or more calls than {@link MAX_TOOL_CALLS}).
   */
  apply(data: string): string {
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      throw malformed("an event is not JSON");
    }
    if (!isRecord(chunk)) throw malformed("an event is not a JSON object");
    if (chunk.error !== undefined && chunk.error !== null) {
      throw new OpenAIEngineError("ASP_ENGINE_OPENAI_STREAM_ERROR", "the server sent an error event in the stream", {
        data: {},
      });
    }
    if (isRecord(chunk.usage)) {
      const input = count(chunk.usage.prompt_tokens);
      const output = count(chunk.usage.completion_tokens);
      if (input !== null && output !== null) this.#usage = { input_tokens: input, output_tokens: output };
    }
    if (chunk.choices === undefined || chunk.choices === null) return "";
    if (!Array.isArray(chunk.choices)) throw malformed("choices is not an array");
    const choice = chunk.choices.find((c) => isRecord(c) && (c.index === undefined || c.index === 0));
    if (!isRecord(choice)) return "";
    if (typeof choice.finish_reason === "string") this.#finish = choice.finish_reason;
    const delta = choice.delta;
    if (delta === undefined || delta === null) return "";
    if (!isRecord(delta)) throw malformed("a delta is not an object");
    if (typeof delta.refusal === "string") this.#refusal.push(delta.refusal);
    if (delta.tool_calls !== undefined && delta.tool_calls !== null) this.#toolCalls(delta.tool_calls);
    if (typeof delta.content === "string" && delta.content !== "") {
      this.#content.push(delta.content);
      return delta.content;
    }
    return "";
  }

  #toolCalls(deltas: unknown): void {
    if (!Array.isArray(deltas)) throw malformed("tool_calls is not an array");
    for (const d of deltas) {
      if (!isRecord(d)) throw badToolCall("a tool-call delta is not an object", null);
      // Some servers omit the index of a lone call: it continues the call before.
      const index = d.index === undefined ? this.#lastIndex : count(d.index);
      if (index === null || index >= MAX_TOOL_CALLS) {
        throw badToolCall(`a tool-call index outside 0..${MAX_TOOL_CALLS - 1}`, null);
      }
      this.#lastIndex = index;
      let call = this.#calls.get(index);
      if (call === undefined) {
        call = { id: null, name: "", args: [] };
        this.#calls.set(index, call);
      }
      if (typeof d.id === "string" && d.id !== "" && call.id === null) call.id = d.id;
      const fn = d.function;
      if (fn === undefined || fn === null) continue;
      if (!isRecord(fn)) throw badToolCall("a function delta is not an object", index);
      if (typeof fn.name === "string") call.name += fn.name;
      if (typeof fn.arguments === "string") call.args.push(fn.arguments);
    }
  }

  /** The answer so far (call when the stream ended). */
  answer(): TurnAnswer {
    const toolCalls = [...this.#calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, c]) => ({ index, id: c.id, name: c.name, arguments: c.args.join("") }));
    return {
      content: this.#content.join(""),
      toolCalls,
      usage: this.#usage ?? { input_tokens: 0, output_tokens: 0 },
      usageReported: this.#usage !== null,
      finishReason: this.#finish,
      refusal: this.#refusal.join(""),
    };
  }
}

/**
 * The arguments of a tool call, parsed: a JSON object (an empty string, which some servers send
 * for a call without parameters, is `{}`).
 *
 * @throws OpenAIEngineError `ASP_ENGINE_OPENAI_BAD_TOOL_CALL` for a call without a name, or
 *   arguments that are not JSON or not an object.
 */
export function parseToolCall(call: RawToolCall): { name: string; arguments: Record<string, unknown> } {
  if (call.name === "" || call.name.length > 256) throw badToolCall("a tool call without a usable name", call.index);
  if (call.arguments.trim() === "") return { name: call.name, arguments: {} };
  let args: unknown;
  try {
    args = JSON.parse(call.arguments);
  } catch {
    throw badToolCall("its arguments are not JSON", call.index);
  }
  if (!isRecord(args)) throw badToolCall("its arguments are not a JSON object", call.index);
  return { name: call.name, arguments: args };
}
