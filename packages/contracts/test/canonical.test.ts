import { describe, expect, it } from "vitest";
import { canonicalBytes, canonicalize, createNobleHasher, digest, digestBytes, isDigest } from "../src/index.js";

// The full RFC 8785 vectors and property tests run in @asp/evidence (test/canonical.test.ts),
// which re-exports this module; these pin the runtime-free surface itself.
describe("canonical JSON and digests (runtime-free)", () => {
  it("writes RFC 8785 canonical text", () => {
    expect(canonicalize({ b: 1, a: [true, "x", null, -0, 1e21] })).toBe('{"a":[true,"x",null,0,1e+21],"b":1}');
  });

  it("encodes canonical text as UTF-8", () => {
    expect([...canonicalBytes({ "€": 1 })]).toEqual([123, 34, 0xe2, 0x82, 0xac, 34, 58, 49, 125]);
  });

  it("digests with the portable sha256 (the NIST 'abc' vector)", () => {
    expect(digestBytes(new Uint8Array([0x61, 0x62, 0x63]), createNobleHasher())).toBe(
      "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
    expect(digest({ b: 2, a: 1 })).toBe(digest({ a: 1, b: 2 }));
    expect(isDigest(digest(null))).toBe(true);
    expect(isDigest("sha256:ABC")).toBe(false);
  });

  describe("when a value has no canonical form", () => {
    it.each([
      ["NaN", { a: Number.NaN }, "/a"],
      ["a lone surrogate", ["\uD800"], "/0"],
      ["a Date", { d: new Date(0) }, "/d"],
      ["undefined", { u: undefined }, "/u"],
    ])("refuses %s with ASP_CONTRACTS_NON_CANONICAL_VALUE and names it", (_why, value, pointer) => {
      expect(() => canonicalize(value)).toThrowWithCode("ASP_CONTRACTS_NON_CANONICAL_VALUE");
      try {
        canonicalize(value);
      } catch (e) {
        expect((e as { data: { pointer: string } }).data.pointer).toBe(pointer);
      }
    });
  });
});
