import { CALL_SITES, type CallSite, FAIL_CLASSES, type FailClass, type FailPolicyOutcome } from "@asp/contracts";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type ActivePolicy,
  DEFAULT_FAIL_POLICY,
  failPolicyCell,
  failPolicyTable,
  parsePolicy,
  stricterOutcome,
} from "../src/index.js";
import { basePolicy, policyWith } from "./fixtures/policies.js";

// The documented built-in table (docs/policy.md), spelled out so a change to it is deliberate.
const EXPECTED: ReadonlyArray<readonly [FailClass, FailPolicyOutcome, FailPolicyOutcome, FailPolicyOutcome]> = [
  ["crashed", "open", "indeterminate", "indeterminate"],
  ["timed_out", "open", "indeterminate", "indeterminate"],
  ["malformed", "indeterminate", "deny", "deny"],
  ["stale", "indeterminate", "indeterminate", "indeterminate"],
  ["unsupported", "open", "indeterminate", "indeterminate"],
  ["errored", "open", "indeterminate", "indeterminate"],
  ["cancelled", "open", "indeterminate", "indeterminate"],
  ["incomplete", "indeterminate", "indeterminate", "indeterminate"],
  ["quarantined", "open", "indeterminate", "indeterminate"],
  ["incompatible", "indeterminate", "indeterminate", "indeterminate"],
  ["missing", "open", "indeterminate", "indeterminate"],
  ["unavailable", "open", "indeterminate", "indeterminate"],
  ["missing_authority", "open", "indeterminate", "indeterminate"],
  ["insufficient_assurance", "indeterminate", "indeterminate", "indeterminate"],
  ["policy_self_authorization", "deny", "deny", "deny"],
  ["direct_write_risk", "open", "indeterminate", "indeterminate"],
  ["integrity_unverified", "indeterminate", "indeterminate", "indeterminate"],
  ["worktree_changed", "indeterminate", "indeterminate", "indeterminate"],
  ["host_incompatible", "indeterminate", "indeterminate", "indeterminate"],
];
const CELLS = EXPECTED.flatMap(([failClass, interactive, gate, sweep]) =>
  (
    [
      ["interactive", interactive],
      ["gate", gate],
      ["sweep", sweep],
    ] as const
  ).map(([site, outcome]) => [failClass, site, outcome] as const),
);

const noOverrides = parsePolicy(policyWith((p) => delete p.failPolicy));

