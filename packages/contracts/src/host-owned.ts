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

// Provider responses repeat the same few keys thousands of times; remember each key's verdict
// (bounded, so hostile inputs with unique keys cannot grow it without limit).
const KEY_CACHE = new Map<string, HostOwnedField | null>();
const KEY_CACHE_LIMIT = 4096;
function classify(key: string): HostOwnedField | null {
  const cached = KEY_CACHE.get(key);
  if (cached !== undefined) return cached;
  const field = BY_NORMALIZED.get(normalize(key)) ?? null;
  if (KEY_CACHE.size < KEY_CACHE_LIMIT) KEY_CACHE.set(key, field);
  return field;
}

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
  // Pointers are built only for hits: each frame links to its parent instead of carrying a string.
  interface Frame {
    readonly node: object;
    readonly parent: Frame | null;
    readonly key: string;
    readonly depth: number;
  }
  const pointerOf = (frame: Frame | null, key: string): string => {
    const tokens = [escapePointer(key)];
    for (let f = frame; f !== null && f.parent !== null; f = f.parent) tokens.push(escapePointer(f.key));
    return `/${tokens.reverse().join("/")}`;
  };
  const hits: HostOwnedFieldHit[] = [];
  if (typeof value !== "object" || value === null) return hits;
  const seen = new Set<object>();
  const stack: Frame[] = [{ node: value, parent: null, key: "", depth: 0 }];
  while (stack.length > 0) {
    const frame = stack.pop() as Frame;
    const { node, depth } = frame;
    if (seen.has(node) || depth > 256) continue;
    seen.add(node);
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child: unknown = node[i];
        if (typeof child === "object" && child !== null)
          stack.push({ node: child, parent: frame, key: String(i), depth: depth + 1 });
      }
      continue;
    }
    let keys: string[];
    try {
      keys = Object.keys(node);
    } catch {
      continue;
    }
    for (const key of keys) {
      let child: unknown;
      try {
        child = (node as Record<string, unknown>)[key];
      } catch {
        continue;
      }
      const field = classify(key);
      const isBrand = field === null && key === "$$type" && typeof child === "string" && child.startsWith("@asp/");
      if (field !== null || isBrand) hits.push({ pointer: pointerOf(frame, key), field: field ?? "$$type" });
      if (typeof child === "object" && child !== null)
        stack.push({ node: child, parent: frame, key, depth: depth + 1 });
    }
  }
  return hits.sort((a, b) => (a.pointer < b.pointer ? -1 : a.pointer > b.pointer ? 1 : 0));
}
