import { describe, expect, it } from "vitest";
import { conformanceOf, parsePolicy, validatePolicy } from "../src/index.js";
import { D, policyWith, TS } from "./fixtures/policies.js";

// issue 32 (clause audit, fifth authority axis): a conformance result is evidence the operator
// ran and pinned in trusted policy, bound to the provider's digest; it is read from nothing else.
const pinned = (conformance: Record<string, unknown>) =>
  policyWith((p) => {
    (p.providers[0] as Record<string, unknown>).conformance = conformance;
  });
const PASS = { result: "pass", suite: "asp.conformance/1", subjectDigest: TS.digest, digest: D(99) };

describe("H1a.1 conformance pin (providers[].conformance)", () => {
  describe("when the policy is parsed", () => {
    it("accepts a pinned result and keeps it in the document", () => {
      const policy = parsePolicy(pinned(PASS));
      expect(policy.document.providers[0]?.conformance).toEqual(PASS);
    });

    it.each([
      ["an unknown result", { ...PASS, result: "passed" }],
      ["no subject digest", { result: "pass", suite: PASS.suite, digest: PASS.digest }],
      ["a subject that is no digest", { ...PASS, subjectDigest: "deadbeef" }],
      ["another kit's suite name", { ...PASS, suite: "rox/2" }],
      ["an extra key (the schema is closed)", { ...PASS, verified: true }],
    ])("refuses %s", (_what, conformance) => {
      const r = validatePolicy(pinned(conformance));
      expect(r.ok).toBe(false);
    });
  });

  describe("conformanceOf", () => {
    const measured = { integrity: "verified" } as const;

    it("H1a.1 is verified only for a pass pinned to the digest of the measured provider", () => {
      expect(conformanceOf(parsePolicy(pinned(PASS)), TS, measured)).toBe("verified");
    });

    it("H1a.1 is failed for a pinned fail result of that digest", () => {
      expect(conformanceOf(parsePolicy(pinned({ ...PASS, result: "fail" })), TS, measured)).toBe("failed");
    });

    it("H1a.1 is unverified for a result pinned for another digest (the pin moved, the result did not)", () => {
      expect(conformanceOf(parsePolicy(pinned({ ...PASS, subjectDigest: D(5) })), TS, measured)).toBe("unverified");
    });

    it("H1a.1 is unverified when no result is pinned, whatever the provider claims as evidence", () => {
      const policy = parsePolicy(policyWith(() => {}));
      const claim = { ...TS, labels: ["conformant"], evidence: { conformance: PASS } };
      expect(conformanceOf(policy, claim, measured)).toBe("unverified");
    });

    it("H1a.1 is unverified when the provider that ran was not measured to be the pinned digest", () => {
      const policy = parsePolicy(pinned(PASS));
      expect(conformanceOf(policy, TS, { integrity: "unverified" })).toBe("unverified");
      expect(conformanceOf(policy, TS, { integrity: "failed" })).toBe("unverified");
    });

    it("H1a.1 is unverified for a provider of another pin (version or digest) than the one holding the result", () => {
      const policy = parsePolicy(pinned(PASS));
      expect(conformanceOf(policy, { ...TS, version: "0.2.0" }, measured)).toBe("unverified");
      expect(conformanceOf(policy, { ...TS, digest: D(5) }, measured)).toBe("unverified");
    });
  });
});
