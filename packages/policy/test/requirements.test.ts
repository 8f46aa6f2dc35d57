import { ASSURANCE_MODES, CALL_SITES } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import {
  assuranceSatisfies,
  DEFAULT_ASSURANCE,
  isRequiredSource,
  parsePolicy,
  requiredAssurance,
  requiredRequirements,
  requiredSources,
} from "../src/index.js";
import { basePolicy, policyWith } from "./fixtures/policies.js";

const policy = parsePolicy(basePolicy());

describe("requiredRequirements", () => {
  it.each([
    ["interactive", ["types"]],
    ["gate", ["secrets", "types"]],
    ["sweep", ["secrets", "types"]],
  ] as const)("at %s: %o", (site, ids) => {
    expect(requiredRequirements(policy, site).map((r) => r.id)).toEqual(ids);
  });

  it("lists the required sources and answers isRequiredSource", () => {
    expect(requiredSources(policy, "gate")).toEqual(["secrets", "ts"]);
    expect(isRequiredSource(policy, "secrets", "gate")).toBe(true);
    expect(isRequiredSource(policy, "secrets", "interactive")).toBe(false);
    expect(isRequiredSource(policy, "eslint", "gate")).toBe(false);
  });
});

describe("requiredAssurance", () => {
  it("reads the policy and falls back to the built-in modes", () => {
    expect(requiredAssurance(policy, "sweep")).toBe("gated");
    const bare = parsePolicy(policyWith((p) => delete p.assurance));
    for (const site of CALL_SITES) expect(requiredAssurance(bare, site)).toBe(DEFAULT_ASSURANCE[site]);
  });
});

describe("assuranceSatisfies", () => {
  const cells = ASSURANCE_MODES.flatMap((achieved, i) =>
    ASSURANCE_MODES.map((required, j) => [achieved, required, i >= j] as const),
  );
  it.each(cells)("achieved %s for required %s: %s", (achieved, required, ok) => {
    expect(assuranceSatisfies(achieved, required)).toBe(ok);
  });
});
