/**
 * Host-owned concepts a provider may never return (host §1, §6), by canonical name. A key
 * anywhere in a provider response that spells one of them is host-owned (see
 * {@link findHostOwnedFields} for how a key is matched):
 *
 * - the host decision and its verdict envelope: `decision`, `verdict`, `gateDecision`,
 *   `gateResult`, `gateStatus`, `gateOutcome`, `policyResult`, `gate`, and the decision words
 *   `allow`, `deny`, `indeterminate`;
 * - a pass/fail projection, in every word a reader takes for "this change may go in": `passFail`,
 *   `pass`, `passed`, `fail`, `failed`, `allowed`, `denied`, `permit`, `permitted`, `approve`,
 *   `approved`, `approval`, `accept`, `accepted`, `reject`, `rejected`, `block`, `blocked`,
 *   `blocking`, `blocker`, `merge`, `mergeable`;
 * - a finding's disposition and the fields the host stamps on it: `disposition`, `gating`,
 *   `effectiveSeverity`;
 * - an authority grant: `authorityGrant`, `grant`, `granted`, `authority`, `authorized`;
 * - an assurance mode and a transaction guarantee: `assuranceMode`, `assurance`,
 *   `transactionGuarantee`, `guarantee`.
 *
 * Deliberately absent, because legitimate providers use them in a diagnostic's free-form `data`
 * and no reader takes them for a gate result: `ok`, `success`, `result`, `status` (a schema
 * field), `advisory` (security advisories), `integrity` (lockfile hashes), `mode` (an edit
 * operation's file mode).
 */
export const HOST_OWNED_FIELDS = Object.freeze([
  // the host decision and its verdict envelope
  "decision",
  "verdict",
  "gateDecision",
  "gateResult",
  "gateStatus",
  "gateOutcome",
  "policyResult",
  "gate",
  "allow",
  "deny",
  "indeterminate",
  // pass/fail projections
  "passFail",
  "pass",
  "passed",
  "fail",
  "failed",
  "allowed",
  "denied",
  "permit",
  "permitted",
  "approve",
  "approved",
  "approval",
  "accept",
  "accepted",
  "reject",
  "rejected",
  "block",
  "blocked",
  "blocking",
  "blocker",
  "merge",
  "mergeable",
  // finding disposition and host-stamped finding fields
  "disposition",
  "gating",
  "effectiveSeverity",
  // authority grant
  "authorityGrant",
  "grant",
  "granted",
  "authority",
  "authorized",
  // assurance mode and transaction guarantee
  "assuranceMode",
  "assurance",
  "transactionGuarantee",
  "guarantee",
] as const);
/** One canonical host-owned concept (an entry of {@link HOST_OWNED_FIELDS}). */
export type HostOwnedField = (typeof HOST_OWNED_FIELDS)[number];

/**
 * The concepts so specific that a key merely containing them is host-owned (`finalVerdict`,
 * `hostDecision`, `decisionReason`, `achievedAssuranceMode`); every other entry must be the
 * whole key.
 */
const CONTAINED: readonly HostOwnedField[] = [
  "decision",
  "verdict",
  "disposition",
  "passFail",
  "effectiveSeverity",
  "authorityGrant",
  "assuranceMode",
  "transactionGuarantee",
];

/** `isAllowed`, `hasPassed`, `shouldBlock`, `canMerge`, `wasApproved`: a modal prefix changes nothing. */
const MODAL_PREFIXES = ["is", "has", "should", "can", "was", "will", "did", "must", "may"] as const;

/**
 * The key as a reader sees it: compatibility forms folded (full-width, ligatures, math
 * letters), accents and every character that is not a letter or digit removed (`_`, `-`,
 * whitespace, dots, zero-width characters), lower case.
 */
function normalizeFieldName(key: string): string {
  return key
    .normalize("NFKD")
    .replace(/[^\p{L}\p{N}]/gu, "")
    .toLowerCase();
}

const BY_NORMALIZED = new Map<string, HostOwnedField>(HOST_OWNED_FIELDS.map((f) => [normalizeFieldName(f), f]));
const CONTAINED_NORMALIZED = CONTAINED.map((f) => [normalizeFieldName(f), f] as const);

function exact(word: string): HostOwnedField | null {
  const hit = BY_NORMALIZED.get(word);
  if (hit !== undefined) return hit;
  // plurals: `verdicts`, `grants`, `passes`
  if (word.endsWith("es")) {
    const es = BY_NORMALIZED.get(word.slice(0, -2));
    if (es !== undefined) return es;
  }
  return word.endsWith("s") ? (BY_NORMALIZED.get(word.slice(0, -1)) ?? null) : null;
}

/** The host-owned concept `key` spells, or null. */
function match(key: string): HostOwnedField | null {
  const word = normalizeFieldName(key);
  if (word === "") return null;
  const direct = exact(word);
  if (direct !== null) return direct;
  for (const prefix of MODAL_PREFIXES) {
    if (word.length > prefix.length && word.startsWith(prefix)) {
      const stripped = exact(word.slice(prefix.length));
      if (stripped !== null) return stripped;
    }
  }
  for (const [needle, field] of CONTAINED_NORMALIZED) if (word.includes(needle)) return field;
  return null;
}

