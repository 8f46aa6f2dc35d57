import { readFileSync } from "node:fs";
import { CALL_SITES, FAIL_CLASSES, schemaDocument } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import {
  authorityFor,
  classifyAction,
  DEFAULT_CREDENTIAL_FENCE,
  DEFAULT_FAIL_POLICY,
  failPolicyCell,
  POLICY_ERROR_CODES,
  parsePolicy,
  requiredAssurance,
  SELF_AUTHORIZATION_KINDS,
} from "../src/index.js";

// The "done when": docs/policy.md documents every field with an example, and each
// package README carries a worked policy example and what it grants. Keep them in step.
const guide = readFileSync(new URL("../../../docs/policy.md", import.meta.url), "utf8");
const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
const jsonBlocks = (text: string): string[] => [...text.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1] as string);

function fieldNames(schema: unknown, out = new Set<string>()): Set<string> {
  if (typeof schema !== "object" || schema === null) return out;
  const s = schema as { properties?: Record<string, unknown>; items?: unknown };
  for (const [name, child] of Object.entries(s.properties ?? {})) {
    out.add(name);
    fieldNames(child, out);
  }
  fieldNames(s.items, out);
  return out;
}

describe("docs/policy.md", () => {
  describe("when listing fields", () => {
    const names = [...fieldNames(schemaDocument("policy"))].filter(
      (n) => !(FAIL_CLASSES as ReadonlyArray<string>).includes(n) && !(CALL_SITES as ReadonlyArray<string>).includes(n),
    );
    it.each(names)("documents %s in a field table", (name) => {
      expect(guide).toMatch(new RegExp(`\\| \`(?:[a-zA-Z<>]+(?:\\[\\])?\\.)*${name}\` \\|`));
    });

    it("names every failure class and call-site", () => {
      for (const c of FAIL_CLASSES) expect(guide).toContain(`\`${c}\``);
      for (const s of CALL_SITES) expect(guide).toContain(`\`${s}\``);
    });
  });

  describe("when showing the complete example", () => {
    it("is a valid policy that grants what the text says", () => {
      const policy = parsePolicy(jsonBlocks(guide)[0]);
      const tsc = policy.document.providers[0] as { id: string; version: string; digest: string };
      for (const site of CALL_SITES) expect(authorityFor(policy, tsc, "types", site)).not.toBeNull();
      expect(authorityFor(policy, { ...tsc, version: "0.1.1" }, "types", "gate")).toBeNull();
      expect(failPolicyCell(policy, "timed_out", "gate", { requiredSource: true })).toBe("deny");
      expect(classifyAction(policy, { tool: "read_file", path: "secrets/db.txt" }).outcome).toBe("ask");
    });
  });

  describe("when listing the built-in fail-policy table", () => {
    it.each(FAIL_CLASSES)("H10.1 has the row of %s as DEFAULT_FAIL_POLICY says", (c) => {
      const row = DEFAULT_FAIL_POLICY[c];
      expect(guide).toContain(`| \`${c}\` | ${row.interactive} | ${row.gate} | ${row.sweep} |`);
    });
  });

  it("lists every self-authorization kind, credential glob and error code", () => {
    for (const kind of SELF_AUTHORIZATION_KINDS) expect(guide).toContain(`| \`${kind}\` |`);
    for (const glob of DEFAULT_CREDENTIAL_FENCE) expect(guide).toContain(`\`${glob}\``);
    for (const code of POLICY_ERROR_CODES) {
      expect(guide).toContain(`| \`${code}\` |`);
      expect(readme).toContain(`| \`${code}\` |`);
    }
  });
});

describe("README worked example", () => {
  const policy = parsePolicy(jsonBlocks(readme)[0]);
  const tsc = { id: "asp.provider-typescript", version: "0.1.0", digest: `sha256:${"1".repeat(64)}` };
  const secrets = { id: "asp.provider-secrets", version: "0.1.0", digest: `sha256:${"2".repeat(64)}` };

  it("grants exactly what the README says", () => {
    expect(authorityFor(policy, tsc, "types", "gate")).not.toBeNull();
    for (const site of ["interactive", "sweep"] as const) expect(authorityFor(policy, tsc, "types", site)).toBeNull();
    expect(authorityFor(policy, { ...tsc, version: "0.1.1" }, "types", "gate")).toBeNull();
    for (const site of CALL_SITES) expect(authorityFor(policy, secrets, "secrets", site)).toBeNull();
    expect(failPolicyCell(policy, "timed_out", "gate", { requiredSource: true })).toBe("deny");
    expect(failPolicyCell(policy, "timed_out", "interactive", { requiredSource: true })).toBe("open");
    expect(requiredAssurance(policy, "gate")).toBe("gated");
    expect(requiredAssurance(policy, "sweep")).toBe("advisory");
    expect(classifyAction(policy, { tool: "read_file", path: "src/index.ts" }).outcome).toBe("allow");
    expect(classifyAction(policy, { tool: "read_file", path: "src/.env" }).outcome).toBe("ask");
    expect(classifyAction(policy, { tool: "shell" }).outcome).toBe("deny");
  });
});
