import { OpenAIEngineError } from "./errors.js";

/** The `data` of one server-sent event, or the end marker the chat-completions stream sends last. */
export type SseData = string;

/** The chat-completions stream's last event. */
export const DONE = "[DONE]";

const malformed = (reason: string): OpenAIEngineError =>
  new OpenAIEngineError(
    "ASP_ENGINE_OPENAI_MALFORMED_STREAM",
    `the answer is not a chat-completions stream (${reason})`,
    {
      data: { reason },
    },
  );

/**
 * Incremental server-sent-events decoding (the WHATWG `text/event-stream` rules the
 * chat-completions API uses): UTF-8 (strict), lines ending in LF, CRLF or CR, `data:` lines joined
 * by LF into one event's data, dispatched at a blank line; comments (`:`) and the other fields
 * (`event`, `id`, `retry`) ignored. Bytes may split anywhere, a character included.
 */
export class SseDecoder {
  readonly #text = new TextDecoder("utf-8", { fatal: true });
  #buffer = "";
  #data: string[] = [];
  #sawCr = false;

  /**
   * The data of every event completed by `bytes`.
   *
   * @throws OpenAIEngineError `ASP_ENGINE_OPENAI_MALFORMED_STREAM` for bytes that are not UTF-8.
   */
  push(bytes: Uint8Array): SseData[] {
    let text: string;
    try {
      text = this.#text.decode(bytes, { stream: true });
    } catch {
      throw malformed("not UTF-8");
    }
    return this.#lines(text, false);
  }

  /**
   * The data of the events the end of the body completes: a last event without its blank line is
   * taken as complete (the WHATWG rules drop it; some servers omit that line).
   *
   * @throws OpenAIEngineError `ASP_ENGINE_OPENAI_MALFORMED_STREAM` for a truncated UTF-8 sequence.
   */
  end(): SseData[] {
    let text: string;
    try {
      text = this.#text.decode();
    } catch {
      throw malformed("not UTF-8");
    }
    return this.#lines(text, true);
  }

  #lines(text: string, end: boolean): SseData[] {
    const out: SseData[] = [];
    let chunk = text;
    // A CR at the end of the previous piece already ended its line: a LF right after it belongs to it.
    if (this.#sawCr && chunk.startsWith("\n")) chunk = chunk.slice(1);
    this.#sawCr = false;
    let buffer = this.#buffer + chunk;
    for (;;) {
      const at = buffer.search(/\r\n|\r|\n/);
      if (at === -1) break;
      const line = buffer.slice(0, at);
      const sep = buffer[at] === "\r" && buffer[at + 1] === "\n" ? 2 : 1;
      if (buffer[at] === "\r" && sep === 1 && at + 1 === buffer.length) this.#sawCr = true;
      buffer = buffer.slice(at + sep);
      this.#line(line, out);
    }
    this.#buffer = buffer;
    if (end) {
      if (this.#buffer !== "") this.#line(this.#buffer, out);
      this.#buffer = "";
      this.#line("", out);
    }
    return out;
  }

  #line(line: string, out: SseData[]): void {
    if (line === "") {
      if (this.#data.length > 0) out.push(this.#data.join("\n"));
      this.#data = [];
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    if (field !== "data") return;
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    this.#data.push(value);
  }
}
