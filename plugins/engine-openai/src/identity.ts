import { createHash } from "node:crypto";
import { OpenAIEngineError } from "./errors.js";
import { type OpenAIEngineOptions, PROMPT_VERSION, resolveOptions } from "./options.js";

/**
 * The producer fingerprint of an Engine configuration: `openai-engine:<model>@<base host>;cfg=<digest>`,
 * where the digest (sha256, 16 hex) covers everything that shapes its answers: the normalized base
 * URL, model, temperature, system prompt, turn limit and the request version. The same model behind
 * another endpoint or setting is another fingerprint. The key and its variable name are not part of it.
 *
 * @throws OpenAIEngineError `ASP_ENGINE_OPENAI_BAD_OPTIONS` for options `resolveOptions` refuses, or a
 *   fingerprint over 256 characters.
 * @example
 * ```ts
 * openAIEngineFingerprint({ baseUrl: "https://api.openai.com/v1", model: "gpt-4o-mini", apiKeyEnv: "OPENAI_API_KEY" });
 * // "openai-engine:gpt-4o-mini@api.openai.com;cfg=…"
 * ```
 */
export function openAIEngineFingerprint(options: OpenAIEngineOptions): string {
  const o = resolveOptions(options);
  const cfg = JSON.stringify([o.baseUrl, o.model, o.temperature, o.systemPrompt, o.maxTurns, PROMPT_VERSION]);
  const digest = createHash("sha256").update(cfg).digest("hex").slice(0, 16);
  const fingerprint = `openai-engine:${o.model}@${new URL(o.baseUrl).host};cfg=${digest}`;
  if (fingerprint.length > 256) {
    throw new OpenAIEngineError(
      "ASP_ENGINE_OPENAI_BAD_OPTIONS",
      "model and host make a fingerprint over 256 characters",
      {
        data: { key: "model" },
      },
    );
  }
  return fingerprint;
}
