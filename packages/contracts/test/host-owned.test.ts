import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hostOwnedFieldOf } from "../src/host-owned.js";
import {
  findHostOwnedFields,
  HOST_OWNED_FIELDS,
  type HostOwnedField,
  type SchemaName,
  schemaDocument,
  validateAssessment,
  validateEditPlan,
} from "../src/index.js";
import { VALID } from "./fixtures/valid.js";

/** The words of a camelCase name: `transactionGuarantee` -> ["transaction", "guarantee"]. */
const wordsOf = (name: string): string[] => name.split(/(?=[A-Z])/).map((w) => w.toLowerCase());
const upperFirst = (w: string): string => `${w.charAt(0).toUpperCase()}${w.slice(1)}`;
const fullWidth = (s: string): string =>
  [...s].map((c) => (c >= "!" && c <= "~" ? String.fromCharCode(c.charCodeAt(0) + 0xfee0) : c)).join("");

/**
 * Every spelling an attacker would try for one canonical name: case, separators, whitespace,
 * compatibility forms, invisible characters, modal prefixes and plurals (host §1).
 */
const SPELLINGS: ReadonlyArray<readonly [string, (name: string) => string]> = [
  ["as listed", (n) => n],
  ["PascalCase", (n) => wordsOf(n).map(upperFirst).join("")],
  ["snake_case", (n) => wordsOf(n).join("_")],
  ["SCREAMING_SNAKE", (n) => wordsOf(n).join("_").toUpperCase()],
  ["kebab-case", (n) => wordsOf(n).join("-")],
  ["TRAIN-CASE", (n) => wordsOf(n).join("-").toUpperCase()],
  ["spaced and padded", (n) => ` ${wordsOf(n).join(" ")}\t`],
  ["dotted", (n) => wordsOf(n).join(".")],
  ["ALL CAPS", (n) => n.toUpperCase()],
  ["full-width", (n) => fullWidth(n)],
  ["zero-width space inside", (n) => `${n.slice(0, 1)}\u200b${n.slice(1)}`],
  ["accented", (n) => `${n.slice(0, 1)}\u0301${n.slice(1)}`],
  ["isX", (n) => `is${wordsOf(n).map(upperFirst).join("")}`],
  ["has_x", (n) => `has_${wordsOf(n).join("_")}`],
  ["plural", (n) => `${n}s`],
];

describe("findHostOwnedFields", () => {
  describe("when a provider hides a host-owned field", () => {
    it("H1.2 finds a decision nested at /diagnostics/3/data (host §1)", () => {
      const diagnostics = [0, 1, 2, 3].map((i) => ({ ...VALID.diagnostic, fingerprint: `f${i}` }));
      const response = {
        ...VALID.assessment,
        diagnostics: diagnostics.map((d, i) => (i === 3 ? { ...d, data: { decision: "allow" } } : d)),
      };
      expect(findHostOwnedFields(response)).toEqual([{ pointer: "/diagnostics/3/data/decision", field: "decision" }]);
    });

    it.each([
      ["verdict", { verdict: "pass" }, "/verdict"],
      ["disposition", { x: [{ disposition: "advisory" }] }, "/x/0/disposition"],
      ["authority grant (snake case)", { authority_grant: {} }, "/authority_grant"],
      ["assurance mode (kebab case)", { "assurance-mode": "isolated" }, "/assurance-mode"],
      ["transaction guarantee", { meta: { transactionGuarantee: "staged_snapshot" } }, "/meta/transactionGuarantee"],
      ["pass/fail projection", { passFail: "pass" }, "/passFail"],
      ["a key with a slash (pointer escaping)", { "a/b": { decision: 1 } }, "/a~1b/decision"],
      ["a host brand", { envelope: { $$type: "@asp/DecisionEnvelope" } }, "/envelope/$$type"],
    ])("finds %s", (_what, value, pointer) => {
      expect(findHostOwnedFields(value).map((h) => h.pointer)).toEqual([pointer]);
    });
  });

  describe("when the response is clean", () => {
    it("finds nothing in every valid provider fixture", () => {
      expect(findHostOwnedFields(VALID.assessment)).toEqual([]);
      expect(findHostOwnedFields(VALID["edit-plan"])).toEqual([]);
      expect(findHostOwnedFields(VALID.diagnostic)).toEqual([]);
    });
    it("does not flag host-owned words used as values", () => {
      expect(findHostOwnedFields({ message: "decision", tags: ["verdict"] })).toEqual([]);
    });
  });

  it("never throws and terminates on cycles and arbitrary values", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    cyclic.decision = "deny";
    expect(findHostOwnedFields(cyclic)).toEqual([{ pointer: "/decision", field: "decision" }]);
    fc.assert(
      fc.property(fc.anything(), (v) => Array.isArray(findHostOwnedFields(v))),
      { numRuns: 500 },
    );
  });

  it("finds any host-owned key planted anywhere in a JSON tree (fast-check)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(...HOST_OWNED_FIELDS), (tree, field) => {
        const wrapped = { payload: tree, deep: [{ [field]: true }] };
        expect(findHostOwnedFields(wrapped).some((h) => h.pointer === `/deep/0/${field}` && h.field === field)).toBe(
          true,
        );
      }),
    );
  });
});

