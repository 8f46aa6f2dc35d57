import {
  type Assessment,
  type AssuranceMode,
  type AxisState,
  CALL_SITES,
  type CallSite,
  type DecisionEnvelope,
  degradationReasonOf,
  FAIL_CLASSES,
  type FailClass,
  type Policy,
  validate,
} from "@asp/contracts";
import { parsePolicy } from "@asp/policy";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_FAIL_TABLE, type DecideInput, decide, failCell, type ProviderEvaluation } from "../src/index.js";

const D = (c: string): string => `sha256:${c.repeat(64)}`;
const BASE = D("b");

function policy(extra: Partial<Policy> = {}): ReturnType<typeof parsePolicy> {
  return parsePolicy(policyDoc(extra));
}

function policyDoc(extra: Partial<Policy> = {}): Policy {
  return {
    apiVersion: "asp.policy/v1",
    requirements: [{ id: "types", capability: "check", sources: ["ts"], callSites: ["interactive", "gate", "sweep"] }],
    providers: [{ id: "p", version: "1.0.0", digest: D("1") }],
    grants: [
      {
        provider: "p",
        version: "1.0.0",
        digest: D("1"),
        requirement: "types",
        callSites: ["interactive", "gate", "sweep"],
      },
    ],
    ...extra,
  };
}

function assessment(
  diagnostics: Assessment["diagnostics"] = [],
  status: Assessment["status"] = "complete",
  id = "p",
): Assessment {
  return {
    provider: { id, version: "1.0.0" },
    requestId: "r1",
    status,
    validAsOf: { baseline: BASE, changeset: null, reads: [] },
    diagnostics,
    ...(status === "error" ? { error: { code: "E", message: "boom" } } : {}),
  };
}

function provider(
  outcome: ProviderEvaluation["outcome"],
  callSite: CallSite,
  options: {
    id?: string;
    granted?: boolean;
    sources?: string[];
    identity?: AxisState;
    integrity?: AxisState;
    isolation?: AssuranceMode;
  } = {},
): ProviderEvaluation {
  const id = options.id ?? "p";
  const granted = options.granted ?? true;
  return {
    provider: { id, version: "1.0.0", digest: D("1") },
    capability: "check",
    state: outcome.kind === "ok" ? "initialized" : "crashed",
    declaredSources: options.sources ?? ["ts"],
    grants: granted ? [{ requirement: "types", callSite }] : [],
    authority: {
      providerId: id,
      providerVersion: "1.0.0",
      providerDigest: D("1"),
      identity: options.identity ?? "verified",
      integrity: options.integrity ?? "verified",
      conformance: "unverified",
      isolation: "unverified",
      authorityGrant: granted ? "verified" : "unverified",
      grants: granted ? [{ requirement: "types", callSite }] : [],
    },
    outcome,
    directWrite: true,
    ...(options.isolation === undefined ? {} : { isolation: options.isolation }),
  };
}

function input(callSite: CallSite, providers: ProviderEvaluation[], extra: Partial<DecideInput> = {}): DecideInput {
  return {
    callSite,
    policy: policy(),
    baseline: BASE,
    changeset: null,
    required: [{ id: "types", capability: "check", sources: ["ts"] }],
    providers,
    assurance: { mode: "gated", directWriteRisk: true },
    host: { name: "asp-ths", version: "0.1.0", digest: null },
    decisionId: "dec-1",
    decidedAt: "2026-01-02T03:04:05.000Z",
    ...extra,
  };
}

const ok = (diagnostics: Assessment["diagnostics"] = [], id = "p"): ProviderEvaluation["outcome"] => ({
  kind: "ok",
  assessment: assessment(diagnostics, "complete", id),
});
const failed = (failClass: FailClass): ProviderEvaluation["outcome"] => ({ kind: "failed", failClass, detail: "x" });
const EXPECTED = { open: "allow", indeterminate: "indeterminate", deny: "deny" } as const;

const diag = (extra: Partial<Assessment["diagnostics"][number]> = {}): Assessment["diagnostics"][number] => ({
  source: "ts",
  code: "ts/2322",
  severity: "error",
  message: "bad",
  fingerprint: "f1",
  ...extra,
});

const valid = (envelope: DecisionEnvelope): void => {
  const r = validate("verdict", envelope);
  expect(r.ok ? [] : r.errors).toEqual([]);
};

