import { createHash } from "node:crypto";
import { digestBytes as coreDigestBytes, type Digest, type Hasher, isDigest } from "@asp/contracts";
import { EvidenceError } from "./errors.js";

// `Digest`, `Hasher`, the portable hasher and `isDigest` are declared once, in `@asp/contracts`
// (runtime-free); this module adds the Node fast path and makes it the default here.

export type { Digest, Hasher } from "@asp/contracts";
export { createNobleHasher, isDigest } from "@asp/contracts";

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

/** `sha256:<hex>` of raw bytes (the `node:crypto` hasher unless one is passed). */
export function digestBytes(data: Uint8Array, hasher: Hasher = DEFAULT_HASHER): Digest {
  return coreDigestBytes(data, hasher);
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
