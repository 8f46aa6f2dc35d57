import { ASSURANCE_MODES, SEVERITIES, type Severity } from "@asp/contracts";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { effectiveSeverity, parsePolicy, severityCeiling, severityRank } from "../src/index.js";
import { policyWith } from "./fixtures/policies.js";

const policy = parsePolicy(
  policyWith((p) => {
    p.severityCaps = [
      { authority: "ungranted", maxSeverity: "warning" },
      { provider: "asp.provider-noisy", maxSeverity: "info" },
      { isolation: "advisory", authority: "granted", maxSeverity: "warning" },
      { provider: "asp.provider-noisy", authority: "ungranted", maxSeverity: "hint" },
    ];
  }),
);
const granted = { provider: "asp.provider-typescript", authority: "granted" } as const;
const ungranted = { provider: "asp.provider-typescript", authority: "ungranted" } as const;

describe("effectiveSeverity", () => {
  // host §1 "Effective severity": the host may cap a self-reported severity, and says so.
  describe("when no cap applies", () => {
    it.each(SEVERITIES)("keeps %s as reported, without a note", (severity) => {
      expect(effectiveSeverity({ severity }, granted, "gated", policy)).toEqual({ severity, reported: severity });
    });
  });

  describe("when a cap applies", () => {
    const cases: ReadonlyArray<
      readonly [
        string,
        Severity,
        Parameters<typeof effectiveSeverity>[1],
        (typeof ASSURANCE_MODES)[number] | null,
        Severity,
        number,
      ]
    > = [
      ["an ungranted provider's error", "error", ungranted, "gated", "warning", 0],
      ["a granted provider running advisory", "error", granted, "advisory", "warning", 2],
      ["a granted provider whose isolation is unknown", "error", granted, null, "warning", 2],
      [
        "a provider capped by id",
        "warning",
        { provider: "asp.provider-noisy", authority: "granted" },
        "isolated",
        "info",
        1,
      ],
      [
        "the strictest of several caps",
        "error",
        { provider: "asp.provider-noisy", authority: "ungranted" },
        "isolated",
        "hint",
        3,
      ],
    ];
    it.each(cases)(
      "H1.5 H1b.4 caps %s and explains it in severityNote",
      (_why, severity, authority, isolation, expected, capIndex) => {
        const r = effectiveSeverity({ severity }, authority, isolation, policy);
        expect(r.severity).toBe(expected);
        expect(r.reported).toBe(severity);
        expect(r.severityNote).toContain(`severityCaps[${capIndex}]`);
        expect(r.severityNote).toContain(`from ${severity} to ${expected}`);
      },
    );

    it("matches isolation at or below the cap (gated is above advisory)", () => {
      expect(effectiveSeverity({ severity: "error" }, granted, "gated", policy).severity).toBe("error");
    });
  });

  it("H1.5 H1b.4 never raises a severity and notes exactly the changes (fast-check)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...SEVERITIES),
        fc.constantFrom("asp.provider-typescript", "asp.provider-noisy"),
        fc.constantFrom("granted", "ungranted" as const),
        fc.constantFrom(null, ...ASSURANCE_MODES),
        (severity, provider, authority, isolation) => {
          const r = effectiveSeverity({ severity }, { provider, authority }, isolation, policy);
          expect(severityRank(r.severity)).toBeGreaterThanOrEqual(severityRank(severity));
          expect(r.severityNote !== undefined).toBe(r.severity !== severity);
        },
      ),
    );
  });
});

describe("severityCeiling", () => {
  it("is null when the policy has no caps", () => {
    const bare = parsePolicy(policyWith((p) => delete p.severityCaps));
    expect(severityCeiling(bare, ungranted, null)).toBeNull();
  });
});
