import {
  type Assessment,
  CALL_SITES,
  type CallSite,
  degradationReasonOf,
  FAIL_CLASSES,
  validate,
} from "@asp/contracts";
import { failPolicyCell } from "@asp/policy";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { arbitrate, type ProviderRun, provisionalDecision } from "../src/index.js";
import { assessed, D, diag, failed, LINT, POLICY, ROGUE, SECRETS, TSC, TSGO } from "./fixtures/world.js";

const gate = (runs: ProviderRun[], callSite: CallSite = "gate") => arbitrate({ policy: POLICY, callSite, runs });
const clean = (): ProviderRun[] => [assessed(TSC, ["ts"]), assessed(SECRETS, ["secrets"])];

describe("arbitrate", () => {
  describe("when every required source is covered by an authorized provider", () => {
    it("H1.6 reports full coverage and allows when nothing blocks", () => {
      const r = gate(clean());
      expect(r.coverage).toEqual({ required: ["secrets", "types"], ran: ["secrets", "types"], degraded: [] });
      expect(r.policyDigest).toBe(POLICY.digest);
      expect(provisionalDecision(r)).toEqual({ decision: "allow", reasons: [] });
    });

    it("H1b.3 keeps an authorized provider's error as a gating, blocking finding", () => {
      const d = diag("ts", "error");
      const r = gate([assessed(TSC, ["ts"], [d]), assessed(SECRETS, ["secrets"])]);
      const types = r.requirements.find((x) => x.requirement === "types");
      expect(types?.diagnostics).toEqual([
        {
          diagnostic: d,
          provider: { id: TSC.id, version: TSC.version },
          requirement: "types",
          disposition: "gating",
          effectiveSeverity: "error",
        },
      ]);
      expect(types?.blocking).toBe(1);
      expect(provisionalDecision(r).decision).toBe("deny");
    });
  });

  // host §4 source ownership: drop or relabel, never silently.
  describe("when a diagnostic is not namespaced under a declared source", () => {
    it("H4.4 drops it and returns a typed event", () => {
      const foreign = diag("secrets", "error");
      const mismatched = { ...diag("ts", "error"), source: "tsx" };
      const r = gate([assessed(TSC, ["ts"], [foreign, mismatched]), assessed(SECRETS, ["secrets"])]);
      expect(r.requirements.flatMap((x) => x.diagnostics)).toEqual([]);
      expect(r.advisory).toEqual([]);
      expect(r.dropped).toEqual([
        expect.objectContaining({
          type: "diagnostic-dropped",
          reason: "undeclared-source",
          code: foreign.code,
          provider: { id: TSC.id, version: TSC.version },
        }),
        expect.objectContaining({ reason: "source-mismatch", source: "tsx" }),
      ]);
      expect(provisionalDecision(r).decision).toBe("allow");
    });
  });

  describe("when one provider reports a fingerprint twice in one source", () => {
    it("H4.1 keeps the most severe copy and reports the duplicate", () => {
      const warn = diag("ts", "warning", "same");
      const err = diag("ts", "error", "same");
      for (const order of [
        [warn, err],
        [err, warn],
      ]) {
        const r = gate([assessed(TSC, ["ts"], order), assessed(SECRETS, ["secrets"])]);
        expect(r.requirements.find((x) => x.requirement === "types")?.diagnostics.map((k) => k.diagnostic)).toEqual([
          err,
        ]);
        expect(r.dropped).toEqual([expect.objectContaining({ reason: "duplicate-fingerprint", fingerprint: "same" })]);
      }
    });
  });

  // host §4: a fingerprint is authoritative only within its diagnosticSource; cross-server
  // fingerprint equality must not affect the gate decision.
  describe("when different providers report equal fingerprints", () => {
    it("H4.1 keeps them apart and the decision does not depend on the equality", () => {
      const mine = diag("ts", "error", "shared");
      const withShared = gate([
        assessed(TSC, ["ts"], [mine]),
        assessed(TSGO, ["ts"], [diag("ts", "error", "shared")]),
        assessed(LINT, ["eslint"], [diag("eslint", "error", "shared")]),
        assessed(SECRETS, ["secrets"]),
      ]);
      const withDistinct = gate([
        assessed(TSC, ["ts"], [mine]),
        assessed(TSGO, ["ts"], [diag("ts", "error", "other")]),
        assessed(LINT, ["eslint"], [diag("eslint", "error", "third")]),
        assessed(SECRETS, ["secrets"]),
      ]);
      expect(withShared.requirements.find((x) => x.requirement === "types")?.diagnostics).toHaveLength(2);
      expect(withShared.advisory).toHaveLength(1);
      expect(withShared.dropped).toEqual([]);
      expect(provisionalDecision(withShared)).toEqual(provisionalDecision(withDistinct));
    });
  });

  // host §4 precedence per requirement by authority grant.
  describe("when an unauthorized provider reports on a required source", () => {
    it("H1b.3 H4.2 makes its findings advisory, capped by the policy, never blocking", () => {
      const loud = diag("ts", "error");
      const r = gate([assessed(TSC, ["ts"]), assessed(ROGUE, ["ts"], [loud]), assessed(SECRETS, ["secrets"])]);
      expect(r.requirements.find((x) => x.requirement === "types")?.authorized).toEqual([
        { id: TSC.id, version: TSC.version },
      ]);
      expect(r.advisory).toEqual([
        expect.objectContaining({
          diagnostic: loud,
          requirement: null,
          disposition: "advisory",
          effectiveSeverity: "warning",
          severityNote: expect.stringContaining("capped from error to warning"),
        }),
      ]);
      expect(provisionalDecision(r).decision).toBe("allow");
    });

    it("H1.3 H4.2 a provider granted at another call-site is unauthorized here", () => {
      const r = gate([assessed(TSC, ["ts"]), assessed(TSGO, ["ts"], [diag("ts", "error")])], "interactive");
      expect(r.advisory).toHaveLength(1);
      expect(r.requirements[0]?.authorized.map((p) => p.id)).toEqual([TSC.id]);
    });
  });

  describe("when two authorized providers on a required source disagree", () => {
    it("H4.2 surfaces both and marks a tie, which makes the gate indeterminate", () => {
      const d = diag("ts", "error");
      const r = gate([assessed(TSC, ["ts"], [d]), assessed(TSGO, ["ts"], []), assessed(SECRETS, ["secrets"])]);
      expect(r.ties).toEqual([
        {
          requirement: "types",
          source: "ts",
          providers: [
            { provider: { id: TSC.id, version: TSC.version }, blocking: true },
            { provider: { id: TSGO.id, version: TSGO.version }, blocking: false },
          ],
        },
      ]);
      expect(r.requirements.find((x) => x.requirement === "types")).toMatchObject({
        tie: true,
        ran: true,
        blocking: 1,
      });
      expect(provisionalDecision(r)).toEqual({
        decision: "indeterminate",
        reasons: ["types: authorized providers disagree"],
      });
    });

    it("H1.8 no tie when they agree: both block means deny, both clean means allow", () => {
      const both = gate([
        assessed(TSC, ["ts"], [diag("ts")]),
        assessed(TSGO, ["ts"], [diag("ts")]),
        assessed(SECRETS, ["secrets"]),
      ]);
      expect(both.ties).toEqual([]);
      expect(provisionalDecision(both).decision).toBe("deny");
      const neither = gate([assessed(TSC, ["ts"]), assessed(TSGO, ["ts"]), assessed(SECRETS, ["secrets"])]);
      expect(provisionalDecision(neither).decision).toBe("allow");
    });
  });

  describe("when required coverage is missing or degraded", () => {
    it("H4.5 names a source no provider declared as missing", () => {
      const r = gate([assessed(TSC, ["ts"])]);
      expect(r.coverage.ran).toEqual(["types"]);
      expect(r.coverage.degraded).toEqual([
        expect.objectContaining({ requirement: "secrets", reason: "missing", failClass: "missing", failOpen: false }),
      ]);
      expect(provisionalDecision(r).decision).toBe("indeterminate");
    });

    it("H4.5 names a source only unauthorized providers declared as missing-authority", () => {
      const r = gate([assessed(TSC, ["ts"]), assessed(ROGUE, ["secrets"])]);
      expect(r.coverage.degraded).toEqual([
        expect.objectContaining({ requirement: "secrets", reason: "missing-authority" }),
      ]);
    });

    // host §2: the degraded entry uses the reason of the assurance vocabulary for the typed failure.
    const failures = FAIL_CLASSES.flatMap((failClass) => CALL_SITES.map((site) => [failClass, site] as const));
    it.each(failures)(
      "a required provider that failed %s at %s degrades with its reason and fail-policy cell",
      (failClass, site) => {
        const r = gate([failed(TSC, ["ts"], failClass), assessed(SECRETS, ["secrets"])], site);
        const outcome = failPolicyCell(POLICY, failClass, site, { requiredSource: true });
        expect(r.coverage.ran).not.toContain("types");
        expect(r.coverage.degraded).toContainEqual(
          expect.objectContaining({
            provider: TSC.id,
            requirement: "types",
            reason: degradationReasonOf(failClass),
            failClass,
            providerState: "crashed",
            failOpen: outcome === "open",
          }),
        );
        if (site === "gate") expect(provisionalDecision(r).decision).not.toBe("allow");
      },
    );

    it.each<readonly [string, Partial<Assessment>, string]>([
      ["unsupported", { status: "unsupported" }, "unsupported"],
      ["error", { status: "error", error: { code: "E1", message: "boom" } }, "errored"],
      ["incomplete", { status: "incomplete" }, "incomplete"],
      ["complete but not covering the source", { coverage: { sources: ["tsx"] } }, "incomplete"],
      // host §2: a complete answer misses nothing; one that lists what it missed is incomplete.
      [
        "complete with a non-empty coverage.missing",
        { coverage: { sources: ["ts"], missing: ["src/a.ts"] } },
        "incomplete",
      ],
      [
        "cut by its finding cap",
        {
          status: "incomplete",
          coverage: { sources: ["ts"], missing: ["src/a.ts"], truncated: { total: 9, reported: 5 } },
        },
        "incomplete",
      ],
    ])("keeps status %s distinct as %s", (_why, extra, reason) => {
      const r = gate([assessed(TSC, ["ts"], [], extra), assessed(SECRETS, ["secrets"])]);
      expect(r.coverage.degraded).toEqual([
        expect.objectContaining({ provider: TSC.id, requirement: "types", reason }),
      ]);
      expect(r.coverage.ran).toEqual(["secrets"]);
    });

    it("issue 26: a finding cap says how many findings there were and which paths were cut, in the degraded detail", () => {
      const missing = ["a.env", "b.env", "c.env", "d.env", "e.env", "f.env", "g\u001b[2J.env"];
      const r = gate([
        assessed(TSC, ["ts"], [], {
          status: "incomplete",
          coverage: { sources: ["ts"], missing, truncated: { total: 1234, reported: 500 } },
        }),
        assessed(SECRETS, ["secrets"]),
      ]);
      const entry = r.coverage.degraded.find((d) => d.provider === TSC.id);
      expect(entry?.detail).toBe(
        "source ts: the provider found 1234 finding(s) and reported the first 500 (its cap); 7 path(s) missing: a.env, b.env, c.env, d.env, e.env and 2 more",
      );
      expect(provisionalDecision(r).decision).not.toBe("allow");
    });

    it("treats an assessment naming another provider as malformed and ignores its diagnostics", () => {
      const run = assessed(TSC, ["ts"], [diag("ts")]);
      const r = gate([
        {
          ...run,
          result: {
            status: "assessed",
            assessment: {
              ...(run.result as { assessment: Assessment }).assessment,
              provider: { id: "p.tsgo", version: "2.0.0" },
            },
          },
        },
        assessed(SECRETS, ["secrets"]),
      ]);
      expect(r.coverage.degraded).toEqual([expect.objectContaining({ provider: TSC.id, reason: "malformed" })]);
      expect(r.requirements.flatMap((x) => x.diagnostics)).toEqual([]);
      expect(provisionalDecision(r).decision).toBe("deny"); // malformed at the gate is deny
    });

    it("H2.7 reports an optional provider's failure without a requirement, and it does not block", () => {
      const r = gate([...clean(), failed(LINT, ["eslint"], "crashed")]);
      expect(r.coverage.degraded).toEqual([expect.objectContaining({ provider: LINT.id, reason: "crashed" })]);
      expect(r.coverage.degraded[0]?.requirement).toBeUndefined();
      expect(provisionalDecision(r).decision).toBe("allow");
    });

    it("H2.4 lets a fail-open interactive failure allow, but visibly", () => {
      const r = gate([failed(TSC, ["ts"], "timed_out")], "interactive");
      expect(r.coverage.degraded).toEqual([expect.objectContaining({ failOpen: true, reason: "timed-out" })]);
      expect(provisionalDecision(r).decision).toBe("allow");
    });
  });

  describe("when the input is malformed", () => {
    it.each([
      ["a duplicate provider", [assessed(TSC, ["ts"]), assessed(TSC, ["ts"])], "ASP_ARBITRATION_DUPLICATE_PROVIDER"],
      [
        "a run without identity",
        [{ declaredSources: [], result: { status: "failed", failClass: "crashed" } }],
        "ASP_ARBITRATION_INVALID_INPUT",
      ],
      [
        "an unknown fail class",
        [{ ...failed(TSC, ["ts"], "crashed"), result: { status: "failed", failClass: "flaky" } }],
        "ASP_ARBITRATION_INVALID_INPUT",
      ],
      ["a run without a result", [{ provider: TSC, declaredSources: ["ts"] }], "ASP_ARBITRATION_INVALID_INPUT"],
    ])("throws for %s", (_why, runs, code) => {
      expect(() => gate(runs as ProviderRun[])).toThrowWithCode(code);
    });

    it("H2.2 throws for an unknown call-site and for a raw policy document", () => {
      expect(() => arbitrate({ policy: POLICY, callSite: "ci" as CallSite, runs: [] })).toThrowWithCode(
        "ASP_ARBITRATION_INVALID_INPUT",
      );
      expect(() => arbitrate({ policy: {} as typeof POLICY, callSite: "gate", runs: [] })).toThrowWithCode(
        "ASP_POLICY_NOT_ACTIVE",
      );
    });
  });
});

