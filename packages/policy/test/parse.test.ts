import { readFileSync } from "node:fs";
import { isAspError } from "@asp/contracts";
import { digest } from "@asp/evidence";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  isActivePolicy,
  POLICY_ERROR_CODES,
  type PolicyErrorCode,
  type PolicyProblem,
  parsePolicy,
  validatePolicy,
} from "../src/index.js";
import { fromPointer } from "../src/json.js";
import { basePolicy, D } from "./fixtures/policies.js";

const EXAMPLE = new URL("../../../examples/asp.policy.json", import.meta.url);

/** `basePolicy()` with the value at `pointer` set (or deleted when `value` is `undefined`). */
function mutated(pointer: string, value: unknown): unknown {
  const doc = basePolicy() as unknown as Record<string, unknown>;
  const tokens = fromPointer(pointer);
  let node: Record<string, unknown> = doc;
  for (const t of tokens.slice(0, -1)) node = node[t] as Record<string, unknown>;
  const last = tokens.at(-1) as string;
  if (value === undefined) delete node[last];
  else node[last] = value;
  return doc;
}

function problems(input: unknown): ReadonlyArray<PolicyProblem> {
  const r = validatePolicy(input);
  if (r.ok) throw new Error("expected the policy to be rejected");
  return r.problems;
}

