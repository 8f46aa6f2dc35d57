import { createHash } from "node:crypto";
import { sha256 } from "@noble/hashes/sha2.js";
import { EvidenceError } from "./errors.js";

/**
 * A content digest: `sha256:` followed by 64 lowercase hex digits (the `Digest` pattern of
 * `@asp/contracts`). Every blob, tree, changeset, record and snapshot id has this form.
 */
export type Digest = `sha256:${string}`;

/**
 * The sha256 port (DESIGN §8). Both implementations give identical bytes; the `node:crypto` one
 * is the fast path on Node and the default of every function that takes an optional hasher.
 */
export interface Hasher {
  /** A short name for diagnostics, e.g. `node:crypto` or `@noble/hashes`. */
  readonly name: string;
  /** sha256 of `data` (32 bytes). */
  hash(data: Uint8Array): Uint8Array;
}

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

/** The portable sha256 implementation (`@noble/hashes`), usable where `node:crypto` is not. */
export function createNobleHasher(): Hasher {
  return { name: "@noble/hashes", hash: (data) => sha256(data) };
}

/** The fast sha256 implementation on Node (`node:crypto`, OpenSSL). */
export function createNodeHasher(): Hasher {
  return {
    name: "node:crypto",
    hash: (data) => {
      const out = createHash("sha256").update(data).digest();
      return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
    },
  };
}

// Stateless, so sharing one instance is not a singleton in the DI sense: it holds no state.
const DEFAULT_HASHER: Hasher = createNodeHasher();

/** The hasher used when none is passed: the `node:crypto` fast path. */
export function defaultHasher(): Hasher {
  return DEFAULT_HASHER;
}

/** `sha256:<hex>` of raw bytes. */
export function digestBytes(data: Uint8Array, hasher: Hasher = DEFAULT_HASHER): Digest {
  const h = hasher.hash(data);
  return `sha256:${Buffer.from(h.buffer, h.byteOffset, h.byteLength).toString("hex")}`;
}

/** True when `value` is a well-formed {@link Digest}. */
export function isDigest(value: unknown): value is Digest {
  return typeof value === "string" && DIGEST_RE.test(value);
}

/**
 * Returns `value` typed as a {@link Digest}.
 *
 * @throws EvidenceError `ASP_EVIDENCE_BAD_DIGEST` when it is not `sha256:<64 lowercase hex>`.
 */
export function assertDigest(value: unknown, what = "digest"): Digest {
  if (!isDigest(value)) {
    throw new EvidenceError(
      "ASP_EVIDENCE_BAD_DIGEST",
      `${what} must be "sha256:" followed by 64 lowercase hex digits`,
      {
        data: { what, value: typeof value === "string" ? value.slice(0, 80) : typeof value },
      },
    );
  }
  return value;
}
