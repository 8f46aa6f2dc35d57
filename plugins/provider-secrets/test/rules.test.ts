import { describe, expect, it } from "vitest";
import { DEFAULT_RULES, loadRuleSet } from "../src/index.js";
import defaultRuleSet from "../src/rules/default.json" with { type: "json" };

const rule = { id: "r", description: "d", pattern: "x{3}", severity: "error" };

describe("loadRuleSet", () => {
  describe("when given the shipped rule set", () => {
    it("validates and compiles every rule, each with a next step", () => {
      const ids = DEFAULT_RULES.rules.map((r) => r.id);
      expect(new Set(ids).size).toBe(ids.length);
      for (const id of [
        "private-key",
        "aws-access-key-id",
        "aws-secret-access-key",
        "google-api-key",
        "sendgrid-api-key",
        "twilio-api-key",
        "mailgun-api-key",
        "azure-storage-account-key",
        "doppler-token",
        "vault-legacy-token",
        "database-url-password",
        "high-entropy-assignment",
      ])
        expect(ids).toContain(id);
      for (const r of DEFAULT_RULES.rules) {
        expect(r.help, r.id).toMatch(/rotate|revoke|regenerate|roll|deactivate/i);
        expect(r.regex.flags).toContain("g");
      }
    });
    it("gives keys and tokens severity error, the generic entropy rule warning", () => {
      for (const r of DEFAULT_RULES.rules)
        expect(r.severity, r.id).toBe(r.id === "high-entropy-assignment" ? "warning" : "error");
    });
    it("allowlists the documented example values by default", () => {
      expect(DEFAULT_RULES.allowlist.values).toContain("AKIAIOSFODNN7EXAMPLE");
    });
    it("is the JSON file in the package (rules are data)", () => {
      expect(loadRuleSet(defaultRuleSet).rules.map((r) => r.pattern)).toEqual(
        DEFAULT_RULES.rules.map((r) => r.pattern),
      );
    });
  });

  describe("when the document is invalid", () => {
    it.each<[string, unknown]>([
      ["not an object", []],
      ["wrong version", { version: 2, rules: [rule] }],
      ["no rules", { version: 1, rules: [] }],
      ["unknown top-level key", { version: 1, rules: [rule], extra: 1 }],
      ["bad id", { version: 1, rules: [{ ...rule, id: "Bad Id" }] }],
      ["duplicate id", { version: 1, rules: [rule, rule] }],
      ["unknown rule key", { version: 1, rules: [{ ...rule, verdict: "deny" }] }],
      ["no description", { version: 1, rules: [{ ...rule, description: "" }] }],
      ["bad flags", { version: 1, rules: [{ ...rule, flags: "gy" }] }],
      ["pattern that does not compile", { version: 1, rules: [{ ...rule, pattern: "(" }] }],
      ["pattern matching the empty string", { version: 1, rules: [{ ...rule, pattern: "a*" }] }],
      ["unknown severity", { version: 1, rules: [{ ...rule, severity: "fatal" }] }],
      ["upper-case keyword", { version: 1, rules: [{ ...rule, keywords: ["AKIA"] }] }],
      ["entropy out of range", { version: 1, rules: [{ ...rule, entropy: { minLength: 20, hex: 9, base64: 3 } }] }],
      ["entropy unknown key", { version: 1, rules: [{ ...rule, entropy: { minLength: 1, hex: 1, base64: 1, x: 1 } }] }],
      ["href not https", { version: 1, rules: [{ ...rule, href: "http://example.com" }] }],
      ["allowlist fingerprint not hex", { version: 1, rules: [rule], allowlist: { fingerprints: ["abc"] } }],
      ["allowlist unknown key", { version: 1, rules: [rule], allowlist: { secrets: [] } }],
    ])("refuses %s", (_why, doc) => {
      expect(() => loadRuleSet(doc)).toThrowWithCode("ASP_SECRETS_INVALID_RULES");
    });
  });
});
