import { describe, expect, it } from "vitest";
import {
  AUTO_EVENT_TYPES,
  CALL_SITES,
  DEGRADATION_REASONS,
  degradationReasonOf,
  FAIL_CLASSES,
  isValidSubjectPairing,
  PROVIDER_STATES,
  SCHEMA_NAMES,
  STAGE_FLAGS,
  SUBJECT_ENTITY_KINDS,
  SUBJECT_KINDS,
  schemaDocument,
  TRANSACTION_GUARANTEES,
} from "../src/index.js";

describe("closed vocabularies", () => {
  it("H2.8 every fail class maps to exactly one degradation reason, and back", () => {
    const mapped = FAIL_CLASSES.map(degradationReasonOf);
    expect(new Set(mapped).size).toBe(FAIL_CLASSES.length);
    expect([...mapped].sort()).toEqual([...DEGRADATION_REASONS].sort());
    expect(degradationReasonOf("policy_self_authorization")).toBe("policy-self-authorization");
    expect(degradationReasonOf("direct_write_risk")).toBe("direct-write-risk");
  });

  it("has the contract's fixed sizes", () => {
    expect(CALL_SITES).toEqual(["interactive", "gate", "sweep"]);
    expect(PROVIDER_STATES).toHaveLength(14);
    expect(FAIL_CLASSES).toHaveLength(19);
    expect(TRANSACTION_GUARANTEES).toHaveLength(5);
    expect(STAGE_FLAGS).toHaveLength(12);
    expect(AUTO_EVENT_TYPES).toHaveLength(7);
  });

  it("AM.rollout.1 has each stage numbered in order", () => {
    for (const [i, flag] of STAGE_FLAGS.entries()) expect(flag.startsWith(`stage${i + 1}_`)).toBe(true);
  });

  it.each(SUBJECT_KINDS.flatMap((k) => SUBJECT_ENTITY_KINDS.map((e) => [k, e] as const)))(
    "AM.api.3 subject pairing %s + %s is valid only for the two contract pairings",
    (kind, entity) => {
      const expected =
        (kind === "result_review" && entity === "candidate_evidence_snapshot") ||
        (kind === "permission_review" && entity === "approval_action");
      expect(isValidSubjectPairing(kind, entity)).toBe(expected);
    },
  );

  it("AM.api.2 every event schema's type constant is one of the seven event types", () => {
    const types = SCHEMA_NAMES.filter((n) => n.startsWith("event-")).map(
      (n) => (schemaDocument(n).properties as { type: { const: string } }).type.const,
    );
    expect([...types].sort()).toEqual([...AUTO_EVENT_TYPES].sort());
  });

  it("schemas carry the vocabularies verbatim (no hand-copied enums)", () => {
    const text = JSON.stringify(schemaDocument("verdict"));
    expect(text).toContain(JSON.stringify([...DEGRADATION_REASONS]));
    expect(text).toContain(JSON.stringify([...PROVIDER_STATES]));
  });
});
