import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  assertDigest,
  createNobleHasher,
  createNodeHasher,
  defaultHasher,
  digest,
  digestBytes,
  isDigest,
} from "../src/index.js";

describe("Hasher", () => {
  const noble = createNobleHasher();
  const node = createNodeHasher();

  describe("when hashing the same bytes with both implementations", () => {
    // DESIGN §8: the portable and the fast hasher must give identical digests.
    it("gives identical digests for any bytes", () => {
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 4096 }), (bytes) => {
          expect(digestBytes(bytes, node)).toBe(digestBytes(bytes, noble));
        }),
        { numRuns: 300 },
      );
    });

    it("gives identical digests for any canonical JSON value", () => {
      fc.assert(
        fc.property(fc.jsonValue(), (v) => {
          expect(digest(v, node)).toBe(digest(v, noble));
        }),
        { numRuns: 200 },
      );
    });

    it("matches the FIPS 180-4 vectors", () => {
      for (const h of [noble, node]) {
        expect(digestBytes(new Uint8Array(), h)).toBe(
          "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        );
        expect(digestBytes(new TextEncoder().encode("abc"), h)).toBe(
          "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        );
      }
    });
  });

  describe("when no hasher is passed", () => {
    it("uses the node:crypto fast path", () => {
      expect(defaultHasher().name).toBe("node:crypto");
    });
  });
});

describe("isDigest / assertDigest", () => {
  describe("when given strings", () => {
    it.each([
      [`sha256:${"a".repeat(64)}`, true],
      [`sha256:${"A".repeat(64)}`, false],
      [`sha256:${"a".repeat(63)}`, false],
      [`sha1:${"a".repeat(40)}`, false],
      ["a".repeat(64), false],
    ])("%s -> %s", (value, ok) => {
      expect(isDigest(value)).toBe(ok);
      if (ok) expect(assertDigest(value)).toBe(value);
      else expect(() => assertDigest(value)).toThrowWithCode("ASP_EVIDENCE_BAD_DIGEST");
    });
  });
});
