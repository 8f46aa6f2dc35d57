import type { AbortSignalLike } from "@asp/contracts";
import { OpenAIEngineError } from "./errors.js";

/** The largest answer read for one model call, in bytes; reading stops (and the request is aborted) beyond it. */
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/**
 * The timer seam: where the Engine's deadlines (the stall deadline, the wait before a retry) are
 * scheduled. Default: the global `setTimeout` / `clearTimeout`; a test passes its own, so that a
 * deadline fires when the test says and no test waits on the wall clock.
 */
export interface EngineTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The global timers. */
export const SYSTEM_TIMERS: EngineTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** One chat-completions POST. */
export interface ChatRequest {
  /** `${baseUrl}/chat/completions`. */
  readonly url: string;
  readonly apiKey: string;
  readonly body: unknown;
  /** The longest wait for the next byte (the headers, then each chunk of the body). */
  readonly idleTimeoutMs: number;
  /** The run's signal: its abort aborts the request. */
  readonly signal: AbortSignalLike;
  readonly timers: EngineTimers;
}

/** A stream whose reads stop at the stall deadline or the run's abort. */
export interface ChatStream {
  /** The next chunk of the body, or `null` at its end. */
  read(): Promise<Uint8Array | null>;
  /** Stop reading and release the connection (idempotent). */
  close(): Promise<void>;
}

/** How a request ended before a usable stream: a status to act on, or the run's abort. */
export type ChatAnswer =
  | { readonly kind: "stream"; readonly stream: ChatStream }
  | { readonly kind: "status"; readonly status: number; readonly retryAfter: string | null }
  | { readonly kind: "aborted" };

/** Raised inside a read when the run's signal aborted it; the Engine then returns, yielding nothing. */
export class RunAborted extends Error {
  constructor() {
    super("the run was aborted");
  }
}

/** The errno-style code of a fetch failure (`ECONNREFUSED` ...), never its message. */
function reasonOf(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown } } | null)?.cause;
  const code = typeof cause?.code === "string" ? cause.code : "";
  return /^[A-Z0-9_]{1,64}$/.test(code) ? code : "fetch_failed";
}

/**
 * The request's abort controller and its one deadline: armed only while the Engine waits for a
 * byte (never while the host holds a step), so a stall is a stall of the server, never of the host.
 */
class Watch {
  readonly controller = new AbortController();
  cause: "timeout" | "aborted" | null = null;
  #timer: unknown = null;
  readonly #onAbort = (): void => this.#stop("aborted");

  constructor(private readonly request: ChatRequest) {
    if (request.signal.aborted) this.#stop("aborted");
    else request.signal.addEventListener("abort", this.#onAbort, { once: true });
  }

  #stop(cause: "timeout" | "aborted"): void {
    this.cause ??= cause;
    this.controller.abort();
  }

  /** Run `wait` under the stall deadline. */
  async waiting<T>(wait: () => Promise<T>): Promise<T> {
    this.#timer = this.request.timers.setTimeout(() => this.#stop("timeout"), this.request.idleTimeoutMs);
    try {
      return await wait();
    } finally {
      this.request.timers.clearTimeout(this.#timer);
      this.#timer = null;
    }
  }

  /** The coded error (or {@link RunAborted}) for a failed wait. */
  failure(error: unknown): Error {
    if (error instanceof OpenAIEngineError) return error;
    if (this.cause === "aborted") return new RunAborted();
    if (this.cause === "timeout") {
      return new OpenAIEngineError(
        "ASP_ENGINE_OPENAI_TIMEOUT",
        `no byte of the answer for ${this.request.idleTimeoutMs} ms; the request was aborted`,
        { data: { requestTimeoutMs: this.request.idleTimeoutMs } },
      );
    }
    const reason = reasonOf(error);
    return new OpenAIEngineError("ASP_ENGINE_OPENAI_CONNECTION_FAILED", `no complete HTTP answer (${reason})`, {
      data: { reason },
    });
  }

  release(): void {
    this.request.timers.clearTimeout(this.#timer);
    this.request.signal.removeEventListener("abort", this.#onAbort);
  }
}

/**
 * POST one streaming chat-completions request with Node's global fetch. A 2xx answer is returned
 * as a {@link ChatStream} read under the stall deadline and bounded to {@link MAX_RESPONSE_BYTES};
 * any other status is returned with its `Retry-After` (the body is discarded unread, so no server
 * text travels further). Redirects are never followed (the key would travel with them).
 *
 * @throws OpenAIEngineError `ASP_ENGINE_OPENAI_TIMEOUT` (no headers in time),
 *   `ASP_ENGINE_OPENAI_CONNECTION_FAILED`; from `read()` also `ASP_ENGINE_OPENAI_RESPONSE_TOO_LARGE`,
 *   and {@link RunAborted} when the run's signal aborted it.
 */
export async function postChat(request: ChatRequest): Promise<ChatAnswer> {
  const watch = new Watch(request);
  if (watch.cause === "aborted") {
    watch.release();
    return { kind: "aborted" };
  }
  let response: Response;
  try {
    response = await watch.waiting(() =>
      fetch(request.url, {
        method: "POST",
        headers: {
          authorization: `Bearer ${request.apiKey}`,
          "content-type": "application/json",
          accept: "text/event-stream",
        },
        body: JSON.stringify(request.body),
        redirect: "manual",
        signal: watch.controller.signal,
      }),
    );
  } catch (error) {
    watch.release();
    const failure = watch.failure(error);
    if (failure instanceof RunAborted) return { kind: "aborted" };
    throw failure;
  }
  if (response.status < 200 || response.status > 299) {
    const retryAfter = response.headers.get("retry-after");
    await response.body?.cancel().catch(() => {});
    watch.release();
    return { kind: "status", status: response.status, retryAfter };
  }
  const reader = response.body?.getReader();
  let size = 0;
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    watch.release();
    await reader?.cancel().catch(() => {});
  };
  return {
    kind: "stream",
    stream: {
      async read() {
        if (reader === undefined || closed) return null;
        let chunk: { done: boolean; value?: Uint8Array | undefined };
        try {
          chunk = await watch.waiting(() => reader.read());
        } catch (error) {
          const failure = watch.failure(error);
          await close();
          throw failure;
        }
        if (chunk.done || chunk.value === undefined) {
          await close();
          return null;
        }
        size += chunk.value.byteLength;
        if (size > MAX_RESPONSE_BYTES) {
          await close();
          throw new OpenAIEngineError("ASP_ENGINE_OPENAI_RESPONSE_TOO_LARGE", "the answer exceeds the byte bound", {
            data: { limit: MAX_RESPONSE_BYTES },
          });
        }
        return chunk.value;
      },
      close,
    },
  };
}