describe("H1.2 hostOwnedFieldOf (host §1: matched after folding case, separators and spelling)", () => {
  describe.each(HOST_OWNED_FIELDS.map((f) => [f] as const))("%s", (field: HostOwnedField) => {
    it.each(SPELLINGS)("spelled %s", (_how, spell) => {
      const key = spell(field);
      expect(hostOwnedFieldOf(key), JSON.stringify(key)).toBe(field);
      expect(findHostOwnedFields({ data: { nested: [{ [key]: true }] } })).toEqual([
        { pointer: `/data/nested/0/${key}`, field },
      ]);
    });
  });

  it.each([
    ["finalVerdict", "verdict"],
    ["host_decision", "decision"],
    ["decisionReason", "decision"],
    ["achieved-assurance-mode", "assuranceMode"],
    ["claimedTransactionGuarantee", "transactionGuarantee"],
    ["findingDisposition", "disposition"],
    ["passFailResult", "passFail"],
    ["isAllowed", "allowed"],
    ["shouldBlock", "block"],
    ["canMerge", "merge"],
    ["wasApproved", "approved"],
    ["Verdict", "verdict"],
    ["transaction_guarantee", "transactionGuarantee"],
    ["TRANSACTION-GUARANTEE", "transactionGuarantee"],
    ["\u{1d42f}\u{1d41e}\u{1d42b}\u{1d41d}\u{1d422}\u{1d41c}\u{1d42d} (mathematical bold)", "verdict"],
  ] as const)("%s is %s", (key, field) => {
    expect(hostOwnedFieldOf(key.replace(/ \(.*\)$/, ""))).toBe(field);
  });

  // False positives would degrade honest providers: no member the provider-owned schemas define
  // is ever host-owned, nor are the everyday data keys left out on purpose.
  const PROVIDER_SCHEMAS: readonly SchemaName[] = [
    "diagnostic",
    "assessment",
    "edit-plan",
    "plugin-manifest",
    "protocol-initialize-result",
    "protocol-inspect-result",
  ];
  function memberNames(node: unknown, out: Set<string>): Set<string> {
    if (Array.isArray(node)) for (const n of node) memberNames(n, out);
    else if (typeof node === "object" && node !== null) {
      for (const [k, v] of Object.entries(node)) {
        if ((k === "properties" || k === "patternProperties") && typeof v === "object" && v !== null) {
          for (const name of Object.keys(v)) out.add(name);
        }
        memberNames(v, out);
      }
    }
    return out;
  }
  it.each(PROVIDER_SCHEMAS.map((n) => [n] as const))("flags no member the %s schema defines", (name) => {
    const names = [...memberNames(schemaDocument(name), new Set())];
    expect(names.length).toBeGreaterThan(3);
    expect(names.filter((n) => hostOwnedFieldOf(n) !== null)).toEqual([]);
  });
  it.each([
    "ok",
    "success",
    "result",
    "status",
    "advisory",
    "integrity",
    "mode",
    "allowedValues",
    "passedCount",
    "gateway",
    "issues",
    "canonical",
    "message",
    "rule",
    "secretFingerprint",
    "occurrences",
    "entropy",
  ])("leaves the everyday data key %s alone", (key) => {
    expect(hostOwnedFieldOf(key)).toBeNull();
  });
});

describe("findHostOwnedFields at the edges", () => {
  it("finds a field nested deeper than any fixed limit (1000 levels)", () => {
    let node: Record<string, unknown> = { verdict: "pass" };
    for (let i = 0; i < 1000; i++) node = { a: node };
    const hits = findHostOwnedFields({ data: node });
    expect(hits.map((h) => h.field)).toEqual(["verdict"]);
    expect(hits[0]?.pointer).toBe(`/data${"/a".repeat(1000)}/verdict`);
  });

  it.each([
    ["$$type", "@asp/DecisionEnvelope"],
    ["$type", "@asp/DecisionEnvelope"],
    ["__type", "@asp/AuditReceipt"],
    ["type", " @ASP/DecisionEnvelope"],
  ])("finds a host brand under %s", (key, brand) => {
    expect(findHostOwnedFields({ data: { [key]: brand } })).toEqual([{ pointer: `/data/${key}`, field: "$$type" }]);
  });

  it("does not flag a type that is not a host brand", () => {
    expect(findHostOwnedFields({ data: { type: "aws-access-key", $$type: "acme/Thing" } })).toEqual([]);
  });
});

describe("validateAssessment / validateEditPlan", () => {
  it("accept clean provider output", () => {
    expect(validateAssessment(VALID.assessment).ok).toBe(true);
    expect(validateEditPlan(VALID["edit-plan"]).ok).toBe(true);
  });
  it("H1.2 treat a host-owned field as malformed even where the schema allows free-form data (host §1)", () => {
    const sneaky = {
      ...VALID.assessment,
      diagnostics: [{ ...VALID.diagnostic, data: { nested: { verdict: "allow" } } }],
    };
    const result = validateAssessment(sneaky);
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(result.errors[0]).toEqual({
        pointer: "/diagnostics/0/data/nested/verdict",
        message: "host-owned field verdict is not allowed in a provider response",
      });
  });
  it("H6.5 reject a provider-claimed transaction guarantee on an edit plan (host §6)", () => {
    const result = validateEditPlan({ ...VALID["edit-plan"], transactionGuarantee: "staged_snapshot" });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors.map((e) => e.pointer)).toEqual(["/transactionGuarantee"]);
  });
});
