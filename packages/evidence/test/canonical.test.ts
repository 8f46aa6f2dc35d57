import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalBytes, canonicalize, digest, parseCanonical } from "../src/index.js";

// A JSON value generator without -0 (JSON has no -0: canonical form writes it as 0).
const json = fc.jsonValue({ noUnicodeString: false }).map((v) => JSON.parse(JSON.stringify(v)) as unknown);

function shuffleKeys(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v, i) => shuffleKeys(v, seed + i));
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value);
    // Deterministic permutation from the seed.
    const order = keys.map((k, i) => [k, (i * 7919 + seed * 104729) % 1000003] as const).sort((a, b) => a[1] - b[1]);
    // fromEntries defines own properties, so a "__proto__" key stays a key (assignment would set the prototype).
    return Object.fromEntries(order.map(([k]) => [k, shuffleKeys((value as Record<string, unknown>)[k], seed + 1)]));
  }
  return value;
}

describe("canonicalize", () => {
  describe("when given RFC 8785 test vectors", () => {
    it("sorts properties by UTF-16 code units (RFC 8785 §3.2.3 example)", () => {
      const input = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\ud83d\ude00": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
      };
      // Read the keys from the text: Object.keys would list the integer-like "1" first.
      const keys = [...canonicalize(input).matchAll(/"((?:[^"\\]|\\.)*)":/g)].map((m) => JSON.parse(`"${m[1]}"`));
      expect(keys).toEqual(["\r", "1", "\u0080", "\u00f6", "\u20ac", "\ud83d\ude00", "\ufb33"]);
    });

    it.each([
      [0, "0"],
      [-0, "0"],
      [1e21, "1e+21"],
      [1e-7, "1e-7"],
      [333333333.3333333, "333333333.3333333"],
      [1e30, "1e+30"],
      [4.5, "4.5"],
      [0.002, "0.002"],
      [1e-27, "1e-27"],
      [-1.7976931348623157e308, "-1.7976931348623157e+308"],
      [5e-324, "5e-324"],
      [9007199254740992, "9007199254740992"],
      [295147905179352830000, "295147905179352830000"],
    ])("formats the number %d as %s (RFC 8785 §3.2.2.3)", (n, text) => {
      expect(canonicalize(n)).toBe(text);
    });

    it("matches the RFC 8785 §3.2.2 sample serialization", () => {
      const input = {
        // biome-ignore lint/correctness/noPrecisionLoss: the RFC's own literal; losing precision is the point.
        numbers: [333333333.33333329, 1e30, 4.5, 2e-3, 0.000000000000000000000000001],
        string: "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        literals: [null, true, false],
      };
      expect(canonicalize(input)).toBe(
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
      );
    });

    it("writes no insignificant whitespace and escapes control characters in lowercase hex", () => {
      expect(canonicalize({ a: [1, { b: "\u0001\t" }] })).toBe('{"a":[1,{"b":"\\u0001\\t"}]}');
    });
  });

  describe("when given a value with no canonical form", () => {
    class Thing {
      x = 1;
    }
    it.each([
      ["NaN", Number.NaN],
      ["Infinity", Number.POSITIVE_INFINITY],
      ["-Infinity", { a: [Number.NEGATIVE_INFINITY] }],
      ["a lone high surrogate", "a\ud800b"],
      ["a lone low surrogate in a key", { "\udc00": 1 }],
      ["undefined", { a: undefined }],
      ["a bigint", 1n],
      ["a function", () => 1],
      ["a symbol", Symbol("s")],
      ["a Date", new Date(0)],
      ["a Map", new Map()],
      ["a class instance", new Thing()],
      ["a Uint8Array", new Uint8Array(2)],
      ["a sparse array", Object.assign([1], { 2: 3 })],
    ])("rejects %s with a typed error", (_what, value) => {
      expect(() => canonicalize(value)).toThrowWithCode("ASP_EVIDENCE_NON_CANONICAL_VALUE");
    });

    it("rejects a cycle", () => {
      const a: Record<string, unknown> = {};
      a.self = a;
      expect(() => canonicalize(a)).toThrowWithCode("ASP_EVIDENCE_NON_CANONICAL_VALUE");
    });

    it("accepts the same object twice when it is shared, not cyclic", () => {
      const shared = { x: 1 };
      expect(canonicalize([shared, shared])).toBe('[{"x":1},{"x":1}]');
    });

    it("keeps an own __proto__ key as an ordinary member (found by fast-check)", () => {
      expect(canonicalize(JSON.parse('{"z":1,"__proto__":{"b":2,"a":1}}'))).toBe('{"__proto__":{"a":1,"b":2},"z":1}');
    });

    it("accepts objects without a prototype", () => {
      const o = Object.create(null) as Record<string, number>;
      o.b = 2;
      o.a = 1;
      expect(canonicalize(o)).toBe('{"a":1,"b":2}');
    });
  });

  describe("when given any JSON value (property)", () => {
    it("is idempotent: canonicalize(parse(canonicalize(v))) === canonicalize(v)", () => {
      fc.assert(
        fc.property(json, (v) => {
          const once = canonicalize(v);
          expect(canonicalize(JSON.parse(once))).toBe(once);
        }),
        { numRuns: 300 },
      );
    });

    it("gives the same digest whatever the key order", () => {
      fc.assert(
        fc.property(json, fc.nat(), (v, seed) => {
          expect(digest(shuffleKeys(v, seed))).toBe(digest(v));
        }),
        { numRuns: 300 },
      );
    });

    it("changes the digest when any value changes", () => {
      const withLeaf = fc.dictionary(fc.string(), json, { minKeys: 1 });
      fc.assert(
        fc.property(withLeaf, fc.nat(), json, (obj, pick, replacement) => {
          const keys = Object.keys(obj);
          const key = keys[pick % keys.length] as string;
          fc.pre(canonicalize(obj[key]) !== canonicalize(replacement));
          expect(digest({ ...obj, [key]: replacement })).not.toBe(digest(obj));
        }),
        { numRuns: 300 },
      );
    });

    it("round-trips through parseCanonical", () => {
      fc.assert(
        fc.property(json, (v) => {
          expect(canonicalize(parseCanonical(canonicalBytes(v)))).toBe(canonicalize(v));
        }),
        { numRuns: 100 },
      );
    });
  });
});

describe("parseCanonical", () => {
  describe("when the bytes are JSON but not canonical", () => {
    it.each(['{"b":1,"a":2}', '{ "a": 1 }', "[1.0]", '{"a":1,"a":2}', "not json"])("rejects %s", (text) => {
      expect(() => parseCanonical(text)).toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
    });
  });
});

describe("digest", () => {
  describe("when given a value", () => {
    it("is sha256:<hex> over the canonical bytes", () => {
      // sha256('{"a":1}')
      expect(digest({ a: 1 })).toBe("sha256:015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862");
      expect(digest({ a: 1 })).toMatch(/^sha256:[0-9a-f]{64}$/);
    });
  });
});
