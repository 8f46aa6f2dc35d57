import type { ReviewResponse, Verifier, VerifyRequest } from "@asp/contracts";
import { postChat } from "./client.js";
import { OpenAIReviewerError } from "./errors.js";
import { type OpenAIReviewerOptions, resolveOptions } from "./options.js";
import { buildMessages, type ContentPort, checkSubject, verdictRequestSchema } from "./prompt.js";
import { contentOf, reviewResponseOf, usageOf } from "./reply.js";

/** What {@link createOpenAIReviewer} needs: its trusted options and its ports. */
export interface OpenAIReviewerParams {
  readonly options: OpenAIReviewerOptions;
  /** Blob reads by digest (the host's `asp.plugin.ContentReader`). */
  readonly content: ContentPort;
  /** Where `apiKeyEnv` is looked up, at every request (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

// One printable header token: a key with CR, LF or spaces could split the header, and fetch's
// own complaint about it would quote the value.
const KEY = /^[\x21-\x7e]{1,4096}$/;

function apiKey(env: Readonly<Record<string, string | undefined>>, name: string): string {
  const key = env[name];
  if (typeof key !== "string" || !KEY.test(key)) {
    throw new OpenAIReviewerError(
      "ASP_OPENAI_NO_API_KEY",
      `the environment variable ${name} does not hold an API key (unset, empty or not one printable token)`,
      { data: { apiKeyEnv: name } },
    );
  }
  return key;
}

/**
 * Create the Reviewer: `verify({ kind: "review", subject, signal })` POSTs one chat-completions
 * request (system prompt, the payload and snapshot texts, a strict JSON-schema response format)
 * and returns the validated verdict as a contracts `ReviewResponse`. Every failure is thrown as a
 * coded error, so the Auto Mode runner records it per attempt; none is ever a pass.
 *
 * @throws OpenAIReviewerError `ASP_OPENAI_BAD_OPTIONS` at creation; from `verify`, any code of
 *   {@link OpenAIReviewerErrorCode} but `ASP_OPENAI_BAD_OPTIONS`.
 * @example
 * ```ts
 * const reviewer = createOpenAIReviewer({
 *   options: { baseUrl: "https://api.openai.com/v1", model: "gpt-4o-mini", apiKeyEnv: "OPENAI_API_KEY" },
 *   content: { read: (digest) => store.objects.readBlob(digest) },
 * });
 * ```
 */
export function createOpenAIReviewer(params: OpenAIReviewerParams): Verifier {
  const options = resolveOptions(params.options);
  const env = params.env ?? process.env;
  const url = `${options.baseUrl}/chat/completions`;
  return {
    async verify(request: VerifyRequest): Promise<ReviewResponse> {
      if (request?.kind !== "review") {
        throw new OpenAIReviewerError("ASP_OPENAI_BAD_REQUEST", "this verifier answers review requests only", {
          data: { field: "kind" },
        });
      }
      const subject = checkSubject(request.subject);
      const key = apiKey(env, options.apiKeyEnv);
      const messages = await buildMessages(subject, params.content);
      const body = await postChat({
        url,
        apiKey: key,
        timeoutMs: options.timeoutMs,
        signal: request.signal,
        body: {
          model: options.model,
          messages,
          ...(options.temperature === null ? {} : { temperature: options.temperature }),
          max_completion_tokens: options.maxTokens,
          response_format: {
            type: "json_schema",
            json_schema: {
              name: "asp_review_verdict",
              strict: true,
              schema: verdictRequestSchema(subject.snapshot.refs.map((r) => r.name)),
            },
          },
        },
      });
      const answer = reviewResponseOf(contentOf(body), [key]);
      // What the call cost, as the endpoint reported it: the host meters it (never trusted for more).
      const usage = usageOf(body);
      return usage === null ? answer : { ...answer, usage };
    },
  };
}
