import type {
  AbortSignalLike,
  GuardianResponse,
  ReviewResponse,
  Verifier,
  VerifyRequest,
  VerifyResponse,
} from "@asp/contracts";
import { postChat } from "./client.js";
import { OpenAIReviewerError } from "./errors.js";
import {
  buildGuardianMessages,
  type CheckedGuardianRequest,
  checkGuardianRequest,
  guardianRequestSchema,
  guardianResponseOf,
} from "./guardian.js";
import { type OpenAIReviewerOptions, type ResolvedOptions, resolveOptions } from "./options.js";
import { buildMessages, type ContentPort, checkSubject, type ReviewSubject, verdictRequestSchema } from "./prompt.js";
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

/** What every chat-completions request of this verifier carries besides its messages and schema. */
interface Call {
  readonly url: string;
  readonly options: ResolvedOptions;
  readonly apiKey: string;
  readonly signal: AbortSignalLike | undefined;
}

/** POST one request with a strict `json_schema` response format; the body of the 2xx answer. */
function ask(
  call: Call,
  messages: ReadonlyArray<{ role: "system" | "user"; content: string }>,
  format: { readonly name: string; readonly schema: Record<string, unknown> },
): Promise<unknown> {
  const { options } = call;
  return postChat({
    url: call.url,
    apiKey: call.apiKey,
    timeoutMs: options.timeoutMs,
    signal: call.signal,
    body: {
      model: options.model,
      messages,
      ...(options.temperature === null ? {} : { temperature: options.temperature }),
      max_completion_tokens: options.maxTokens,
      response_format: { type: "json_schema", json_schema: { name: format.name, strict: true, schema: format.schema } },
    },
  });
}

/** The review role: the candidate and its snapshot texts in, a validated `ReviewResponse` out. */
async function review(call: Call, subject: ReviewSubject, content: ContentPort): Promise<ReviewResponse> {
  const messages = await buildMessages(subject, content);
  const body = await ask(call, messages, {
    name: "asp_review_verdict",
    schema: verdictRequestSchema(subject.snapshot.refs.map((r) => r.name)),
  });
  const answer = reviewResponseOf(contentOf(body), [call.apiKey]);
  // What the call cost, as the endpoint reported it: the host meters it (never trusted for more).
  const usage = usageOf(body);
  return usage === null ? answer : { ...answer, usage };
}

/**
 * The Guardian role: one `ask`-classified action in, a validated `GuardianResponse` out. The
 * endpoint's `usage` is not passed on: the contracts Guardian answer is closed and has no field
 * for it (plugin-host would refuse the answer as `ASP_PLUGIN_BAD_OUTPUT`).
 */
async function guard(call: Call, request: CheckedGuardianRequest): Promise<GuardianResponse> {
  const messages = buildGuardianMessages(request, [call.apiKey]);
  const body = await ask(call, messages, { name: "asp_guardian_decision", schema: guardianRequestSchema() });
  return guardianResponseOf(contentOf(body), [call.apiKey]);
}

/**
 * Create the verifier, in both of its roles. `verify({ kind: "review", subject, signal })` POSTs
 * one chat-completions request (system prompt, the payload and snapshot texts, a strict
 * JSON-schema response format) and returns the validated verdict as a contracts `ReviewResponse`.
 * `verify({ kind: "guardian", actionDigest, actionClass, subject, signal })` asks the same
 * endpoint, with the same options, deadline and signal, to judge the one `ask`-classified action
 * the subject describes, and returns the validated `GuardianResponse`. Every failure is thrown as
 * a coded error, so the host records it; none is ever a pass or an allow.
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
    async verify(request: VerifyRequest): Promise<VerifyResponse> {
      // Each request is checked before the key is read: one this verifier cannot send costs nothing.
      const call = (signal: AbortSignalLike | undefined): Call => ({
        url,
        options,
        apiKey: apiKey(env, options.apiKeyEnv),
        signal,
      });
      if (request?.kind === "review") {
        const subject = checkSubject(request.subject);
        return review(call(request.signal), subject, params.content);
      }
      if (request?.kind === "guardian") {
        const checked = checkGuardianRequest(request);
        return guard(call(request.signal), checked);
      }
      throw new OpenAIReviewerError("ASP_OPENAI_BAD_REQUEST", "this verifier answers review and guardian requests", {
        data: { field: "kind" },
      });
    },
  };
}
