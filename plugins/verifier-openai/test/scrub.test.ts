// issue 32 hole 11: the API key, in any of its obvious encodings, never survives the scrub.
import { Buffer } from "node:buffer";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { OpenAIReviewerError } from "../src/errors.js";
import { reviewResponseOf } from "../src/reply.js";
import { API_KEY_MARKER, createScrubber, scrubJson } from "../src/scrub.js";

const b = (s: string): Buffer => Buffer.from(s, "utf8");
const ENCODINGS: ReadonlyArray<readonly [string, (k: string) => string]> = [
  ["raw", (k) => k],
  ["JSON-escaped", (k) => JSON.stringify(k).slice(1, -1)],
  ["percent-encoded", encodeURIComponent],
  ["every byte %xx", (k) => [...b(k)].map((x) => `%${x.toString(16).padStart(2, "0")}`).join("")],
  ["every byte %XX", (k) => [...b(k)].map((x) => `%${x.toString(16).padStart(2, "0").toUpperCase()}`).join("")],
  ["hex", (k) => b(k).toString("hex")],
  ["HEX", (k) => b(k).toString("hex").toUpperCase()],
  ["base64", (k) => b(k).toString("base64")],
  ["base64url", (k) => b(k).toString("base64url")],
  ["base64 after 1 byte", (k) => b(`x${k}`).toString("base64")],
  ["base64 after 2 bytes", (k) => b(`xy${k}`).toString("base64")],
  ["base64url after 1 byte", (k) => b(`x${k}`).toString("base64url")],
  ["reversed", (k) => [...k].reverse().join("")],
];
const printableKey = fc.stringMatching(/^[\x21-\x7e]{12,64}$/);

describe("createScrubber", () => {
  it.each(ENCODINGS)("removes a key spelled %s, whatever text surrounds it (property)", (_, encode) => {
    fc.assert(
      fc.property(printableKey, fc.string({ maxLength: 20 }), fc.string({ maxLength: 20 }), (key, before, after) => {
        const scrubber = createScrubber([key]);
        const out = scrubber.scrub(`${before}${encode(key)}${after}`);
        expect(scrubber.holds(out)).toBe(false);
        expect(out).not.toContain(key);
        expect(out).toContain(API_KEY_MARKER);
      }),
    );
  });

  it("scrubs object keys and nested strings alike, and leaves other values", () => {
    const key = "sk-live-0123456789abcdef";
    const s = createScrubber([key]);
    expect(scrubJson({ [key]: [1, true, null, `a ${key}`], __proto__x: { t: b(key).toString("hex") } }, s)).toEqual({
      [API_KEY_MARKER]: [1, true, null, `a ${API_KEY_MARKER}`],
      __proto__x: { t: API_KEY_MARKER },
    });
  });

  it("an empty secret list scrubs nothing", () => {
    expect(createScrubber([]).scrub("anything")).toBe("anything");
    expect(createScrubber([""]).scrub("anything")).toBe("anything");
  });
});

describe("reviewResponseOf with the API key", () => {
  const verdict = (text: string) =>
    JSON.stringify({
      verdict: "issues",
      findings: [{ severity: "minor", category: "leak", title: text, claim: text, evidence_refs: ["payload"] }],
      rationale: text,
    });

  it("fails closed (MALFORMED_RESPONSE) when the key keeps reappearing: a key inside the marker itself", () => {
    let error: unknown;
    try {
      reviewResponseOf(verdict("see redacted:api"), ["redacted:api"]);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(OpenAIReviewerError);
    expect((error as OpenAIReviewerError).code).toBe("ASP_OPENAI_MALFORMED_RESPONSE");
  });

  it("returns the verdict unchanged when it does not mention the key", () => {
    const r = reviewResponseOf(verdict("the sum is wrong"), ["sk-live-0123456789abcdef"]);
    expect(r).toMatchObject({ verdict: "issues", findings: [{ title: "the sum is wrong" }] });
  });
});