describe("decide", () => {
  describe("H2.1 the fail table, cell by cell (host §2, DESIGN §4)", () => {
    const cells = FAIL_CLASSES.flatMap((failClass) => CALL_SITES.map((callSite) => [failClass, callSite] as const));
    it.each(cells)("%s at %s", (failClass, callSite) => {
      // Requirement-level classes arrive as requirement failures; the rest as a provider failure.
      const providerLevel = !["missing", "policy_self_authorization", "insufficient_assurance"].includes(failClass);
      const { envelope, failOpens } = decide(
        providerLevel
          ? input(callSite, [provider(failed(failClass), callSite)])
          : input(callSite, [provider(ok(), callSite)], {
              requirementFailures: [{ requirement: "types", failClass, detail: "x" }],
            }),
      );
      valid(envelope);
      const cell = DEFAULT_FAIL_TABLE[failClass][callSite];
      if (callSite === "gate") expect(envelope.decision).not.toBe("allow");
      expect(envelope.decision).toBe(EXPECTED[cell]);
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ reason: degradationReasonOf(failClass), failClass, failOpen: cell === "open" }),
      ]);
      expect(envelope.coverage.ran).toEqual([]);
      expect(failOpens).toEqual(
        cell === "open"
          ? [expect.objectContaining({ failClass, callSite, provider: providerLevel ? "p" : "requirement:types" })]
          : [],
      );
    });
  });

  describe("when trusted policy sets a cell", () => {
    it("follows it at interactive and sweep", () => {
      const p = policy({ failPolicy: { timed_out: { interactive: "deny", sweep: "open" } } });
      expect(
        decide({ ...input("interactive", [provider(failed("timed_out"), "interactive")]), policy: p }).envelope
          .decision,
      ).toBe("deny");
      expect(decide({ ...input("sweep", [provider(failed("timed_out"), "sweep")]), policy: p }).envelope.decision).toBe(
        "allow",
      );
    });
    it("H2.6 never opens a gate, even for a hand-built policy that says open (the floor)", () => {
      const base = policy();
      const p = {
        ...base,
        document: { ...base.document, failPolicy: { crashed: { gate: "open" as "indeterminate" } } },
      };
      expect(failCell(p, "crashed", "gate")).toBe("indeterminate");
      expect(decide({ ...input("gate", [provider(failed("crashed"), "gate")]), policy: p }).envelope.decision).toBe(
        "indeterminate",
      );
    });
  });

  describe("property: a gate allows only when every required provider is fresh, complete and granted", () => {
    it("H1.1 H1.6 H1.7 holds for any mix of outcomes", () => {
      const outcome = fc.oneof(
        fc.constant<ProviderEvaluation["outcome"]>(ok()),
        fc.constantFrom(...FAIL_CLASSES).map(failed),
        fc
          .constantFrom<Assessment["status"]>("incomplete", "unsupported", "error")
          .map((s): ProviderEvaluation["outcome"] => ({ kind: "ok", assessment: assessment([], s) })),
      );
      fc.assert(
        fc.property(fc.array(fc.tuple(outcome, fc.boolean()), { minLength: 0, maxLength: 4 }), (rows) => {
          const providers = rows.map(([o, granted], i) => provider(o, "gate", { id: `p${i}`, granted }));
          const { envelope } = decide(input("gate", providers));
          const allGood =
            providers.some((p) => p.grants.length > 0) &&
            providers
              .filter((p) => p.grants.length > 0)
              .every((p) => p.outcome.kind === "ok" && p.outcome.assessment.status === "complete");
          if (envelope.decision === "allow") expect(allGood).toBe(true);
          if (envelope.decision !== "allow") expect(envelope.coverage.degraded.length).toBeGreaterThan(0);
        }),
      );
    });
  });

  describe("findings", () => {
    it("H1b.5 a granted error gates (deny) with a host-synthesized nextStep when the provider gave none", () => {
      const { envelope } = decide(input("gate", [provider(ok([diag()]), "gate")]));
      valid(envelope);
      expect(envelope.decision).toBe("deny");
      expect(envelope.findings[0]).toMatchObject({
        disposition: "gating",
        grant: { requirement: "types", callSite: "gate" },
      });
      expect(envelope.findings[0]?.nextStep).toMatch(/Resolve ts\/2322/);
    });

    it.each([
      [{ fix: { description: "add a type" } }, "Fix: add a type"],
      [{ help: "read the handbook" }, "read the handbook"],
      [{ codeDescription: { href: "https://example.com/ts2322" } }, "See https://example.com/ts2322"],
    ])("H1b.5 nextStep comes from the provider's fix, help or link (%j)", (extra, next) => {
      const { envelope } = decide(input("gate", [provider(ok([diag(extra)]), "gate")]));
      expect(envelope.findings[0]?.nextStep).toBe(next);
    });

    it("H1b.3 H1b.4 an ungranted provider's error is advisory and capped, with a severityNote", () => {
      const p = policy({ severityCaps: [{ authority: "ungranted", maxSeverity: "warning" }] });
      const granted = provider(ok(), "gate");
      const other = provider(ok([diag({ fingerprint: "x" })], "q"), "gate", { id: "q", granted: false });
      const { envelope } = decide({ ...input("gate", [granted, other]), policy: p });
      valid(envelope);
      expect(envelope.decision).toBe("allow");
      expect(envelope.findings[0]).toMatchObject({ disposition: "advisory", effectiveSeverity: "warning" });
      expect(envelope.findings[0]?.severityNote).toMatch(/capped from error to warning/);
    });

    it("H4.4 drops a diagnostic under an undeclared source and degrades its provider as malformed (host §4)", () => {
      const { envelope } = decide(input("gate", [provider(ok([diag({ source: "other", code: "other/x" })]), "gate")]));
      expect(envelope.findings).toEqual([]);
      expect(envelope.decision).toBe("deny");
      expect(envelope.coverage.degraded[0]).toMatchObject({ provider: "p", reason: "malformed" });
    });

    it("H4.1 dedups within a provider's source by fingerprint, never across providers", () => {
      const p2 = provider(ok([diag()], "p2"), "gate", { id: "p2", granted: false });
      const { envelope } = decide(input("gate", [provider(ok([diag(), diag()]), "gate"), p2]));
      expect(envelope.findings.map((f) => f.provider.id)).toEqual(["p", "p2"]);
    });
  });

  describe("H1a.1 integrity and identity (host §1: authority only over measured identity and integrity)", () => {
    it.each(CALL_SITES.flatMap((site) => (["unverified", "failed"] as const).map((state) => [state, site] as const)))(
      "a granted provider whose integrity is %s at %s has its grant refused: integrity-unverified, never allow",
      (integrity, callSite) => {
        const { envelope } = decide(input(callSite, [provider(ok(), callSite, { integrity })]));
        valid(envelope);
        expect(envelope.decision).toBe("indeterminate");
        expect(envelope.coverage.ran).toEqual([]);
        expect(envelope.coverage.degraded).toEqual([
          expect.objectContaining({
            provider: "p",
            requirement: "types",
            reason: "integrity-unverified",
            failClass: "integrity_unverified",
            failOpen: false,
          }),
        ]);
      },
    );

    it("its blocking finding cannot gate either: the requirement is degraded, not decided by it", () => {
      const { envelope } = decide(input("gate", [provider(ok([diag()]), "gate", { integrity: "unverified" })]));
      expect(envelope.findings).toEqual([]);
      expect(envelope.decision).toBe("indeterminate");
    });

    it("an ungranted provider needs no measured integrity: its findings stay advisory", () => {
      const granted = provider(ok(), "gate");
      const other = provider(ok([diag()], "q"), "gate", { id: "q", granted: false, integrity: "unverified" });
      const { envelope } = decide(input("gate", [granted, other]));
      expect(envelope.decision).toBe("allow");
      expect(envelope.findings).toEqual([expect.objectContaining({ disposition: "advisory" })]);
    });

    it("H1a.1 measured integrity without verified identity is still missing authority", () => {
      const { envelope } = decide(input("gate", [provider(ok(), "gate", { identity: "unverified" })]));
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.coverage.degraded).toEqual([expect.objectContaining({ reason: "missing-authority" })]);
    });
  });

  describe("H1.5 severity caps by each provider's own isolation", () => {
    const capped = policy({ severityCaps: [{ isolation: "advisory", maxSeverity: "warning" }] });

    it.each([
      ["advisory", "gated", "warning", "allow"],
      ["advisory", "isolated", "warning", "allow"],
      [undefined, "isolated", "warning", "allow"],
      ["gated", "advisory", "error", "deny"],
      ["isolated", "gated", "error", "deny"],
    ] as const)(
      "a provider launched with isolation %s, under host assurance %s, keeps %s (%s)",
      (isolation, mode, severity, decision) => {
        const evaluation = provider(ok([diag()]), "gate", isolation === undefined ? {} : { isolation });
        const { envelope } = decide({
          ...input("gate", [evaluation]),
          policy: capped,
          assurance: { mode, directWriteRisk: true },
        });
        expect(envelope.findings[0]).toMatchObject({ disposition: "gating", effectiveSeverity: severity });
        if (severity === "warning") expect(envelope.findings[0]?.severityNote).toMatch(/isolation (advisory|unknown)/);
        expect(envelope.decision).toBe(decision);
      },
    );

    it("two providers under one host are capped each by its own isolation", () => {
      const p = policy({
        requirements: [{ id: "types", capability: "check", sources: ["ts", "js"], callSites: ["gate"] }],
        providers: [
          { id: "p", version: "1.0.0", digest: D("1") },
          { id: "q", version: "1.0.0", digest: D("1") },
        ],
        grants: ["p", "q"].map((id) => ({
          provider: id,
          version: "1.0.0",
          digest: D("1"),
          requirement: "types",
          callSites: ["gate" as const],
        })),
        severityCaps: [{ isolation: "advisory", maxSeverity: "warning" }],
      });
      const local = provider(ok([diag()]), "gate", { isolation: "advisory" });
      const sandboxed = provider(ok([diag({ source: "js", code: "js/1", fingerprint: "f2" })], "q"), "gate", {
        id: "q",
        sources: ["js"],
        isolation: "isolated",
      });
      const { envelope } = decide({
        ...input("gate", [local, sandboxed]),
        policy: p,
        required: [{ id: "types", capability: "check", sources: ["ts", "js"] }],
      });
      expect(envelope.findings.map((f) => [f.provider.id, f.effectiveSeverity])).toEqual([
        ["p", "warning"],
        ["q", "error"],
      ]);
    });
  });

  describe("H2.6 the policy's host pin (host §2: an incompatible host is never allow)", () => {
    it.each([
      ["another implementation", { implementation: "asp.ths" }],
      ["a version range the host is outside of", { implementation: "asp-ths", version: ">=0.2.0" }],
      ["a host digest this host cannot measure", { implementation: "asp-ths", digest: D("4") }],
    ] as const)("degrades every required requirement for %s, at every call-site", (_what, host) => {
      const p = policy({
        host,
        requirements: [
          { id: "types", capability: "check", sources: ["ts"], callSites: ["interactive", "gate", "sweep"] },
          { id: "lint", capability: "check", sources: ["lint"], callSites: ["interactive", "gate", "sweep"] },
        ],
        grants: ["types", "lint"].map((requirement) => ({
          provider: "p",
          version: "1.0.0",
          digest: D("1"),
          requirement,
          callSites: [...CALL_SITES],
        })),
      });
      for (const callSite of CALL_SITES) {
        const { envelope } = decide({
          ...input(callSite, [provider(ok(), callSite, { sources: ["ts", "lint"] })]),
          policy: p,
          required: [
            { id: "lint", capability: "check", sources: ["lint"] },
            { id: "types", capability: "check", sources: ["ts"] },
          ],
        });
        valid(envelope);
        expect(envelope.decision).toBe("indeterminate");
        expect(envelope.coverage.ran).toEqual([]);
        expect(envelope.coverage.degraded.map((d) => [d.requirement, d.reason, d.failOpen])).toEqual([
          ["lint", "host-incompatible", false],
          ["types", "host-incompatible", false],
        ]);
      }
    });

    it("decides as usual when the pin names this host", () => {
      const p = policy({ host: { implementation: "asp-ths", version: "^0.1.0" } });
      expect(decide({ ...input("gate", [provider(ok(), "gate")]), policy: p }).envelope.decision).toBe("allow");
    });
  });

  describe("coverage", () => {
    it("H1.9 names a requirement nobody can serve as missing", () => {
      const { envelope } = decide(input("gate", []));
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ requirement: "types", reason: "missing", failOpen: false }),
      ]);
      expect(envelope.decision).toBe("indeterminate");
    });

    it("names a requirement whose sources only ungranted providers serve as missing-authority", () => {
      const { envelope } = decide(input("gate", [provider(ok([], "q"), "gate", { id: "q", granted: false })]));
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ requirement: "types", reason: "missing-authority" }),
      ]);
    });

    it("H1b.10 H3.1 H3.3 reports direct-write-risk when the call-site needs more than a local subprocess can give (host §3)", () => {
      const p = policy({ assurance: { gate: "mediated-write" } });
      const { envelope } = decide({ ...input("gate", [provider(ok(), "gate")]), policy: p });
      valid(envelope);
      expect(envelope.decision).toBe("indeterminate");
      expect(envelope.assurance).toEqual({ mode: "gated", directWriteRisk: true });
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ provider: "p", reason: "direct-write-risk" }),
        expect.objectContaining({ requirement: "types", reason: "insufficient-assurance" }),
      ]);
    });

    it("H2.3 a status:error and a status:unsupported stay distinct", () => {
      const e = decide(input("gate", [provider({ kind: "ok", assessment: assessment([], "error") }, "gate")]));
      const u = decide(input("gate", [provider({ kind: "ok", assessment: assessment([], "unsupported") }, "gate")]));
      expect(e.envelope.coverage.degraded[0]?.reason).toBe("errored");
      expect(u.envelope.coverage.degraded[0]?.reason).toBe("unsupported");
    });
  });
});
