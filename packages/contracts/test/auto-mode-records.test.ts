import { describe, expect, it } from "vitest";
import {
  FINDING_SEVERITIES,
  isMaterialSeverity,
  STOP_REASONS,
  TERMINAL_REASONS,
  UNAVAILABLE_REASONS,
  validate,
} from "../src/index.js";
import { VALID } from "./fixtures/valid.js";

describe("Auto Mode records", () => {
  describe("AM.terminals.1 the terminal vocabulary", () => {
    it("holds the contract's names plus only the ones ADR 0005 justifies", () => {
      // Contract table of terminal reasons + "User cancellation and ordinary Agent failure keep their existing meanings".
      expect([...TERMINAL_REASONS]).toEqual([
        "policy_requires_explicit_setup",
        "budget_exhausted",
        "safe_rollback_unavailable",
        "outcome_unknown",
        "loop_detected",
        "safety_boundary",
        "user_cancelled",
        "agent_failed",
      ]);
      // No guardian_* stop reasons: why the Guardian stopped is its durable record's, not a stop reason.
      expect([...STOP_REASONS]).toEqual(["review_only", "budget_exhausted", "loop_detected"]);
      // No reviewer_* reasons that could disagree with the per-attempt outcomes.
      expect([...UNAVAILABLE_REASONS]).toEqual([
        "reviewer_independence_unavailable",
        "evidence_incomplete",
        "no_admissible_verdict",
      ]);
    });
  });

  describe("AM.findings.3 a finding's materiality", () => {
    it.each(FINDING_SEVERITIES.map((s) => [s] as const))(
      "follows from severity %s, never stated freely",
      (severity) => {
        const material = isMaterialSeverity(severity);
        expect(material).toBe(severity === "critical" || severity === "major");
        const finding = { ...VALID.finding, severity };
        expect(validate("finding", { ...finding, material }).ok).toBe(true);
        expect(validate("finding", { ...finding, material: !material }).ok).toBe(false);
      },
    );
  });

  describe("AM.findings.3 a verifier's review finding", () => {
    it("carries the content it is fingerprinted by: category, claim and evidence refs", () => {
      const response = VALID["plugin-verify-response"];
      expect(validate("plugin-verify-response", response).ok).toBe(true);
      if (response.kind !== "review") throw new Error("fixture is a review");
      const [finding] = response.findings;
      for (const key of ["category", "claim", "evidence_refs"] as const) {
        const { [key]: _, ...without } = finding as Record<string, unknown>;
        expect(validate("plugin-verify-response", { ...response, findings: [without] }).ok, key).toBe(false);
      }
    });
  });

  describe("AM.states.6 a review run whose selection found no independent Reviewer", () => {
    const unavailable = {
      ...VALID["review-run"],
      selection: "reviewer_independence_unavailable",
      reviewer: null,
      attempts: [],
      verdict: null,
      finding_ids: [],
      assessment_digest: null,
    };

    it("is recordable before any inference, bound to the candidate payload and snapshot digests", () => {
      expect(validate("review-run", unavailable).ok).toBe(true);
      const { candidate_payload_digest: _, ...unbound } = unavailable;
      expect(validate("review-run", unbound).ok).toBe(false);
    });

    it("cannot also carry a Reviewer, an attempt, a verdict or a finding", () => {
      const attempt = { attempt: 1, outcome: "verdict", started_at: "2026-12-01T10:00:00Z" };
      for (const change of [
        { reviewer: VALID["review-run"].reviewer },
        { attempts: [attempt] },
        { verdict: "pass" },
        { finding_ids: ["f-1"] },
      ]) {
        expect(validate("review-run", { ...unavailable, ...change }).ok, JSON.stringify(change)).toBe(false);
      }
    });
  });

  describe("AM.states.5 an Auto Run record", () => {
    it("freezes its independence policy and the producer's fingerprint", () => {
      const { independence: _, ...without } = VALID["auto-run"];
      expect(validate("auto-run", without).ok).toBe(false);
      for (const policy of ["distinct_fingerprint", "same_fingerprint_allowed"]) {
        const run = { ...VALID["auto-run"], independence: { policy, producer_fingerprint: "model-a" } };
        expect(validate("auto-run", run).ok).toBe(true);
      }
      // Actor/session independence is absolute: there is no policy value that relaxes it.
      const relaxed = {
        ...VALID["auto-run"],
        independence: { policy: "same_actor_allowed", producer_fingerprint: "m" },
      };
      expect(validate("auto-run", relaxed).ok).toBe(false);
    });
  });

  describe("AM.modes.2 the stored preset", () => {
    it("is normalized: a run stores on, never autonomous", () => {
      const sel = VALID["auto-run"].selection;
      expect(validate("auto-run", { ...VALID["auto-run"], selection: { ...sel, preset: "on" } }).ok).toBe(true);
      expect(validate("auto-run", { ...VALID["auto-run"], selection: { ...sel, preset: "autonomous" } }).ok).toBe(
        false,
      );
      // Configuration may still spell it autonomous.
      expect(validate("auto-mode-config", { preset: "autonomous" }).ok).toBe(true);
    });
  });
});