/**
 * The canonical host-owned concept a member name spells, or null (the matching rule of
 * {@link findHostOwnedFields}, one key at a time; imported from `src` by the tests).
 *
 * @example
 * ```ts
 * hostOwnedFieldOf("TRANSACTION-GUARANTEE"); // "transactionGuarantee"
 * hostOwnedFieldOf("isAllowed"); // "allowed"
 * hostOwnedFieldOf("fingerprint"); // null
 * ```
 */
export function hostOwnedFieldOf(key: string): HostOwnedField | null {
  return classify(key);
}

// Provider responses repeat the same few keys thousands of times; remember each key's verdict
// (bounded, so hostile inputs with unique keys cannot grow it without limit).
const KEY_CACHE = new Map<string, HostOwnedField | null>();
const KEY_CACHE_LIMIT = 4096;
function classify(key: string): HostOwnedField | null {
  const cached = KEY_CACHE.get(key);
  if (cached !== undefined) return cached;
  const field = match(key);
  if (KEY_CACHE.size < KEY_CACHE_LIMIT) KEY_CACHE.set(key, field);
  return field;
}

/** A host brand (`$$type: "@asp/DecisionEnvelope"`), under any spelling of `$$type`. */
function isBrand(key: string, value: unknown): boolean {
  return (
    typeof value === "string" &&
    normalizeFieldName(key) === "type" &&
    value.normalize("NFKC").trim().toLowerCase().startsWith("@asp/")
  );
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
 * Find host-owned fields anywhere in `value` (nested arrays and objects at any depth included,
 * e.g. inside a diagnostic's free-form `data`), plus host brands such as
 * `$$type: "@asp/DecisionEnvelope"`. A member name is host-owned when, after folding
 * compatibility forms and case and removing every character that is not a letter or digit
 * (`_`, `-`, whitespace, dots, zero-width characters), it is one of {@link HOST_OWNED_FIELDS}
 * (also as a plural, or after a modal prefix: `isAllowed`, `hasPassed`, `shouldBlock`), or
 * contains one of the unmistakable ones (`decision`, `verdict`, `disposition`, `passFail`,
 * `effectiveSeverity`, `authorityGrant`, `assuranceMode`, `transactionGuarantee`). Values are
 * never matched: `message: "decision"` is fine. Never throws: cycles are visited once, throwing
 * getters are skipped; the walk is iterative, so depth costs no stack.
 *
 * @example
 * ```ts
 * findHostOwnedFields({ diagnostics: [{ data: { decision: "allow" } }] });
 * // [{ pointer: "/diagnostics/0/data/decision", field: "decision" }]
 * findHostOwnedFields({ data: { TRANSACTION_GUARANTEE: "staged_snapshot", isAllowed: true } });
 * // [{ pointer: "/data/TRANSACTION_GUARANTEE", field: "transactionGuarantee" },
 * //  { pointer: "/data/isAllowed", field: "allowed" }]
 * ```
 */
export function findHostOwnedFields(value: unknown): HostOwnedFieldHit[] {
  // Pointers are built only for hits: each frame links to its parent instead of carrying a string.
  interface Frame {
    readonly node: object;
    readonly parent: Frame | null;
    readonly key: string;
  }
  const pointerOf = (frame: Frame | null, key: string): string => {
    const tokens = [escapePointer(key)];
    for (let f = frame; f !== null && f.parent !== null; f = f.parent) tokens.push(escapePointer(f.key));
    return `/${tokens.reverse().join("/")}`;
  };
  const hits: HostOwnedFieldHit[] = [];
  if (typeof value !== "object" || value === null) return hits;
  const seen = new Set<object>();
  // No depth limit: a limit would be a place to hide a field (the response size bounds the walk).
  const stack: Frame[] = [{ node: value, parent: null, key: "" }];
  while (stack.length > 0) {
    const frame = stack.pop() as Frame;
    const { node } = frame;
    if (seen.has(node)) continue;
    seen.add(node);
    let isArray: boolean;
    try {
      isArray = Array.isArray(node);
    } catch {
      continue; // a revoked proxy: not JSON, nothing to read
    }
    if (isArray) {
      const items = node as unknown[];
      for (let i = 0; i < items.length; i++) {
        const child: unknown = items[i];
        if (typeof child === "object" && child !== null) stack.push({ node: child, parent: frame, key: String(i) });
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
      if (field !== null) hits.push({ pointer: pointerOf(frame, key), field });
      else if (isBrand(key, child)) hits.push({ pointer: pointerOf(frame, key), field: "$$type" });
      if (typeof child === "object" && child !== null) stack.push({ node: child, parent: frame, key });
    }
  }
  return hits.sort((a, b) => (a.pointer < b.pointer ? -1 : a.pointer > b.pointer ? 1 : 0));
}
