import { validate } from "@asp/contracts";
import { createMemoryStore } from "@asp/evidence";
import { describe, expect, it } from "vitest";
import {
  type Assessment,
  type AuditRequest,
  assessmentDigest,
  auditCompletedEvent,
  auditRequestDigest,
  auditStartedEvent,
  checkAuditCompletion,
  commitTransition,
  findingFingerprint,
  findingIdOf,
  runIdOf,
} from "../src/index.js";
import { RUN } from "./helpers.js";

const D = (c: string) => `sha256:${c.repeat(64)}`;
const REQUEST: AuditRequest = {
  audit_id: "audit:1",
  subject_kind: "result_review",
  subject_entity_kind: "candidate_evidence_snapshot",
  subject_id: "candidate:1",
  run: RUN,
  review_run_id: "review:1",
  candidate_payload_digest: D("a"),
  snapshot_digest: D("b"),
  reviewer: { actor_id: "rev", session_id: "rs", fingerprint: "model-b" },
};
const ASSESSMENT: Assessment = {
  audit_request_digest: auditRequestDigest(REQUEST),
  subject_kind: "result_review",
  subject_entity_kind: "candidate_evidence_snapshot",
  subject_id: "candidate:1",
  attempt: 1,
  verdict: "pass",
  decision: null,
  findings: [],
  risk: null,
  authorization: null,
  outcome: "verdict",
  rationale: "ok",
  failure: null,
  bookkeeping: { durable: true, retry: false, final: true, gating: true },
};
const AT = "2026-12-01T00:00:00.000Z";

describe("audit events (item 9)", () => {
  it("AM.api.2 AM.api.4: started and completed carry the same audit id, subject fields and request digest, and validate", () => {
    const s = auditStartedEvent("e1", AT, REQUEST, 1);
    const c = auditCompletedEvent("e2", AT, REQUEST, ASSESSMENT);
    expect(validate("event-auto-audit-started", s).ok).toBe(true);
    expect(validate("event-auto-audit-completed", c).ok).toBe(true);
    for (const k of [
      "audit_id",
      "subject_kind",
      "subject_entity_kind",
      "subject_id",
      "audit_request_digest",
    ] as const) {
      expect(c[k]).toBe(s[k]);
    }
  });

  it("AM.api.4: binds request and subject only, never the result", () => {
    const a = auditCompletedEvent("e2", AT, REQUEST, ASSESSMENT);
    const b = auditCompletedEvent("e2", AT, REQUEST, { ...ASSESSMENT, verdict: "issues", rationale: "no" });
    expect(a.audit_request_digest).toBe(b.audit_request_digest);
    expect(a.assessment_digest).not.toBe(b.assessment_digest);
    expect(a.audit_request_digest).not.toBe(a.assessment_digest);
    for (const change of [{ subject_id: "candidate:2" }, { snapshot_digest: D("c") }, { reviewer: null }]) {
      expect(auditRequestDigest({ ...REQUEST, ...change } as AuditRequest)).not.toBe(auditRequestDigest(REQUEST));
    }
  });

  it("AM.api.3: only result_review + candidate_evidence_snapshot (and permission_review + approval_action)", () => {
    expect(() =>
      auditRequestDigest({ ...REQUEST, subject_entity_kind: "approval_action" } as unknown as AuditRequest),
    ).toThrowWithCode("ASP_AUTO_MODE_INVALID_RECORD");
    const crossed = { ...auditStartedEvent("e1", AT, REQUEST, 1), subject_kind: "permission_review" };
    expect(validate("event-auto-audit-started", crossed).ok).toBe(false);
  });

  it.each<[string, Partial<Assessment>]>([
    ["verdict", { verdict: "issues" }],
    [
      "findings",
      {
        findings: [
          { finding_id: "f", fingerprint: D("d"), severity: "major", category: "c", claim: "x", evidence_refs: [] },
        ],
      },
    ],
    ["outcome", { outcome: "timeout" }],
    ["rationale", { rationale: "other" }],
    ["failure", { failure: { outcome: "timeout", missing_coverage: [] } }],
    ["attempt", { attempt: 2 }],
    ["bookkeeping (retry state)", { bookkeeping: { durable: true, retry: true, final: true, gating: true } }],
    ["bookkeeping (gating or shadow)", { bookkeeping: { durable: true, retry: false, final: true, gating: false } }],
    ["request digest", { audit_request_digest: D("e") }],
  ])("AM.api.5: covers %s", (_n, change) => {
    expect(assessmentDigest({ ...ASSESSMENT, ...change } as Assessment)).not.toBe(assessmentDigest(ASSESSMENT));
  });

  it("AM.api.5: a completion whose assessment does not re-hash fails closed", () => {
    const c = auditCompletedEvent("e2", AT, REQUEST, ASSESSMENT);
    expect(checkAuditCompletion(c)).toEqual(ASSESSMENT);
    expect(() => checkAuditCompletion({ ...c, assessment: { ...ASSESSMENT, verdict: "issues" } })).toThrowWithCode(
      "ASP_AUTO_MODE_DIGEST_MISMATCH",
    );
    // The same assessment moved onto another request is refused too.
    expect(() => checkAuditCompletion({ ...c, audit_request_digest: D("f") })).toThrowWithCode(
      "ASP_AUTO_MODE_DIGEST_MISMATCH",
    );
  });

  it("AM.api.5: such a completion is never committed (nothing written)", async () => {
    const store = await createMemoryStore();
    const c = auditCompletedEvent("e2", AT, REQUEST, ASSESSMENT);
    await expect(
      commitTransition(store.log, runIdOf(RUN), {
        event: { ...c, assessment: { ...ASSESSMENT, rationale: "forged" } },
        records: [],
      }),
    ).rejects.toThrowWithCode("ASP_AUTO_MODE_INVALID_RECORD");
    expect(await store.log.head()).toBeNull();
  });
});

describe("finding identity (item 5)", () => {
  const content = { severity: "major" as const, category: "correctness", claim: "wrong", evidence_refs: ["b", "a"] };
  it("AM.findings.1: content only; ref order does not matter; each content field does", () => {
    expect(findingFingerprint(content)).toBe(findingFingerprint({ ...content, evidence_refs: ["a", "b"] }));
    for (const change of [
      { severity: "minor" as const },
      { category: "style" },
      { claim: "right" },
      { evidence_refs: ["a"] },
    ]) {
      expect(findingFingerprint({ ...content, ...change })).not.toBe(findingFingerprint(content));
    }
  });
  it("AM.findings.2: the same content in two review runs has two ids", () => {
    const fp = findingFingerprint(content);
    expect(findingIdOf("review:1", fp)).not.toBe(findingIdOf("review:2", fp));
    expect(findingIdOf("review:1", fp)).toBe(findingIdOf("review:1", fp));
  });
});
