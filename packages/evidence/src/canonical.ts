import { EvidenceError } from "./errors.js";
import { type Digest, digestBytes, type Hasher } from "./hash.js";

/** A JSON value as RFC 8785 understands it: what {@link canonicalize} accepts. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function pointer(path: ReadonlyArray<string | number>): string {
  return path.map((p) => `/${String(p).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

function reject(path: ReadonlyArray<string | number>, why: string): never {
  const at = pointer(path);
  throw new EvidenceError(
    "ASP_EVIDENCE_NON_CANONICAL_VALUE",
    `value at "${at || "/"}" has no canonical JSON form: ${why}`,
    {
      data: { pointer: at, reason: why },
    },
  );
}

function writeString(s: string, path: ReadonlyArray<string | number>): string {
  if (LONE_SURROGATE.test(s)) reject(path, "string contains a lone UTF-16 surrogate");
  // ECMAScript JSON.stringify string escaping is exactly RFC 8785 §3.2.2.2 for well-formed strings.
  return JSON.stringify(s);
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function write(value: unknown, path: Array<string | number>, seen: Set<object>, out: string[]): void {
  switch (typeof value) {
    case "string":
      out.push(writeString(value, path));
      return;
    case "number":
      if (!Number.isFinite(value)) reject(path, `${value} is not a JSON number`);
      // ECMAScript Number::toString is RFC 8785 §3.2.2.3; JSON.stringify also maps -0 to "0".
      out.push(JSON.stringify(value));
      return;
    case "boolean":
      out.push(value ? "true" : "false");
      return;
    case "object":
      break;
    default:
      reject(path, `${typeof value} is not a JSON value`);
  }
  if (value === null) {
    out.push("null");
    return;
  }
  const obj = value as object;
  if (seen.has(obj)) reject(path, "the value is cyclic");
  seen.add(obj);
  if (Array.isArray(obj)) {
    out.push("[");
    for (let i = 0; i < obj.length; i++) {
      if (i > 0) out.push(",");
      if (!(i in obj)) reject([...path, i], "sparse array hole");
      path.push(i);
      write(obj[i], path, seen, out);
      path.pop();
    }
    out.push("]");
  } else {
    if (!isPlainObject(obj)) reject(path, `${obj.constructor?.name ?? "object"} is not a plain object`);
    if (Object.getOwnPropertySymbols(obj).length > 0) reject(path, "object has symbol keys");
    // Default sort compares UTF-16 code units, which is the RFC 8785 §3.2.3 property order.
    const keys = Object.keys(obj).sort();
    out.push("{");
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      if (i > 0) out.push(",");
      path.push(key);
      out.push(writeString(key, path), ":");
      write((obj as Record<string, unknown>)[key], path, seen, out);
      path.pop();
    }
    out.push("}");
  }
  seen.delete(obj);
}

/**
 * The RFC 8785 (JCS) canonical JSON text of `value`: object keys sorted by UTF-16 code units,
 * ECMAScript number formatting, no insignificant whitespace.
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
  const out: string[] = [];
  write(value, [], new Set(), out);
  return out.join("");
}

/** UTF-8 bytes of {@link canonicalize}. @throws EvidenceError `ASP_EVIDENCE_NON_CANONICAL_VALUE`. */
export function canonicalBytes(value: unknown): Uint8Array {
  const buf = Buffer.from(canonicalize(value), "utf8");
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

/**
 * `sha256:<hex>` over the canonical bytes of `value`. Equal JSON values have equal digests
 * whatever their key order; any change of a value changes it.
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
    again = canonicalize(parsed);
  } catch (cause) {
    throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", `${what} is not canonical JSON`, { cause, data: { what } });
  }
  if (again !== text) {
    throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", `${what} is not in canonical JSON form`, { data: { what } });
  }
  return parsed as JsonValue;
}