// ------------------------------------------------------------------ properties

const PROVIDERS = [TSC, TSGO, SECRETS, LINT, ROGUE] as const;
const SOURCES = ["ts", "secrets", "eslint"] as const;

const diagnosticArb = fc.record({
  source: fc.constantFrom(...SOURCES),
  code: fc.constantFrom("E1", "E2", "E3"),
  severity: fc.constantFrom("error", "warning", "info", "hint" as const),
  message: fc.constantFrom("a", "b"),
  fingerprint: fc.constantFrom("f1", "f2", "f3", "f4"),
  foreign: fc.boolean(),
});

const runArb = (provider: (typeof PROVIDERS)[number]) =>
  fc
    .record({
      declared: fc.subarray([...SOURCES], { minLength: 1 }),
      failure: fc.option(fc.constantFrom(...FAIL_CLASSES), { freq: 4 }),
      status: fc.constantFrom("complete", "complete", "incomplete", "unsupported", "error" as const),
      diagnostics: fc.array(diagnosticArb, { maxLength: 8 }),
    })
    .map(({ declared, failure, status, diagnostics }): ProviderRun => {
      if (failure !== null) return failed(provider, declared, failure);
      const ds = diagnostics.map((d) => {
        const source = d.foreign ? "other" : d.source;
        return {
          source: d.source,
          code: `${source}/${d.code}`,
          severity: d.severity,
          message: d.message,
          fingerprint: d.fingerprint,
        };
      });
      return assessed(
        provider,
        declared,
        ds,
        status === "error" ? { status, error: { code: "X", message: "x" } } : { status },
      );
    });

