import { createHash } from "node:crypto";
import { OpenAIReviewerError } from "./errors.js";
import { type OpenAIReviewerOptions, resolveOptions } from "./options.js";
import { PROMPT_VERSION } from "./prompt.js";

/** A Reviewer identity in the shape `@asp/auto-mode`'s `ReviewerPort.identity` takes. */
export interface OpenAIReviewerIdentity {
  readonly actor_id: string;
  readonly session_id: string;
  /** `openai:<model>@<base host>;cfg=<options digest>`. */
  readonly fingerprint: string;
  readonly model: string;
}

/** Who this Reviewer runs as; the host chooses, and keeps them apart from the producer's. */
export interface OpenAIReviewerIdentityParams {
  /** Default `asp.verifier-openai`. */
  readonly actorId?: string;
  /** The Reviewer session (must differ from the producer's; the host allocates it). */
  readonly sessionId: string;
}

/**
 * The Reviewer fingerprint for a configuration: `openai:<model>@<base host>;cfg=<digest>`, where
 * the digest (sha256, 16 hex) covers everything that shapes an answer: the normalized base URL,
 * model, temperature, max tokens and the prompt version. The same model behind another endpoint
 * or setting is another fingerprint. The key and its variable name are not part of it.
 *
 * @throws OpenAIReviewerError `ASP_OPENAI_BAD_OPTIONS` for options {@link resolveOptions} refuses,
 *   or a fingerprint over 256 characters.
 */
export function openAIReviewerFingerprint(options: OpenAIReviewerOptions): string {
  const o = resolveOptions(options);
  const cfg = JSON.stringify([o.baseUrl, o.model, o.temperature, o.maxTokens, PROMPT_VERSION]);
  const digest = createHash("sha256").update(cfg).digest("hex").slice(0, 16);
  const fingerprint = `openai:${o.model}@${new URL(o.baseUrl).host};cfg=${digest}`;
  if (fingerprint.length > 256) {
    throw new OpenAIReviewerError("ASP_OPENAI_BAD_OPTIONS", "model and host make a fingerprint over 256 characters", {
      data: { key: "model" },
    });
  }
  return fingerprint;
}

/**
 * The identity a host gives an Auto Mode `ReviewerPort` backed by this plugin: the fingerprint of
 * {@link openAIReviewerFingerprint}, the model, and the actor and session the host chose. With
 * the default independence policy (`distinct_fingerprint`) such a Reviewer is eligible exactly
 * when the producer's fingerprint is another one.
 *
 * @throws OpenAIReviewerError `ASP_OPENAI_BAD_OPTIONS` (see {@link openAIReviewerFingerprint}), or
 *   an empty session id.
 * @example
 * ```ts
 * const reviewer: ReviewerPort = {
 *   identity: openAIReviewerIdentity(options, { sessionId: "review-1" }),
 *   verifier, // container.resolveAll(TOKENS.Verifier) for asp.verifier-openai
 * };
 * ```
 */
export function openAIReviewerIdentity(
  options: OpenAIReviewerOptions,
  params: OpenAIReviewerIdentityParams,
): OpenAIReviewerIdentity {
  if (typeof params?.sessionId !== "string" || params.sessionId.length === 0 || params.sessionId.length > 256) {
    throw new OpenAIReviewerError("ASP_OPENAI_BAD_OPTIONS", "a Reviewer identity needs a session id", {
      data: { key: "sessionId" },
    });
  }
  const model = resolveOptions(options).model;
  return {
    actor_id: params.actorId ?? "asp.verifier-openai",
    session_id: params.sessionId,
    fingerprint: openAIReviewerFingerprint(options),
    model,
  };
}
