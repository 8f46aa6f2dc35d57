import type { EngineUsage, ReviewFinding, ReviewResponse } from "@asp/contracts";
import { FINDING_SEVERITIES } from "@asp/contracts";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { OpenAIReviewerError } from "./errors.js";
import { createScrubber, jsonHolds, scrubJson } from "./scrub.js";

/**
 * What the model's message content must be, checked locally whatever the server enforced: the
 * request schema's shape with the bounds of the contracts `plugin-verify-response` schema.
 * Ref membership in the snapshot is the host's check (`parseVerdict`), not this one.
 */
export const VERDICT_SCHEMA: Readonly<Record<string, unknown>> = Object.freeze({
  type: "object",
  additionalProperties: false,
  required: ["verdict", "findings", "rationale"],
  properties: {
    verdict: { enum: ["pass", "issues"] },
    findings: {
      type: "array",
      maxItems: 1_000,
      items: {
        type: "object",
        additionalProperties: false,
        required: ["severity", "category", "title", "claim", "evidence_refs"],
        properties: {
          severity: { enum: [...FINDING_SEVERITIES] },
          category: { type: "string", minLength: 1, maxLength: 128, pattern: "^[a-z][a-z0-9_.-]*$" },
          title: { type: "string", minLength: 1, maxLength: 1_000 },
          claim: { type: "string", minLength: 1, maxLength: 10_000 },
          evidence_refs: {
            type: "array",
            maxItems: 1_000,
            items: { type: "string", minLength: 1, maxLength: 256 },
          },
        },
      },
    },
    rationale: { type: "string", maxLength: 100_000 },
  },
});

interface Verdict {
  verdict: "pass" | "issues";
  findings: Array<Omit<ReviewFinding, "detail" | "path">>;
  rationale: string;
}

let check: ValidateFunction<Verdict> | undefined;

/** The coded error of an answer that is not a readable chat-completions reply (`data.reason` says why). */
export function malformed(reason: string): OpenAIReviewerError {
  return new OpenAIReviewerError(
    "ASP_OPENAI_MALFORMED_RESPONSE",
    `the chat-completions answer is malformed: ${reason}`,
    {
      data: { reason },
    },
  );
}

/**
 * The message content of a chat-completions body (already parsed JSON): `choices[0].message.content`.
 *
 * @throws OpenAIReviewerError `ASP_OPENAI_REFUSAL` when the model refused or was filtered;
 *   `ASP_OPENAI_MALFORMED_RESPONSE` when there is no content string or the answer was cut off.
 */
export function contentOf(body: unknown): string {
  const choice = (body as { choices?: unknown } | null)?.choices;
  const first = Array.isArray(choice) ? (choice[0] as Record<string, unknown> | undefined) : undefined;
  if (typeof first !== "object" || first === null) throw malformed("no choices[0]");
  const message = first.message as { content?: unknown; refusal?: unknown } | undefined;
  if (typeof message?.refusal === "string" && message.refusal.length > 0) {
    throw new OpenAIReviewerError("ASP_OPENAI_REFUSAL", "the model refused to answer", { data: { reason: "refusal" } });
  }
  if (first.finish_reason === "content_filter") {
    throw new OpenAIReviewerError("ASP_OPENAI_REFUSAL", "the answer was filtered", {
      data: { reason: "content_filter" },
    });
  }
  if (first.finish_reason === "length") throw malformed("cut off at the token limit");
  if (typeof message?.content !== "string") throw malformed("no choices[0].message.content string");
  return message.content;
}

const tokenCount = (v: unknown): number | null =>
  Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= 1_000_000_000 ? (v as number) : null;

/**
 * The tokens a chat-completions body says the call cost (`usage.prompt_tokens`,
 * `usage.completion_tokens`), or null when it says nothing well-formed. The host spends them from
 * an Auto Run's extra-token budget. Pure, total.
 */
export function usageOf(body: unknown): EngineUsage | null {
  const usage = (body as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } } | null)?.usage;
  if (typeof usage !== "object" || usage === null) return null;
  const input = tokenCount(usage.prompt_tokens);
  const output = tokenCount(usage.completion_tokens);
  return input === null || output === null ? null : { input_tokens: input, output_tokens: output };
}

/**
 * Parse and validate the model's content as a verdict and turn it into the contracts
 * `ReviewResponse` (`rationale` is not part of it and is dropped; evidence refs de-duplicated).
 * Before validation, every string of the parsed content (keys included) is scrubbed of each of
 * `secrets` (the API key) and its encodings (raw, JSON-escaped, percent-encoded, hex, base64,
 * base64url, reversed), replaced with `[redacted:api-key]`: an endpoint that echoes the key never
 * gets it into the answer or the records made of it (issue 32 hole 11).
 *
 * @throws OpenAIReviewerError `ASP_OPENAI_MALFORMED_RESPONSE` when the content is not JSON or a
 *   secret cannot be scrubbed out of it; `ASP_OPENAI_SCHEMA_INVALID` when it is not
 *   {@link VERDICT_SCHEMA} (after scrubbing: a secret in `verdict` or `category` is refused).
 */
export function reviewResponseOf(content: string, secrets: readonly string[] = []): ReviewResponse {
  check ??= new Ajv2020({ strict: true, allErrors: false }).compile<Verdict>(VERDICT_SCHEMA);
  const value = checkedAnswer(content, secrets, check, "the verdict does not match the verdict schema");
  return {
    kind: "review",
    verdict: value.verdict,
    findings: value.findings.map((f) => ({
      severity: f.severity,
      category: f.category,
      title: f.title,
      claim: f.claim,
      evidence_refs: [...new Set(f.evidence_refs)],
    })),
  };
}

/**
 * The model's JSON answer, scrubbed of `secrets` and checked by `check` (a review verdict, a
 * Guardian answer). Pure, total.
 *
 * @throws OpenAIReviewerError `ASP_OPENAI_MALFORMED_RESPONSE` when the content is not JSON or a
 *   secret cannot be scrubbed out of it; `ASP_OPENAI_SCHEMA_INVALID` (`message`) when `check` fails.
 */
export function checkedAnswer<T>(
  content: string,
  secrets: readonly string[],
  check: ValidateFunction<T>,
  message: string,
): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    throw malformed("the message content is not JSON");
  }
  const scrubber = createScrubber(secrets);
  const value = scrubJson(parsed, scrubber);
  // Fail closed: a reply whose replacements keep forming the key again is not returned at all.
  if (jsonHolds(value, scrubber))
    throw malformed("the message content holds the API key in a form that cannot be removed");
  if (!check(value)) {
    const e = check.errors?.[0];
    throw new OpenAIReviewerError("ASP_OPENAI_SCHEMA_INVALID", message, {
      data: { pointer: (e?.instancePath ?? "").slice(0, 200), keyword: e?.keyword ?? "" },
    });
  }
  return value;
}
