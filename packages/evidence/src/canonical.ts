import {
  canonicalBytes as coreCanonicalBytes,
  canonicalize as coreCanonicalize,
  type Digest,
  type Hasher,
  isAspError,
  type JsonValue,
} from "@asp/contracts";
import { EvidenceError } from "./errors.js";
import { digestBytes } from "./hash.js";

// The canonical form itself lives in `@asp/contracts` (runtime-free, so `@asp/policy` and
// `@asp/arbitration` run in a browser). This module keeps evidence's public API: its error code,
// the `node:crypto` default hasher, and the strict parse of stored bytes.

export type { JsonValue } from "@asp/contracts";

/** Re-throws a contracts canonical-form error under this package's code, keeping its data. */
function inEvidenceTerms<T>(run: () => T): T {
  try {
    return run();
  } catch (cause) {
    if (isAspError(cause) && cause.code === "ASP_CONTRACTS_NON_CANONICAL_VALUE") {
      throw new EvidenceError("ASP_EVIDENCE_NON_CANONICAL_VALUE", cause.message, {
        cause,
        ...(cause.data === undefined ? {} : { data: cause.data }),
      });
    }
    throw cause;
  }
}

/**
 * The RFC 8785 (JCS) canonical JSON text of `value`: object keys sorted by UTF-16 code units,
 * ECMAScript number formatting, no insignificant whitespace (`canonicalize` of `@asp/contracts`).
 *
 * @throws EvidenceError `ASP_EVIDENCE_NON_CANONICAL_VALUE` for NaN, ±Infinity, lone surrogates,
 *   `undefined`, bigint, functions, symbols, cycles, sparse arrays and non-plain objects
 *   (Date, Map, class instances). `data.pointer` names the offending value.
 * @example
 * ```ts
 * canonicalize({ b: 1, a: [true, "x"] }); // '{"a":[true,"x"],"b":1}'
 * ```
 */
export function canonicalize(value: unknown): string {
  return inEvidenceTerms(() => coreCanonicalize(value));
}

/** UTF-8 bytes of {@link canonicalize}. @throws EvidenceError `ASP_EVIDENCE_NON_CANONICAL_VALUE`. */
export function canonicalBytes(value: unknown): Uint8Array {
  return inEvidenceTerms(() => coreCanonicalBytes(value));
}

/**
 * `sha256:<hex>` over the canonical bytes of `value`. Equal JSON values have equal digests
 * whatever their key order; any change of a value changes it. The default hasher is the
 * `node:crypto` fast path; the value equals `digest` of `@asp/contracts`.
 *
 * @throws EvidenceError `ASP_EVIDENCE_NON_CANONICAL_VALUE` (see {@link canonicalize}).
 * @example
 * ```ts
 * digest({ a: 1, b: 2 }) === digest({ b: 2, a: 1 }); // true
 * ```
 */
export function digest(value: unknown, hasher?: Hasher): Digest {
  return digestBytes(canonicalBytes(value), hasher);
}

/**
 * Parse bytes that must already be canonical JSON (what this package stores), and check it.
 *
 * @throws EvidenceError `ASP_EVIDENCE_BAD_OBJECT` when the bytes are not JSON or not in canonical form.
 */
export function parseCanonical(bytes: Uint8Array | string, what = "object"): JsonValue {
  const text =
    typeof bytes === "string" ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (cause) {
    throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", `${what} is not JSON`, { cause, data: { what } });
  }
  let again: string;
  try {
    again = coreCanonicalize(parsed);
  } catch (cause) {
    throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", `${what} is not canonical JSON`, { cause, data: { what } });
  }
  if (again !== text) {
    throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", `${what} is not in canonical JSON form`, { data: { what } });
  }
  return parsed as JsonValue;
}
