/**
 * `@asp/engine-openai`: an engine plugin (capability `engine`), an Auto Mode agent Engine that
 * drives any OpenAI-compatible chat-completions endpoint with streamed tool calls. Each tool call
 * becomes a proposed action the host runs (or refuses) itself; the host's answer goes back to the
 * model as the call's tool message. Base URL, model and the NAME of the key's environment variable
 * come from trusted host configuration; the key is read from that variable at each request and
 * never appears in a step, an error or a log.
 *
 * The plugin entry is `dist/main.js`; this module is the logic, for tests and composing hosts.
 *
 * @packageDocumentation
 */

export type { EngineTimers } from "./client.js";
export { MAX_RESPONSE_BYTES, SYSTEM_TIMERS } from "./client.js";
export type { OpenAIEngineParams } from "./engine.js";
export { createOpenAIEngine, DEFAULT_RETRY_MS, MAX_PAYLOAD_CHARS, RETRY_AFTER_CAP_MS } from "./engine.js";
export type { EngineAttemptOutcome, OpenAIEngineErrorCode } from "./errors.js";
export { ATTEMPT_OUTCOME_OF, OPENAI_ENGINE_ERROR_CODES, OpenAIEngineError } from "./errors.js";
export { openAIEngineFingerprint } from "./identity.js";
export type { OpenAIEngineOptions, ResolvedOptions } from "./options.js";
export { DEFAULT_SYSTEM_PROMPT, OPTIONS_SCHEMA, PROMPT_VERSION, resolveOptions } from "./options.js";
export { openAIEnginePlugin, PLUGIN_ID } from "./plugin.js";
export { API_KEY_MARKER } from "./scrub.js";