describe("failPolicyCell", () => {
  it("H10.1 the built-in table covers every fail class × call-site", () => {
    expect(EXPECTED.map(([c]) => c)).toEqual([...FAIL_CLASSES]);
    expect(CELLS).toHaveLength(FAIL_CLASSES.length * CALL_SITES.length);
  });

  describe("when the policy sets no cell", () => {
    it.each(CELLS)("%s at %s is %s", (failClass, site, outcome) => {
      expect(DEFAULT_FAIL_POLICY[failClass][site]).toBe(outcome);
      expect(failPolicyCell(noOverrides, failClass, site, { requiredSource: true })).toBe(outcome);
      expect(failPolicyCell(null, failClass, site, { requiredSource: false })).toBe(outcome);
    });

    // host §2: these conditions at a gate produce indeterminate or deny, never allow.
    it.each(FAIL_CLASSES)("H2.6 %s never opens a gate", (failClass) => {
      expect(DEFAULT_FAIL_POLICY[failClass].gate).not.toBe("open");
    });
  });

  describe("when the policy overrides cells", () => {
    it.each(CELLS)("H2.1 %s at %s takes the policy's value", (failClass, site) => {
      for (const outcome of ["open", "indeterminate", "deny"] as const) {
        if (site === "gate" && outcome === "open") continue; // rejected by parsePolicy
        const policy = parsePolicy(policyWith((p) => (p.failPolicy = { [failClass]: { [site]: outcome } })));
        expect(failPolicyCell(policy, failClass, site, { requiredSource: true })).toBe(outcome);
      }
    });

    it("keeps the built-in value for cells the policy does not set", () => {
      const policy = parsePolicy(basePolicy()); // sets timed_out interactive open, gate deny
      expect(failPolicyCell(policy, "timed_out", "gate", { requiredSource: true })).toBe("deny");
      expect(failPolicyCell(policy, "timed_out", "sweep", { requiredSource: true })).toBe("indeterminate");
    });
  });

  // host §2 floor: no gate cell may be open for a required source, whatever the input.
  describe("when a policy object bypassed parsePolicy", () => {
    const forged = (failPolicy: unknown): ActivePolicy =>
      ({ ...parsePolicy(basePolicy()), document: { ...basePolicy(), failPolicy } }) as unknown as ActivePolicy;

    it.each(FAIL_CLASSES)(
      "%s at the gate stays closed for a required source even if the cell says open",
      (failClass) => {
        const policy = forged({ [failClass]: { gate: "open", interactive: "open", sweep: "open" } });
        expect(failPolicyCell(policy, failClass, "gate", { requiredSource: true })).toBe(
          DEFAULT_FAIL_POLICY[failClass].gate,
        );
        expect(failPolicyCell(policy, failClass, "interactive", { requiredSource: true })).toBe("open");
      },
    );

    it("lets an optional source's gate cell say what it says (optional loss only reduces coverage)", () => {
      expect(failPolicyCell(forged({ crashed: { gate: "open" } }), "crashed", "gate", { requiredSource: false })).toBe(
        "open",
      );
    });

    it("H2.6 never returns open for a gate on a required source (fast-check over garbage tables)", () => {
      const garbage = fc.oneof(
        fc.jsonValue(),
        fc.dictionary(
          fc.constantFrom(...FAIL_CLASSES, "__proto__", "x"),
          fc.oneof(fc.jsonValue(), fc.record({ gate: fc.jsonValue(), interactive: fc.jsonValue() })),
        ),
      );
      fc.assert(
        fc.property(garbage, fc.constantFrom(...FAIL_CLASSES), (table, failClass) => {
          const outcome = failPolicyCell(forged(table), failClass, "gate", { requiredSource: true });
          expect(["indeterminate", "deny"]).toContain(outcome);
        }),
        { numRuns: 500 },
      );
      for (const junk of [undefined, null, 42, "policy", { document: null }]) {
        expect(failPolicyCell(junk as unknown as ActivePolicy, "crashed", "gate", { requiredSource: true })).toBe(
          "indeterminate",
        );
      }
    });
  });

  describe("when the fail class or call-site is unknown", () => {
    it("H2.2 throws ASP_POLICY_UNKNOWN_VALUE rather than guessing", () => {
      expect(() => failPolicyCell(null, "flaky" as FailClass, "gate", { requiredSource: true })).toThrowWithCode(
        "ASP_POLICY_UNKNOWN_VALUE",
      );
      expect(() => failPolicyCell(null, "crashed", "ci" as CallSite, { requiredSource: true })).toThrowWithCode(
        "ASP_POLICY_UNKNOWN_VALUE",
      );
    });
  });
});

describe("failPolicyTable", () => {
  it("is the complete effective table: policy cells over built-in ones", () => {
    const table = failPolicyTable(parsePolicy(basePolicy()));
    expect(Object.keys(table)).toEqual([...FAIL_CLASSES]);
    expect(table.timed_out).toEqual({ interactive: "open", gate: "deny", sweep: "indeterminate" });
    expect(table.crashed).toEqual(DEFAULT_FAIL_POLICY.crashed);
  });
});

describe("stricterOutcome", () => {
  it.each([
    ["open", "indeterminate", "indeterminate"],
    ["deny", "indeterminate", "deny"],
    ["open", "open", "open"],
    ["deny", "open", "deny"],
  ] as const)("stricterOutcome(%s, %s) is %s", (a, b, expected) => {
    expect(stricterOutcome(a, b)).toBe(expected);
    expect(stricterOutcome(b, a)).toBe(expected);
  });
});
