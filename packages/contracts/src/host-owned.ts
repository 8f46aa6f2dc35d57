/**
 * Host-owned concepts a provider may never return (host §1): a pass/fail projection, a host
 * decision, a verdict envelope, a finding disposition, an authority grant, an assurance mode or
 * a transaction guarantee. Keys are compared case- and separator-insensitively, so
 * `transaction_guarantee`, `transactionGuarantee` and `Transaction-Guarantee` are one field.
 */
export const HOST_OWNED_FIELDS = Object.freeze([
  "decision",
  "verdict",
  "disposition",
  "authorityGrant",
  "grant",
  "assuranceMode",
  "transactionGuarantee",
  "passFail",
  "gateResult",
  "gateDecision",
  "policyResult",
] as const);
export type HostOwnedField = (typeof HOST_OWNED_FIELDS)[number];

const normalize = (key: string): string => key.replace(/[-_\s]/g, "").toLowerCase();
const BY_NORMALIZED = new Map<string, HostOwnedField>(HOST_OWNED_FIELDS.map((f) => [normalize(f), f]));

/** One host-owned field found in a provider response. */
export interface HostOwnedFieldHit {
  /** RFC 6901 JSON pointer to the offending member. */
  readonly pointer: string;
  /** The canonical host-owned concept it names. */
  readonly field: HostOwnedField | "$$type";
}

const escapePointer = (token: string): string => token.replace(/~/g, "~0").replace(/\//g, "~1");

/**
 * Find host-owned fields anywhere in `value` (nested arrays and objects included, e.g. inside a
 * diagnostic's free-form `data`), plus host brands such as `$$type: "@asp/DecisionEnvelope"`.
 * Never throws: cycles are visited once, throwing getters are skipped.
 *
 * @example
 * ```ts
 * findHostOwnedFields({ diagnostics: [{ data: { decision: "allow" } }] });
 * // [{ pointer: "/diagnostics/0/data/decision", field: "decision" }]
 * ```
 */
export function findHostOwnedFields(value: unknown): HostOwnedFieldHit[] {
  const hits: HostOwnedFieldHit[] = [];
  const seen = new Set<object>();
  const stack: Array<{ node: unknown; pointer: string; depth: number }> = [{ node: value, pointer: "", depth: 0 }];
  while (stack.length > 0) {
    const { node, pointer, depth } = stack.pop() as { node: unknown; pointer: string; depth: number };
    if (typeof node !== "object" || node === null || seen.has(node) || depth > 256) continue;
    seen.add(node);
    let entries: Array<[string, unknown]>;
    try {
      entries = Array.isArray(node) ? node.map((v, i) => [String(i), v]) : Object.entries(node);
    } catch {
      continue;
    }
    for (const [key, child] of entries) {
      const childPointer = `${pointer}/${escapePointer(key)}`;
      if (!Array.isArray(node)) {
        const field = BY_NORMALIZED.get(normalize(key));
        if (field !== undefined) hits.push({ pointer: childPointer, field });
        else if (key === "$$type" && typeof child === "string" && child.startsWith("@asp/")) {
          hits.push({ pointer: childPointer, field: "$$type" });
        }
      }
      stack.push({ node: child, pointer: childPointer, depth: depth + 1 });
    }
  }
  return hits.sort((a, b) => (a.pointer < b.pointer ? -1 : a.pointer > b.pointer ? 1 : 0));
}
