/**
 * `@asp/verifier-openai`: a verifier plugin (capabilities `review` and `guardian`) that asks an
 * OpenAI-compatible chat-completions endpoint for a JSON-schema-constrained verdict over an Auto
 * Mode candidate and its Evidence Snapshot (a contracts `ReviewResponse`), or for a decision on
 * one action deterministic policy classified `ask` (a contracts `GuardianResponse`), and validates
 * it. Base URL, model and the NAME of the key's environment variable come from trusted host
 * configuration.
 *
 * The plugin entry is `dist/main.js`; this module is the logic and the Reviewer identity helper.
 *
 * @packageDocumentation
 */

export { MAX_RESPONSE_BYTES } from "./client.js";
export type { OpenAIReviewerErrorCode } from "./errors.js";
export { ATTEMPT_OUTCOME_OF, OPENAI_REVIEWER_ERROR_CODES, OpenAIReviewerError } from "./errors.js";
export { GUARDIAN_ANSWER_SCHEMA, GUARDIAN_LIMITS, GUARDIAN_PROMPT_VERSION } from "./guardian.js";
export type { OpenAIReviewerIdentity, OpenAIReviewerIdentityParams } from "./identity.js";
export { openAIReviewerFingerprint, openAIReviewerIdentity } from "./identity.js";
export type { OpenAIReviewerOptions, ResolvedOptions } from "./options.js";
export { OPTIONS_SCHEMA, resolveOptions } from "./options.js";
export { openAIReviewerPlugin, PLUGIN_ID } from "./plugin.js";
export type { ContentPort, ReviewSubject } from "./prompt.js";
export { PROMPT_LIMITS, PROMPT_VERSION } from "./prompt.js";
export { usageOf, VERDICT_SCHEMA } from "./reply.js";
export type { OpenAIReviewerParams } from "./reviewer.js";
export { createOpenAIReviewer } from "./reviewer.js";
