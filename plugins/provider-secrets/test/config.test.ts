import { describe, expect, it } from "vitest";
import { parseSecretsConfig } from "../src/index.js";

describe("parseSecretsConfig", () => {
  describe("when the file is valid", () => {
    it("reads paths, fingerprints and documentedExamples (defaults when absent)", () => {
      expect(parseSecretsConfig("{}")).toEqual({
        allowlist: { paths: [], fingerprints: [] },
        documentedExamples: true,
      });
      const fp = "a".repeat(64);
      expect(
        parseSecretsConfig(
          JSON.stringify({ allowlist: { paths: ["test/**"], fingerprints: [fp] }, documentedExamples: false }),
        ),
      ).toEqual({ allowlist: { paths: ["test/**"], fingerprints: [fp] }, documentedExamples: false });
    });
  });
  describe("when the file is invalid", () => {
    it.each([
      ["not JSON", "{"],
      ["not an object", "[]"],
      ["unknown key", '{"rules": []}'],
      ["values in a repository config (secrets in clear)", '{"allowlist": {"values": ["x"]}}'],
      ["fingerprint not 64 hex", '{"allowlist": {"fingerprints": ["ABC"]}}'],
      ["paths not an array", '{"allowlist": {"paths": "test/**"}}'],
      ["glob that does not compile", '{"allowlist": {"paths": ["[a-"]}}'],
      ["documentedExamples not a boolean", '{"documentedExamples": "no"}'],
    ])("refuses %s", (_why, text) => {
      expect(() => parseSecretsConfig(text)).toThrowWithCode("ASP_SECRETS_INVALID_CONFIG");
    });
  });
});