describe("parsePolicy", () => {
  describe("when the document is valid", () => {
    it("activates the example policy and the test fixture", () => {
      const example = parsePolicy(readFileSync(EXAMPLE, "utf8"));
      expect(example.document.requirements.map((r) => r.id)).toEqual(["types", "secrets"]);
      expect(isActivePolicy(parsePolicy(basePolicy()))).toBe(true);
    });

    it("H1b.8 reports policyDigest as the evidence digest of the canonical document (host §1)", () => {
      const policy = parsePolicy(JSON.stringify(basePolicy(), null, 2));
      expect(policy.digest).toBe(digest(basePolicy()));
      expect(policy.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    });

    it("gives the same digest whatever the key order or whitespace", () => {
      const text = JSON.stringify(basePolicy());
      const reordered = JSON.stringify(Object.fromEntries(Object.entries(basePolicy()).reverse()), null, 4);
      expect(parsePolicy(reordered).digest).toBe(parsePolicy(text).digest);
    });

    it("freezes the whole active policy: nothing can be changed after activation", () => {
      const policy = parsePolicy(basePolicy());
      expect(Object.isFrozen(policy)).toBe(true);
      expect(Object.isFrozen(policy.document.requirements[0]?.callSites)).toBe(true);
      expect(() => {
        (policy.document.grants as unknown as unknown[]).push({});
      }).toThrow(TypeError);
    });

    it("does not share structure with the caller's object", () => {
      const doc = basePolicy();
      const policy = parsePolicy(doc);
      doc.requirements.pop();
      expect(policy.document.requirements).toHaveLength(2);
    });

    it("records the origin it was given", () => {
      expect(parsePolicy(basePolicy()).origin).toEqual({ kind: "inline" });
      expect(parsePolicy(basePolicy(), { origin: { kind: "file", path: "/etc/asp/policy.json" } }).origin).toEqual({
        kind: "file",
        path: "/etc/asp/policy.json",
      });
    });
  });

  // Bad input: unknown fields, unknown enum values, empty values, duplicate ids, unpinned
  // grants, launch instructions: each with a stable code and the pointer of the offending value.
  describe("when the document is invalid", () => {
    const cases: ReadonlyArray<readonly [string, unknown, PolicyErrorCode, string]> = [
      ["unknown root field", mutated("/extra", true), "ASP_POLICY_UNKNOWN_FIELD", "/extra"],
      [
        "unknown nested field",
        mutated("/requirements/0/blocking", true),
        "ASP_POLICY_UNKNOWN_FIELD",
        "/requirements/0/blocking",
      ],
      [
        "unknown call-site",
        mutated("/requirements/0/callSites/0", "ci"),
        "ASP_POLICY_UNKNOWN_VALUE",
        "/requirements/0/callSites/0",
      ],
      [
        "unknown fail-policy outcome",
        mutated("/failPolicy/timed_out/sweep", "retry"),
        "ASP_POLICY_UNKNOWN_VALUE",
        "/failPolicy/timed_out/sweep",
      ],
      [
        "unknown assurance mode",
        mutated("/assurance/gate", "sandboxed"),
        "ASP_POLICY_UNKNOWN_VALUE",
        "/assurance/gate",
      ],
      [
        "unknown permission outcome",
        mutated("/permissions/default", "maybe"),
        "ASP_POLICY_UNKNOWN_VALUE",
        "/permissions/default",
      ],
      [
        "unknown plugin capability",
        mutated("/plugins/0/capabilities/0", "root"),
        "ASP_POLICY_UNKNOWN_VALUE",
        "/plugins/0/capabilities/0",
      ],
      [
        "unknown fail class row",
        mutated("/failPolicy/flaky", { sweep: "deny" }),
        "ASP_POLICY_UNKNOWN_FIELD",
        "/failPolicy/flaky",
      ],
      [
        "unsupported apiVersion",
        mutated("/apiVersion", "asp.policy/v2"),
        "ASP_POLICY_UNSUPPORTED_VERSION",
        "/apiVersion",
      ],
      ["missing apiVersion", mutated("/apiVersion", undefined), "ASP_POLICY_MISSING_FIELD", "/apiVersion"],
      ["missing grants", mutated("/grants", undefined), "ASP_POLICY_MISSING_FIELD", "/grants"],
      ["empty requirement id", mutated("/requirements/0/id", ""), "ASP_POLICY_EMPTY_VALUE", "/requirements/0/id"],
      ["whitespace-only description", mutated("/description", "   "), "ASP_POLICY_EMPTY_VALUE", "/description"],
      [
        "empty source list",
        mutated("/requirements/0/sources", []),
        "ASP_POLICY_EMPTY_VALUE",
        "/requirements/0/sources",
      ],
      ["empty grant call-sites", mutated("/grants/0/callSites", []), "ASP_POLICY_EMPTY_VALUE", "/grants/0/callSites"],
      [
        "digest that is not sha256",
        mutated("/providers/0/digest", "md5:abc"),
        "ASP_POLICY_INVALID_VALUE",
        "/providers/0/digest",
      ],
      [
        "version that is not semver",
        mutated("/providers/0/version", "latest"),
        "ASP_POLICY_INVALID_VALUE",
        "/providers/0/version",
      ],
      [
        "negative budget",
        mutated("/budgets/callbacksPerRequest", -1),
        "ASP_POLICY_INVALID_VALUE",
        "/budgets/callbacksPerRequest",
      ],
      [
        "gate cell opened (host §2 floor)",
        mutated("/failPolicy/crashed", { gate: "open" }),
        "ASP_POLICY_FAIL_OPEN_FLOOR",
        "/failPolicy/crashed/gate",
      ],
      [
        "duplicate requirement id",
        mutated("/requirements/1/id", "types"),
        "ASP_POLICY_DUPLICATE_ID",
        "/requirements/1/id",
      ],
      [
        "duplicate provider pin",
        mutated("/providers/1", { id: "asp.provider-typescript", version: "0.2.0", digest: D(70) }),
        "ASP_POLICY_DUPLICATE_ID",
        "/providers/1/id",
      ],
      [
        "duplicate plugin grant",
        mutated("/plugins", [
          { id: "p", digest: D(1), capabilities: ["review"] },
          { id: "p", digest: D(2), capabilities: ["guardian"] },
        ]),
        "ASP_POLICY_DUPLICATE_ID",
        "/plugins/1/id",
      ],
      [
        "the same grant twice",
        mutated("/grants/1", { ...basePolicy().grants[0], callSites: ["sweep"] }),
        "ASP_POLICY_DUPLICATE_ID",
        "/grants/1",
      ],
      [
        "grant to an unpinned provider",
        mutated("/grants/0/provider", "asp.provider-other"),
        "ASP_POLICY_UNPINNED_GRANT",
        "/grants/0/provider",
      ],
      [
        "grant to another version",
        mutated("/grants/0/version", "0.1.1"),
        "ASP_POLICY_UNPINNED_GRANT",
        "/grants/0/version",
      ],
      ["grant to another digest", mutated("/grants/0/digest", D(99)), "ASP_POLICY_UNPINNED_GRANT", "/grants/0/digest"],
      [
        "grant to an unknown requirement",
        mutated("/grants/0/requirement", "lint"),
        "ASP_POLICY_UNKNOWN_REQUIREMENT",
        "/grants/0/requirement",
      ],
      [
        "grant at a call-site the requirement is not required at",
        mutated("/grants/1/callSites", ["interactive"]),
        "ASP_POLICY_UNKNOWN_REQUIREMENT",
        "/grants/1/callSites/0",
      ],
      [
        "invalid glob",
        mutated("/permissions/rules/0/path", "src/[a-"),
        "ASP_POLICY_INVALID_VALUE",
        "/permissions/rules/0/path",
      ],
      ["not an object", [], "ASP_POLICY_INVALID_VALUE", ""],
      ["non-JSON value", { apiVersion: "asp.policy/v1", when: new Date(0) }, "ASP_POLICY_INVALID_VALUE", "/when"],
    ];

    it.each(cases)("rejects %s", (_why, input, code, pointer) => {
      expect(() => parsePolicy(input)).toThrowWithCode(code);
      try {
        parsePolicy(input);
      } catch (error) {
        expect(isAspError(error) && error.data?.pointer).toBe(pointer);
      }
    });

    it("rejects text that is not JSON", () => {
      expect(() => parsePolicy("{ apiVersion: v1 }")).toThrowWithCode("ASP_POLICY_NOT_JSON");
    });

    it("rejects a key given twice in one object, naming the second one", () => {
      const text = JSON.stringify(basePolicy()).replace(
        '"timed_out":{"interactive":"open","gate":"deny"}',
        '"timed_out":{"interactive":"deny","gate":"deny","interactive":"open"}',
      );
      expect(problems(text)).toEqual([
        expect.objectContaining({ code: "ASP_POLICY_DUPLICATE_KEY", pointer: "/failPolicy/timed_out/interactive" }),
      ]);
    });

    it("lists every problem, each with its own code and pointer", () => {
      const doc = basePolicy() as unknown as Record<string, unknown>;
      doc.extra = 1;
      (doc.requirements as Array<Record<string, unknown>>)[0] = {
        id: "",
        capability: "judge",
        sources: ["ts"],
        callSites: ["gate"],
      };
      const found = problems(doc).map((p) => [p.code, p.pointer]);
      expect(found).toEqual(
        expect.arrayContaining([
          ["ASP_POLICY_EMPTY_VALUE", "/requirements/0/id"],
          ["ASP_POLICY_UNKNOWN_FIELD", "/extra"],
          ["ASP_POLICY_UNKNOWN_VALUE", "/requirements/0/capability"],
        ]),
      );
    });

    it("throws a PolicyError whose data lists every problem", () => {
      try {
        parsePolicy(mutated("/extra", 1), { what: "policy ./x.json" });
        expect.unreachable();
      } catch (error) {
        expect(isAspError(error)).toBe(true);
        if (!isAspError(error)) return;
        expect(error.message).toContain("policy ./x.json");
        expect(error.category).toBe("input");
        expect(error.toJSON().data).toMatchObject({
          pointer: "/extra",
          errors: [{ code: "ASP_POLICY_UNKNOWN_FIELD" }],
        });
      }
    });
  });

  // host §2: repository policy never supplies executable paths, shell strings, scripts, working
  // directories or environment mutation.
  describe("when the document carries a launch instruction", () => {
    const cases: ReadonlyArray<readonly [string, string, unknown]> = [
      ["an executable on a provider pin", "/providers/0/executable", "/usr/bin/node"],
      ["argv on a provider pin", "/providers/0/args", ["--inspect", "main.js"]],
      ["a command on the host section", "/host/command", ["node", "host.js"]],
      ["env on the host section", "/host/env", { NODE_OPTIONS: "--require evil.js" }],
      ["a cwd on a requirement", "/requirements/0/cwd", "/tmp"],
      ["a shell script at the root", "/script", "curl x | sh"],
      ["an executable path as host implementation", "/host/implementation", "/usr/local/bin/asp-host"],
      ["a relative executable as provider id", "/providers/0/id", "./provider.sh"],
      ["a command line as a tool name", "/permissions/rules/2/tool", "bash -c id"],
      ["a shell string as a requirement id", "/requirements/0/id", "types;rm"],
      ["an environment assignment as a plugin id", "/plugins/0/id", "LD_PRELOAD=/tmp/x.so"],
      ["command substitution inside a path glob", "/permissions/rules/0/path", "src/$(id)/**"],
      ["an environment assignment in the fence", "/permissions/credentialFence/0", "HOME=/tmp"],
    ];

    it.each(cases)("H2a.2 rejects %s with ASP_POLICY_LAUNCH_INSTRUCTION at its pointer", (_why, pointer, value) => {
      const found = problems(mutated(pointer, value));
      expect(found[0]).toMatchObject({ code: "ASP_POLICY_LAUNCH_INSTRUCTION", pointer });
      // the launch problem is reported once, not again as an unknown field under it
      expect(found.filter((p) => p.pointer === pointer || p.pointer.startsWith(`${pointer}/`))).toHaveLength(1);
    });

    it("lets descriptions mention commands: prose is not a launch instruction", () => {
      const doc = basePolicy();
      doc.description = "providers run `tsc --noEmit`; see /docs && ask the owner";
      expect(validatePolicy(doc).ok).toBe(true);
    });

    it("accepts absolute globs in permission rules (a deny for /etc/** is not a launch)", () => {
      const doc = basePolicy();
      doc.permissions?.rules.push({ tool: "read_file", path: "/etc/**", outcome: "deny" });
      expect(validatePolicy(doc).ok).toBe(true);
    });
  });

  describe("when given arbitrary input", () => {
    it("either activates a policy or throws a PolicyError with a documented code (fast-check)", () => {
      const seed = basePolicy() as unknown as Record<string, unknown>;
      const arb = fc.oneof(
        fc.jsonValue(),
        fc.string(),
        fc
          .record({ key: fc.constantFrom(...Object.keys(seed), "x", "env"), value: fc.jsonValue() })
          .map(({ key, value }) => ({
            ...seed,
            [key]: value,
          })),
      );
      fc.assert(
        fc.property(arb, (input) => {
          const r = validatePolicy(input);
          if (r.ok) {
            expect(isActivePolicy(r.policy)).toBe(true);
            return;
          }
          expect(r.problems.length).toBeGreaterThan(0);
          for (const p of r.problems) {
            expect(POLICY_ERROR_CODES).toContain(p.code);
            expect(typeof p.pointer).toBe("string");
          }
        }),
        { numRuns: 300 },
      );
    });

    it("never activates a policy with a gate cell open (fast-check)", () => {
      const cell = fc.constantFrom("open", "indeterminate", "deny");
      fc.assert(
        fc.property(fc.constantFrom("crashed", "stale", "missing_authority"), cell, cell, (failClass, gate, sweep) => {
          const doc = { ...basePolicy(), failPolicy: { [failClass]: { gate, sweep } } };
          const r = validatePolicy(doc);
          expect(r.ok).toBe(gate !== "open");
        }),
      );
    });
  });
});
