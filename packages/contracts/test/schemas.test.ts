import { readdirSync, readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SCHEMA_ID_BASE, SCHEMA_NAMES, type SchemaName, schemaDocument, validate } from "../src/index.js";
import { INVALID, type InvalidCase } from "./fixtures/invalid.js";
import { VALID } from "./fixtures/valid.js";

const schemasDir = new URL("../schemas/", import.meta.url);

function mutate(doc: unknown, c: InvalidCase): unknown {
  const copy = structuredClone(doc) as Record<string, unknown>;
  const tokens = c.at
    .split("/")
    .slice(1)
    .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
  let node: Record<string, unknown> = copy;
  for (const token of tokens.slice(0, -1)) node = node[token] as Record<string, unknown>;
  const last = tokens.at(-1) as string;
  if ("value" in c) node[last] = c.value;
  else delete node[last];
  return copy;
}

const names = [...SCHEMA_NAMES];

describe("contracts schemas", () => {
  describe("when given the valid fixture", () => {
    it.each(names)("%s accepts it", (name) => {
      const result = validate(name, VALID[name]);
      expect(result.ok ? [] : result.errors).toEqual([]);
    });
  });

  describe("when given an invalid fixture", () => {
    const cases = names.flatMap((name) => INVALID[name].map((c) => [name, c.why, c] as const));
    it("every schema has at least three specific invalid fixtures", () => {
      for (const name of names) expect(INVALID[name].length, name).toBeGreaterThanOrEqual(3);
    });
    it.each(cases)("%s rejects: %s", (name, _why, c) => {
      const result = validate(name, mutate(VALID[name], c));
      expect(result.ok).toBe(false);
      if (result.ok) return;
      const pointers = result.errors.map((e) => e.pointer);
      expect(
        pointers.some((p) => p === c.expectPointer || p.startsWith(`${c.expectPointer}/`)),
        `errors ${JSON.stringify(result.errors)} should name ${c.expectPointer}`,
      ).toBe(true);
    });
    it.each(names)("%s rejects an unknown root property and a non-object", (name) => {
      const extra = validate(name, { ...(VALID[name] as object), surprise: 1 });
      expect(extra.ok).toBe(false);
      if (!extra.ok)
        expect(extra.errors).toContainEqual({ pointer: "/surprise", message: "is not an allowed property" });
      for (const bad of [null, [], "x", 3]) expect(validate(name, bad).ok).toBe(false);
    });
  });

  describe("published files (drift)", () => {
    it("schemas/ holds exactly one file per schema, equal to the TS definition", () => {
      const files = readdirSync(schemasDir)
        .filter((f) => f.endsWith(".schema.json"))
        .sort();
      expect(files).toEqual(names.map((n) => `${n}.schema.json`).sort());
      for (const name of names) {
        const onDisk = JSON.parse(readFileSync(new URL(`${name}.schema.json`, schemasDir), "utf8"));
        // Regenerate with `pnpm --filter @asp/contracts build && pnpm --filter @asp/contracts schemas:emit`.
        expect(onDisk, `${name}.schema.json is stale`).toEqual(schemaDocument(name));
      }
    });
    it.each(names)("%s has a 2020-12 $schema and its own $id", (name) => {
      const doc = schemaDocument(name);
      expect(doc.$schema).toBe("https://json-schema.org/draft/2020-12/schema");
      expect(doc.$id).toBe(`${SCHEMA_ID_BASE}${name}.schema.json`);
    });
    it("names the two schemas the seed requires", () => {
      expect(names).toEqual(expect.arrayContaining<SchemaName>(["verdict", "assurance"]));
    });
  });

  describe("when given arbitrary input", () => {
    it("no validator ever throws (fast-check)", () => {
      fc.assert(
        fc.property(fc.constantFrom(...names), fc.jsonValue(), (name, value) => {
          const result = validate(name, value);
          expect(typeof result.ok).toBe("boolean");
        }),
        { numRuns: 1500 },
      );
    });
    it("no validator throws on non-JSON values either", () => {
      fc.assert(
        fc.property(fc.constantFrom(...names), fc.anything(), (name, value) => {
          expect(typeof validate(name, value).ok).toBe("boolean");
        }),
        { numRuns: 500 },
      );
      const hostile = {
        get provider() {
          throw new Error("getter");
        },
      };
      expect(validate("assessment", hostile).ok).toBe(false);
    });
    it("mutating any leaf of a valid fixture to a wrong type is never accepted silently as another type", () => {
      // A leaf replaced by an object with an unknown key must be rejected (all schemas are closed).
      for (const name of names) {
        const doc = structuredClone(VALID[name]) as Record<string, unknown>;
        const key = Object.keys(doc)[0] as string;
        doc[key] = { surprise: true };
        expect(validate(name, doc).ok, `${name}.${key}`).toBe(false);
      }
    });
  });

  it("rejects an unknown schema name with a typed error", () => {
    expect(() => validate("nope" as SchemaName, {})).toThrowWithCode("ASP_CONTRACTS_UNKNOWN_SCHEMA");
  });
});
