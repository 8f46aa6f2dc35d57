import { describe, expect, it } from "vitest";
import { DEFAULT_RULES, loadRuleSet, scanText } from "../src/index.js";
import defaultRuleSet from "../src/rules/default.json" with { type: "json" };
import { ALNUM, fake } from "./fakes.js";

const rule = { id: "r", description: "d", pattern: "x{3}", severity: "error" };
const service = { id: "acme-key", description: "d", names: ["acme"], value: "[a-z0-9]{32}" };

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
    it("compiles each service value into a rule keyed by the service's names", () => {
      const services = (defaultRuleSet as { services: Array<{ id: string; names: string[] }> }).services;
      expect(services.length).toBeGreaterThan(80);
      for (const s of services) {
        const r = DEFAULT_RULES.rules.find((x) => x.id === s.id);
        expect(r?.keywords, s.id).toEqual(s.names);
        expect(r?.regex.flags, s.id).toContain("i");
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
      ["services not an array", { version: 1, rules: [rule], services: {} }],
      ["service without names", { version: 1, rules: [rule], services: [{ ...service, names: [] }] }],
      ["service name upper-case", { version: 1, rules: [rule], services: [{ ...service, names: ["Acme"] }] }],
      ["service without value", { version: 1, rules: [rule], services: [{ ...service, value: "" }] }],
      ["service value that does not compile", { version: 1, rules: [rule], services: [{ ...service, value: "(" }] }],
      ["service unknown key", { version: 1, rules: [rule], services: [{ ...service, pattern: "x" }] }],
      ["service id taken by a rule", { version: 1, rules: [rule], services: [{ ...service, id: "r" }] }],
    ])("refuses %s", (_why, doc) => {
      expect(() => loadRuleSet(doc)).toThrowWithCode("ASP_SECRETS_INVALID_RULES");
    });
  });
});

describe("a service value (a key with no prefix of its own)", () => {
  const key = fake(ALNUM, 40, 5);
  const found = async (text: string, path = "config/app.env") =>
    (await scanText(text, path)).map((d) => d.code).filter((c) => c === "secrets/zendesk-api-token");

  it.each([
    ["env", `ZENDESK_API_TOKEN=${key}`],
    ["yaml", `zendesk_token: '${key}'`],
    ["json", `{ "zendeskSecret": "${key}" }`],
    ["go, typed", `var zendeskKey string = "${key}"`],
    ["typescript, typed", `const zendeskToken: string = "${key}";`],
    ["make", `ZENDESK_TOKEN ?= ${key}`],
    ["php", `$config['zendesk_token'] = "${key}";`],
    ["xml", `<zendeskToken>${key}</zendeskToken>`],
    ["java setProperty", `System.setProperty("ZENDESK_TOKEN", "${key}");`],
  ])("is found under the service's name in %s", async (_form, text) => {
    expect(await found(text)).toEqual(["secrets/zendesk-api-token"]);
  });

  it.each([
    ["without the service's name", `API_TOKEN=${key}`],
    ["under an identifier's name", `ZENDESK_CLIENT_ID=${key}`],
    ["under a URL's name", `zendeskUrl: "${key}"`],
    ["one character longer than the service issues", `ZENDESK_TOKEN=${key}a`],
    ["masked", `ZENDESK_TOKEN=${"x0".repeat(20)}`],
    ["a word, not a key", `ZENDESK_TOKEN=${"abcdefghij".repeat(4)}`],
  ])("is not reported %s", async (_why, text) => {
    expect(await found(text)).toEqual([]);
  });
});
