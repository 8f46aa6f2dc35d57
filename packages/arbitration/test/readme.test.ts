import { readFileSync } from "node:fs";
import { parsePolicy } from "@asp/policy";
import { describe, expect, it } from "vitest";
import { arbitrate, provisionalDecision } from "../src/index.js";
import { assessed } from "./fixtures/world.js";

// The README's worked example, run exactly as described: the text must stay true.
const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
const policyText = /```json\n([\s\S]*?)```/.exec(readme)?.[1] as string;

describe("README worked example", () => {
  it("H4.2 produces the tie, the advisory finding, the drop, the coverage and the decision it describes", () => {
    const policy = parsePolicy(policyText);
    const [tsc, tsgo, lint] = policy.document.providers as Array<{ id: string; version: string; digest: string }>;
    if (!tsc || !tsgo || !lint) throw new Error("the README policy pins three providers");
    const result = arbitrate({
      policy,
      callSite: "gate",
      runs: [
        assessed(tsc, ["ts"], [{ source: "ts", code: "ts/2322", severity: "error", message: "x", fingerprint: "f1" }]),
        assessed(tsgo, ["ts"], []),
        assessed(
          lint,
          ["eslint"],
          [
            { source: "eslint", code: "eslint/no-unused-vars", severity: "error", message: "y", fingerprint: "f2" },
            { source: "ts", code: "ts/2322", severity: "error", message: "z", fingerprint: "f1" },
          ],
        ),
      ],
    });
    expect(result.ties).toEqual([
      {
        requirement: "types",
        source: "ts",
        providers: [
          { provider: { id: "p.tsc", version: "1.0.0" }, blocking: true },
          { provider: { id: "p.tsgo", version: "2.0.0" }, blocking: false },
        ],
      },
    ]);
    expect(result.advisory).toEqual([
      expect.objectContaining({
        disposition: "advisory",
        effectiveSeverity: "warning",
        severityNote: expect.stringMatching(/^capped from error to warning/),
      }),
    ]);
    expect(result.dropped).toEqual([
      expect.objectContaining({
        reason: "undeclared-source",
        code: "ts/2322",
        provider: { id: "acme.lint", version: "1.0.0" },
      }),
    ]);
    expect(result.coverage.required).toEqual(["secrets", "types"]);
    expect(result.coverage.ran).toEqual(["types"]);
    expect(result.coverage.degraded).toEqual([
      expect.objectContaining({ requirement: "secrets", reason: "missing", failOpen: false }),
    ]);
    expect(provisionalDecision(result)).toEqual({
      decision: "indeterminate",
      reasons: ["types: authorized providers disagree", "secrets: missing -> indeterminate"],
    });
  });

  it("documents every error code", () => {
    const errors = readFileSync(new URL("../src/errors.ts", import.meta.url), "utf8");
    for (const [, code] of errors.matchAll(/"(ASP_ARBITRATION_[A-Z_]+)"/g)) expect(readme).toContain(`| \`${code}\` |`);
  });
});
