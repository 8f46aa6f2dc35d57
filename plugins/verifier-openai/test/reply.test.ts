// THREAT-MODEL invariant 10: the reply parser is total. Whatever content or body a server sends,
// the result is a ReviewResponse the host's own schema accepts, or a coded error; never a throw of
// anything else, and never an answer plugin-host would refuse.
import { validate } from "@asp/contracts";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { OpenAIReviewerError } from "../src/errors.js";
import { contentOf, reviewResponseOf } from "../src/reply.js";

const finding = fc.record({
  severity: fc.oneof(fc.constantFrom("critical", "major", "minor", "info"), fc.string()),
  category: fc.oneof(fc.constantFrom("correctness", "unsupported_claim"), fc.string({ maxLength: 140 })),
  title: fc.string({ maxLength: 20 }),
  claim: fc.string({ maxLength: 20 }),
  evidence_refs: fc.array(fc.oneof(fc.constantFrom("payload", "notes"), fc.string({ maxLength: 5 })), {
    maxLength: 4,
  }),
});
const verdict = fc.record(
  {
    verdict: fc.oneof(fc.constantFrom("pass", "issues"), fc.string()),
    findings: fc.array(finding, { maxLength: 3 }),
    rationale: fc.string({ maxLength: 20 }),
    extra: fc.anything(),
  },
  { requiredKeys: [] },
);

/** Verdicts the schema accepts: without them the accepting branch is rare enough to be missed (a flaky test). */
const valid = fc.record({
  verdict: fc.constantFrom("pass", "issues"),
  findings: fc.array(
    fc.record({
      severity: fc.constantFrom("critical", "major", "minor", "info"),
      category: fc.constantFrom("correctness", "unsupported_claim"),
      title: fc.string({ minLength: 1, maxLength: 20 }),
      claim: fc.string({ minLength: 1, maxLength: 20 }),
      evidence_refs: fc.array(fc.constantFrom("payload", "notes"), { maxLength: 2 }),
    }),
    { maxLength: 3 },
  ),
  rationale: fc.string({ maxLength: 20 }),
});

/** The outcome of parsing `content`: the answer, or the code of a coded error. */
function outcome(parse: () => unknown): unknown {
  try {
    return parse();
  } catch (error) {
    expect(error).toBeInstanceOf(OpenAIReviewerError);
    return (error as OpenAIReviewerError).code;
  }
}

describe("reply parsing (invariant 10)", () => {
  it("any content gives a ReviewResponse plugin-host accepts, or MALFORMED / SCHEMA_INVALID", () => {
    let answers = 0;
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          verdict.map((v) => JSON.stringify(v)),
          valid.map((v) => JSON.stringify(v)),
          fc.json(),
        ),
        (content) => {
          const r = outcome(() => reviewResponseOf(content));
          if (typeof r === "string")
            expect(["ASP_OPENAI_MALFORMED_RESPONSE", "ASP_OPENAI_SCHEMA_INVALID"]).toContain(r);
          else {
            answers += 1;
            expect(validate("plugin-verify-response", r).ok).toBe(true);
          }
        },
      ),
      { numRuns: 500 },
    );
    // The generator reaches the accepting branch too, not only the refusals.
    expect(answers).toBeGreaterThan(0);
  });

  it("any body gives a content string, or MALFORMED / REFUSAL", () => {
    fc.assert(
      fc.property(fc.anything(), (body) => {
        const r = outcome(() => contentOf(body));
        if (r !== "ASP_OPENAI_MALFORMED_RESPONSE" && r !== "ASP_OPENAI_REFUSAL") expect(typeof r).toBe("string");
      }),
      { numRuns: 500 },
    );
  });
});
