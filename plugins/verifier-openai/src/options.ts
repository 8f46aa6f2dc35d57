import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { OpenAIReviewerError } from "./errors.js";

/** The plugin options, from the host's trusted configuration (`pluginOptions["asp.verifier-openai"]`). */
export interface OpenAIReviewerOptions {
  /** The API root, e.g. `https://api.openai.com/v1`; the Reviewer POSTs to `${baseUrl}/chat/completions`. */
  readonly baseUrl: string;
  /** The model name sent in every request (and part of the Reviewer fingerprint). */
  readonly model: string;
  /** The NAME of the environment variable holding the API key; the key itself is never configured. */
  readonly apiKeyEnv: string;
  /** Per-request deadline in ms (default 60,000), covering connect, headers and body. */
  readonly timeoutMs?: number;
  /** `max_completion_tokens` of the request (default 4,096). */
  readonly maxTokens?: number;
  /** Sampling temperature (default: not sent, the server's default). */
  readonly temperature?: number;
}

/** {@link OpenAIReviewerOptions} with every default filled in and `baseUrl` normalized (no trailing `/`). */
export interface ResolvedOptions {
  readonly baseUrl: string;
  readonly model: string;
  readonly apiKeyEnv: string;
  readonly timeoutMs: number;
  readonly maxTokens: number;
  /** `null`: not sent. */
  readonly temperature: number | null;
}

/**
 * The JSON Schema of {@link OpenAIReviewerOptions}: `@asp/plugin-host` validates the configured
 * options with it (ajv) before `init`, and `init` checks them again with {@link resolveOptions}.
 */
export const OPTIONS_SCHEMA: Readonly<Record<string, unknown>> = Object.freeze({
  type: "object",
  additionalProperties: false,
  required: ["baseUrl", "model", "apiKeyEnv"],
  properties: {
    baseUrl: { type: "string", minLength: 8, maxLength: 2048, pattern: "^https?://" },
    model: { type: "string", minLength: 1, maxLength: 128, pattern: "^[A-Za-z0-9][A-Za-z0-9._:/-]*$" },
    apiKeyEnv: { type: "string", minLength: 1, maxLength: 128, pattern: "^[A-Za-z_][A-Za-z0-9_]*$" },
    timeoutMs: { type: "integer", minimum: 1, maximum: 600_000 },
    maxTokens: { type: "integer", minimum: 1, maximum: 1_000_000 },
    temperature: { type: "number", minimum: 0, maximum: 2 },
  },
});

let check: ValidateFunction | undefined;

function bad(message: string, key: string): never {
  throw new OpenAIReviewerError("ASP_OPENAI_BAD_OPTIONS", message, { data: { key } });
}

/**
 * Check options against {@link OPTIONS_SCHEMA} and the URL rules, and fill in the defaults.
 * `baseUrl` must be plain `http:`/`https:` without user info, query or fragment (user info would
 * put a secret into configuration, errors and the fingerprint).
 *
 * @throws OpenAIReviewerError `ASP_OPENAI_BAD_OPTIONS` naming the offending key.
 */
export function resolveOptions(options: unknown): ResolvedOptions {
  check ??= new Ajv2020({ strict: true }).compile(OPTIONS_SCHEMA);
  if (!check(options)) {
    const e = check.errors?.[0];
    const p = (e?.params ?? {}) as { missingProperty?: string; additionalProperty?: string };
    bad(
      "the verifier-openai options do not match the options schema",
      p.missingProperty ?? p.additionalProperty ?? e?.instancePath.slice(1) ?? "",
    );
  }
  const o = options as OpenAIReviewerOptions;
  let url: URL;
  try {
    url = new URL(o.baseUrl);
  } catch {
    return bad("baseUrl is not a URL", "baseUrl");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") bad("baseUrl must be http or https", "baseUrl");
  if (url.username !== "" || url.password !== "") bad("baseUrl must not carry credentials", "baseUrl");
  if (url.search !== "" || url.hash !== "") bad("baseUrl must not have a query or fragment", "baseUrl");
  return {
    baseUrl: url.href.replace(/\/+$/, ""),
    model: o.model,
    apiKeyEnv: o.apiKeyEnv,
    timeoutMs: o.timeoutMs ?? 60_000,
    maxTokens: o.maxTokens ?? 4_096,
    temperature: o.temperature ?? null,
  };
}
