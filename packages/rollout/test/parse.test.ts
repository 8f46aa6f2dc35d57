import { APPROVALS_REVIEWERS, AUTO_MODE_PRESETS, RESULT_REVIEW_MODES } from "@asp/contracts";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FALSE_SPELLINGS, parseBoolean, parseEnum, parsePositiveNumber, TRUE_SPELLINGS } from "../src/index.js";

const at = { key: "OPENAI4S_STAGE1_TRUSTED_DELIVERY", source: "env" };
const SPELLINGS = new Set<string>([...TRUE_SPELLINGS, ...FALSE_SPELLINGS]);

describe("AM.modes.3 parseBoolean", () => {
  describe("when the value is one of the fixed spellings", () => {
    it.each([
      ...TRUE_SPELLINGS.map((s) => [s, true] as const),
      ...FALSE_SPELLINGS.map((s) => [s, false] as const),
      [true, true] as const,
      [false, false] as const,
    ])("parses %j as %s", (raw, expected) => {
      expect(parseBoolean(raw, at)).toBe(expected);
    });
  });

  describe("when the value is explicitly empty", () => {
    // contract "Product modes": an explicitly empty value also rejects rather than meaning off.
    it.each([[""], [" "], ["\t\n"], [null]])("rejects %j with ASP_ROLLOUT_EMPTY_VALUE", (raw) => {
      expect(() => parseBoolean(raw, at)).toThrowWithCode("ASP_ROLLOUT_EMPTY_VALUE");
    });
  });

  describe("when the spelling is unknown or misspelled", () => {
    // contract "Product modes": unknown boolean spellings reject configuration.
    it.each([["TRUE"], ["True"], ["ON"], ["y"], ["enabled"], ["2"], ["-1"], [" 1"], ["1 "], ["tru"], ["off!"]])(
      "rejects %j with ASP_ROLLOUT_BAD_BOOLEAN",
      (raw) => {
        expect(() => parseBoolean(raw, at)).toThrowWithCode("ASP_ROLLOUT_BAD_BOOLEAN");
      },
    );

    it.each([[1], [0], [{}], [[]]])("rejects the non-string %j with ASP_ROLLOUT_BAD_BOOLEAN", (raw) => {
      expect(() => parseBoolean(raw, at)).toThrowWithCode("ASP_ROLLOUT_BAD_BOOLEAN");
    });

    it("rejects every non-blank string outside the spelling set (property)", () => {
      fc.assert(
        fc.property(
          fc.string().filter((s) => s.trim() !== "" && !SPELLINGS.has(s)),
          (raw) => {
            expect(() => parseBoolean(raw, at)).toThrowWithCode("ASP_ROLLOUT_BAD_BOOLEAN");
          },
        ),
      );
    });

    it("names the offending key and source but never echoes the value", () => {
      const secret = "sk-live-SECRET-1234567890";
      try {
        parseBoolean(secret, at);
        expect.unreachable();
      } catch (error) {
        const json = JSON.stringify((error as { toJSON(): unknown }).toJSON());
        expect(json).not.toContain(secret);
        expect((error as { data: unknown }).data).toMatchObject({ key: at.key, source: "env" });
      }
    });
  });
});

describe("AM.modes.1 AM.modes.3 parseEnum", () => {
  const vocabularies = [
    ["result_review_mode", RESULT_REVIEW_MODES],
    ["approvals_reviewer", APPROVALS_REVIEWERS],
    ["preset", AUTO_MODE_PRESETS],
  ] as const;

  describe.each(vocabularies)("when parsing %s", (key, vocabulary) => {
    it.each(vocabulary.map((v) => [v]))("accepts %s", (value) => {
      expect(parseEnum(value, vocabulary, { key })).toBe(value);
    });

    it("rejects any string outside the vocabulary (property)", () => {
      fc.assert(
        fc.property(
          fc.string().filter((s) => s.trim() !== "" && !(vocabulary as ReadonlyArray<string>).includes(s)),
          (raw) => {
            expect(() => parseEnum(raw, vocabulary, { key })).toThrowWithCode("ASP_ROLLOUT_UNKNOWN_VALUE");
          },
        ),
      );
    });

    it.each([[""], ["  "], [null]])("rejects the explicitly empty %j", (raw) => {
      expect(() => parseEnum(raw, vocabulary, { key })).toThrowWithCode("ASP_ROLLOUT_EMPTY_VALUE");
    });

    it.each([[vocabulary[0].toUpperCase()], [true], [1]])("rejects %j as unknown", (raw) => {
      expect(() => parseEnum(raw, vocabulary, { key })).toThrowWithCode("ASP_ROLLOUT_UNKNOWN_VALUE");
    });
  });
});

describe("parsePositiveNumber", () => {
  describe("when the limit is a whole number", () => {
    it.each([
      ["2", 2],
      ["900", 900],
      [3, 3],
    ])("parses %j as %d", (raw, expected) => {
      expect(parsePositiveNumber(raw, true, { key: "k" })).toBe(expected);
    });

    it.each([
      ["0"],
      ["-1"],
      ["2.5"],
      [2.5],
      [0],
      ["+2"],
      ["2e1"],
      ["0x2"],
      [" 2"],
      ["02"],
      [Number.NaN],
      [Infinity],
      ["abc"],
    ])("rejects %j with ASP_ROLLOUT_BAD_NUMBER", (raw) => {
      expect(() => parsePositiveNumber(raw, true, { key: "k" })).toThrowWithCode("ASP_ROLLOUT_BAD_NUMBER");
    });
  });

  describe("when the limit is a multiplier", () => {
    it.each([
      ["1.5", 1.5],
      ["0.5", 0.5],
      ["1", 1],
      [1.25, 1.25],
    ])("parses %j as %d", (raw, expected) => {
      expect(parsePositiveNumber(raw, false, { key: "k" })).toBe(expected);
    });

    it.each([["0"], ["0.0"], ["-0.5"], [".5"], ["1."], ["1,5"]])("rejects %j", (raw) => {
      expect(() => parsePositiveNumber(raw, false, { key: "k" })).toThrowWithCode("ASP_ROLLOUT_BAD_NUMBER");
    });
  });

  describe("when the value is explicitly empty", () => {
    it.each([[""], [null]])("rejects %j with ASP_ROLLOUT_EMPTY_VALUE", (raw) => {
      expect(() => parsePositiveNumber(raw, true, { key: "k" })).toThrowWithCode("ASP_ROLLOUT_EMPTY_VALUE");
    });
  });

  it("round-trips every positive safe integer written in decimal (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (n) => {
        expect(parsePositiveNumber(String(n), true, { key: "k" })).toBe(n);
      }),
    );
  });
});
