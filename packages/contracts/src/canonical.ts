import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import { ContractsError } from "./errors.js";

// Runtime-free on purpose (STYLE 2): no Node builtin, no Node global. `@asp/policy` and
// `@asp/arbitration` take canonical JSON and digests from here so they run in a browser too;
// `@asp/evidence` re-exports these with its own error code and a `node:crypto` fast path.

/** A JSON value as RFC 8785 understands it: what {@link canonicalize} accepts. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * A content digest: `sha256:` followed by 64 lowercase hex digits. Every blob, tree, changeset,
 * record, snapshot and policy id has this form.
 */
export type Digest = `sha256:${string}`;

/**
 * The sha256 port. Every implementation gives identical bytes; this package ships the portable
 * one ({@link createNobleHasher}), `@asp/evidence` adds the `node:crypto` fast path.
 */
export interface Hasher {
  /** A short name for diagnostics, e.g. `node:crypto` or `@noble/hashes`. */
  readonly name: string;
  /** sha256 of `data` (32 bytes). */
  hash(data: Uint8Array): Uint8Array;
}

/**
 * A dependency-injection token: a `Symbol.for` key that carries the type it resolves to.
 * Declared here so that packages which only name tokens need no runtime dependency.
 */
export type InjectionToken<T> = symbol & { readonly __type?: T };

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The portable sha256 implementation (`@noble/hashes`), usable wherever JavaScript runs. */
export function createNobleHasher(): Hasher {
  return { name: "@noble/hashes", hash: (data) => sha256(data) };
}

// Stateless, so sharing one instance holds no state (not a singleton in the DI sense).
const NOBLE: Hasher = createNobleHasher();

/** `sha256:<hex>` of raw bytes; `hasher` defaults to the portable {@link createNobleHasher}. */
export function digestBytes(data: Uint8Array, hasher: Hasher = NOBLE): Digest {
  return `sha256:${bytesToHex(hasher.hash(data))}`;
}

/** True when `value` is a well-formed {@link Digest} (`sha256:` and 64 lowercase hex digits). */
export function isDigest(value: unknown): value is Digest {
  return typeof value === "string" && DIGEST_RE.test(value);
}

function pointer(path: ReadonlyArray<string | number>): string {
  return path.map((p) => `/${String(p).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

function reject(path: ReadonlyArray<string | number>, why: string): never {
  const at = pointer(path);
  throw new ContractsError(
    "ASP_CONTRACTS_NON_CANONICAL_VALUE",
    `value at "${at || "/"}" has no canonical JSON form: ${why}`,
    { data: { pointer: at, reason: why } },
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
 * @throws ContractsError `ASP_CONTRACTS_NON_CANONICAL_VALUE` for NaN, ±Infinity, lone surrogates,
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

/**
 * UTF-8 bytes of {@link canonicalize}.
 *
 * @throws ContractsError `ASP_CONTRACTS_NON_CANONICAL_VALUE` (see {@link canonicalize}).
 */
export function canonicalBytes(value: unknown): Uint8Array {
  return utf8ToBytes(canonicalize(value));
}

/**
 * `sha256:<hex>` over the canonical bytes of `value`. Equal JSON values have equal digests
 * whatever their key order; any change of a value changes it.
 *
 * @throws ContractsError `ASP_CONTRACTS_NON_CANONICAL_VALUE` (see {@link canonicalize}).
 * @example
 * ```ts
 * digest({ a: 1, b: 2 }) === digest({ b: 2, a: 1 }); // true
 * ```
 */
export function digest(value: unknown, hasher: Hasher = NOBLE): Digest {
  return digestBytes(canonicalBytes(value), hasher);
}