const worldArb = fc
  .subarray([...PROVIDERS], { minLength: 0 })
  .chain((providers) => fc.tuple(...providers.map(runArb)))
  .map((runs) => runs as ProviderRun[]);

function shuffled<T>(items: ReadonlyArray<T>, seed: number): T[] {
  const out = [...items];
  let s = seed >>> 0 || 1;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe("arbitrate properties (fast-check)", () => {
  it("is order-independent: shuffling providers and diagnostics gives the same output", () => {
    fc.assert(
      fc.property(worldArb, fc.constantFrom(...CALL_SITES), fc.integer(), (runs, site, seed) => {
        const reshuffled = shuffled(runs, seed).map((run, i) =>
          run.result.status === "assessed"
            ? {
                ...run,
                result: {
                  ...run.result,
                  assessment: {
                    ...run.result.assessment,
                    diagnostics: shuffled(run.result.assessment.diagnostics, seed + i),
                  },
                },
              }
            : run,
        );
        expect(gate(reshuffled, site)).toEqual(gate(runs, site));
      }),
      { numRuns: 400 },
    );
  });

  // host §2: missing or degraded required coverage is never a pass.
  it("adding a degraded required source never turns a non-allow into allow", () => {
    const degradedRun = fc.record({
      provider: fc.constantFrom(TSC, TSGO, SECRETS),
      failClass: fc.constantFrom(...FAIL_CLASSES),
      as: fc.constantFrom("failed", "unsupported", "error", "incomplete"),
    });
    fc.assert(
      fc.property(worldArb, fc.constantFrom(...CALL_SITES), degradedRun, (runs, site, extra) => {
        const before = provisionalDecision(gate(runs, site)).decision;
        const source = extra.provider === SECRETS ? "secrets" : "ts";
        const added: ProviderRun =
          extra.as === "failed"
            ? failed(extra.provider, [source], extra.failClass)
            : assessed(
                extra.provider,
                [source],
                [],
                extra.as === "error" ? { status: "error", error: { code: "X", message: "x" } } : { status: extra.as },
              );
        const after = provisionalDecision(
          gate([...runs.filter((r) => r.provider.id !== extra.provider.id), added], site),
        ).decision;
        const replaced = runs.some((r) => r.provider.id === extra.provider.id);
        if (!replaced && before !== "allow") expect(after).not.toBe("allow");
        // and whatever was there before, a degraded required source at the gate is never allow
        if (site === "gate") expect(after).not.toBe("allow");
      }),
      { numRuns: 400 },
    );
  });

  it("H2.8 never reports a gate fail-open for required coverage, and every degraded entry is contract-shaped", () => {
    fc.assert(
      fc.property(worldArb, (runs) => {
        const r = gate(runs);
        for (const d of r.coverage.degraded) if (d.requirement !== undefined) expect(d.failOpen).toBe(false);
        const envelope = {
          $$type: "@asp/DecisionEnvelope",
          version: 1,
          decisionId: "d",
          decision: "indeterminate",
          callSite: "gate",
          policyDigest: POLICY.digest,
          baseline: D(1),
          changeset: null,
          findings: [],
          coverage: r.coverage,
          authority: [],
          assurance: { mode: "gated", directWriteRisk: false },
          decidedAt: "2026-01-01T00:00:00Z",
        };
        const v = validate("verdict", envelope);
        expect(v.ok ? [] : v.errors).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });
});
