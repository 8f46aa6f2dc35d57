import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findHostOwnedFields, HOST_OWNED_FIELDS, validateAssessment, validateEditPlan } from "../src/index.js";
import { VALID } from "./fixtures/valid.js";

describe("findHostOwnedFields", () => {
  describe("when a provider hides a host-owned field", () => {
    it("finds a decision nested at /diagnostics/3/data (host §1)", () => {
      const diagnostics = [0, 1, 2, 3].map((i) => ({ ...VALID.diagnostic, fingerprint: `f${i}` }));
      const response = {
        ...VALID.assessment,
        diagnostics: diagnostics.map((d, i) => (i === 3 ? { ...d, data: { decision: "allow" } } : d)),
      };
      expect(findHostOwnedFields(response)).toEqual([{ pointer: "/diagnostics/3/data/decision", field: "decision" }]);
    });

    it.each([
      ["verdict", { verdict: "pass" }, "/verdict"],
      ["disposition", { x: [{ disposition: "advisory" }] }, "/x/0/disposition"],
      ["authority grant (snake case)", { authority_grant: {} }, "/authority_grant"],
      ["assurance mode (kebab case)", { "assurance-mode": "isolated" }, "/assurance-mode"],
      ["transaction guarantee", { meta: { transactionGuarantee: "staged_snapshot" } }, "/meta/transactionGuarantee"],
      ["pass/fail projection", { passFail: "pass" }, "/passFail"],
      ["a key with a slash (pointer escaping)", { "a/b": { decision: 1 } }, "/a~1b/decision"],
      ["a host brand", { envelope: { $$type: "@asp/DecisionEnvelope" } }, "/envelope/$$type"],
    ])("finds %s", (_what, value, pointer) => {
      expect(findHostOwnedFields(value).map((h) => h.pointer)).toEqual([pointer]);
    });
  });

  describe("when the response is clean", () => {
    it("finds nothing in every valid provider fixture", () => {
      expect(findHostOwnedFields(VALID.assessment)).toEqual([]);
      expect(findHostOwnedFields(VALID["edit-plan"])).toEqual([]);
      expect(findHostOwnedFields(VALID.diagnostic)).toEqual([]);
    });
    it("does not flag host-owned words used as values", () => {
      expect(findHostOwnedFields({ message: "decision", tags: ["verdict"] })).toEqual([]);
    });
  });

  it("never throws and terminates on cycles and arbitrary values", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    cyclic.decision = "deny";
    expect(findHostOwnedFields(cyclic)).toEqual([{ pointer: "/decision", field: "decision" }]);
    fc.assert(
      fc.property(fc.anything(), (v) => Array.isArray(findHostOwnedFields(v))),
      { numRuns: 500 },
    );
  });

  it("finds any host-owned key planted anywhere in a JSON tree (fast-check)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(...HOST_OWNED_FIELDS), (tree, field) => {
        const wrapped = { payload: tree, deep: [{ [field]: true }] };
        expect(findHostOwnedFields(wrapped).some((h) => h.pointer === `/deep/0/${field}` && h.field === field)).toBe(
          true,
        );
      }),
    );
  });
});

describe("validateAssessment / validateEditPlan", () => {
  it("accept clean provider output", () => {
    expect(validateAssessment(VALID.assessment).ok).toBe(true);
    expect(validateEditPlan(VALID["edit-plan"]).ok).toBe(true);
  });
  it("treat a host-owned field as malformed even where the schema allows free-form data (host §1)", () => {
    const sneaky = {
      ...VALID.assessment,
      diagnostics: [{ ...VALID.diagnostic, data: { nested: { verdict: "allow" } } }],
    };
    const result = validateAssessment(sneaky);
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(result.errors[0]).toEqual({
        pointer: "/diagnostics/0/data/nested/verdict",
        message: "host-owned field verdict is not allowed in a provider response",
      });
  });
  it("reject a provider-claimed transaction guarantee on an edit plan (host §6)", () => {
    const result = validateEditPlan({ ...VALID["edit-plan"], transactionGuarantee: "staged_snapshot" });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors.map((e) => e.pointer)).toEqual(["/transactionGuarantee"]);
  });
});
