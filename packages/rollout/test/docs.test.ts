import { readFileSync } from "node:fs";
import { BUDGET_LIMITS, STAGE_FLAGS } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { BUDGET_TABLE, STAGE_ENV_VARS } from "../src/index.js";

// The contract asks for a configuration guide listing the behaviour behind every flag; keep it in step.
const guide = readFileSync(new URL("../../../docs/configuration.md", import.meta.url), "utf8");
const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
const errors = readFileSync(new URL("../src/errors.ts", import.meta.url), "utf8");
const codes = [...errors.matchAll(/"(ASP_ROLLOUT_[A-Z_]+)"/g)].map((m) => m[1] as string);

describe("AM.rollout.4 docs/configuration.md", () => {
  describe("when listing stage flags", () => {
    it.each(STAGE_FLAGS.map((f) => [f, STAGE_ENV_VARS[f]]))("has a row for %s with %s", (flag, env) => {
      expect(guide).toMatch(new RegExp(`\\| \`${flag}\` \\| \`${env}\` \\| off \\|`));
    });
  });

  describe("when listing budgets", () => {
    it.each(BUDGET_LIMITS.map((l) => [l, BUDGET_TABLE[l].env, BUDGET_TABLE[l].ceiling]))(
      "has a row for %s with %s and ceiling %d",
      (limit, env, ceiling) => {
        expect(guide).toMatch(new RegExp(`\\| \`${limit}\` \\| \`${env}\` \\| ${ceiling}[ |]`));
      },
    );
  });

  describe("when listing error codes", () => {
    it("documents every code in the guide and the package README", () => {
      expect(codes.length).toBeGreaterThanOrEqual(14);
      for (const code of new Set(codes)) {
        expect(guide).toContain(`\`${code}\``);
        expect(readme).toContain(`\`${code}\``);
      }
    });
  });
});
