import { canonicalize, type FactInput } from "@asp/evidence";

/** A fact the size and shape of an `asp gate` receipt (about 1.5 KB of record, one index key, one state key). */
export function receiptFact(n: number): FactInput {
  return {
    kind: "ths.receipt",
    record: {
      id: `rcpt-${n}`,
      decision: n % 3 === 0 ? "deny" : "allow",
      envelope: `sha256:${"ab".repeat(32)}`,
      findings: Array.from({ length: 8 }, (_, i) => ({
        rule: `rule-${i}`,
        path: `src/mod${i}/file${n % 50}.ts`,
        line: i * 7,
      })),
      pad: "x".repeat(900),
    },
    index: [{ name: "repo", value: `/repos/repo-${n % 16}` }],
    state: [`ths.trustedBase:/repos/repo-${n % 16}`],
  };
}

/** Bytes of one receipt's log row (the raw baseline writes rows this size). */
export function receiptRowBytes(): Uint8Array {
  return new TextEncoder().encode(canonicalize({ ...receiptFact(1), at: new Date(0).toISOString(), seq: 1 }));
}
