import type { AbortSignalLike } from "@asp/contracts";
import { OpenAIReviewerError } from "./errors.js";

/** The largest response body read, in bytes; reading stops (and the request is aborted) beyond it. */
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/** One chat-completions POST. */
export interface ChatRequest {
  /** `${baseUrl}/chat/completions`. */
  readonly url: string;
  readonly apiKey: string;
  readonly body: unknown;
  readonly timeoutMs: number;
  /** The caller's signal (the runner's deadline); its abort aborts the request. */
  readonly signal?: AbortSignalLike | undefined;
}

/** Read a body up to {@link MAX_RESPONSE_BYTES}. */
async function readBounded(response: Response): Promise<Uint8Array> {
  const reader = response.body?.getReader();
  if (reader === undefined) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_RESPONSE_BYTES) {
      await reader.cancel().catch(() => {});
      throw new OpenAIReviewerError("ASP_OPENAI_RESPONSE_TOO_LARGE", "the response body exceeds the bound", {
        data: { limit: MAX_RESPONSE_BYTES },
      });
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** The errno-style code of a fetch failure (`ECONNREFUSED` ...), never its message. */
function reasonOf(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown } } | null)?.cause;
  const code = typeof cause?.code === "string" ? cause.code : "";
  return /^[A-Z0-9_]{1,64}$/.test(code) ? code : "fetch_failed";
}

/**
 * POST one chat-completions request with Node's global fetch under its own deadline and the
 * caller's signal, and return the parsed JSON body of a 2xx answer. Redirects are never followed
 * (the key would travel with them). No error carries the key, a header or the server's text.
 *
 * @throws OpenAIReviewerError `ASP_OPENAI_TIMEOUT`, `ASP_OPENAI_ABORTED`,
 *   `ASP_OPENAI_CONNECTION_FAILED`, `ASP_OPENAI_RATE_LIMITED` (429), `ASP_OPENAI_HTTP_STATUS`
 *   (other non-2xx), `ASP_OPENAI_RESPONSE_TOO_LARGE`, `ASP_OPENAI_MALFORMED_RESPONSE` (not UTF-8 JSON).
 */
export async function postChat(request: ChatRequest): Promise<unknown> {
  const controller = new AbortController();
  let cause: "timeout" | "aborted" | null = null;
  const timer = setTimeout(() => {
    cause ??= "timeout";
    controller.abort();
  }, request.timeoutMs);
  const onAbort = (): void => {
    cause ??= "aborted";
    controller.abort();
  };
  if (request.signal?.aborted) onAbort();
  request.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    let response: Response;
    let bytes: Uint8Array;
    try {
      response = await fetch(request.url, {
        method: "POST",
        headers: {
          authorization: `Bearer ${request.apiKey}`,
          "content-type": "application/json",
          accept: "application/json",
        },
        body: JSON.stringify(request.body),
        redirect: "manual",
        signal: controller.signal,
      });
      if (response.status === 429 || response.status < 200 || response.status > 299) {
        await response.body?.cancel().catch(() => {});
        if (response.status === 429) {
          throw new OpenAIReviewerError("ASP_OPENAI_RATE_LIMITED", "the server answered 429 Too Many Requests", {
            data: { status: 429 },
          });
        }
        throw new OpenAIReviewerError("ASP_OPENAI_HTTP_STATUS", `the server answered HTTP ${response.status}`, {
          data: { status: response.status },
        });
      }
      bytes = await readBounded(response);
    } catch (error) {
      if (error instanceof OpenAIReviewerError) throw error;
      if (cause === "timeout") {
        throw new OpenAIReviewerError("ASP_OPENAI_TIMEOUT", `no complete answer within ${request.timeoutMs} ms`, {
          data: { timeoutMs: request.timeoutMs },
        });
      }
      if (cause === "aborted") {
        throw new OpenAIReviewerError("ASP_OPENAI_ABORTED", "the request was aborted by the caller", { data: {} });
      }
      const reason = reasonOf(error);
      throw new OpenAIReviewerError("ASP_OPENAI_CONNECTION_FAILED", `no HTTP answer (${reason})`, {
        data: { reason },
      });
    }
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      return JSON.parse(text) as unknown;
    } catch {
      throw new OpenAIReviewerError("ASP_OPENAI_MALFORMED_RESPONSE", "the response body is not UTF-8 JSON", {
        data: { reason: "body is not JSON" },
      });
    }
  } finally {
    clearTimeout(timer);
    request.signal?.removeEventListener("abort", onAbort);
  }
}
