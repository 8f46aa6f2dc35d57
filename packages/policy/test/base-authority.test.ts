import type { Policy } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { applyFloor, createBasePolicyAuthority, failPolicyCell, parsePolicy, requiredAssurance } from "../src/index.js";
import { basePolicy, D, policyWith } from "./fixtures/policies.js";

const floorDoc = (edit: (p: Policy) => void = () => {}): Policy => {
  const p: Policy = {
    apiVersion: "asp.policy/v1",
    description: "organization floor",
    requirements: [
      { id: "secrets", capability: "check", sources: ["secrets", "gitleaks"], callSites: ["interactive", "gate"] },
      { id: "licenses", capability: "check", sources: ["licenses"], callSites: ["gate"] },
    ],
    providers: [],
    grants: [],
    failPolicy: { crashed: { interactive: "indeterminate", gate: "deny" }, timed_out: { gate: "indeterminate" } },
    assurance: { gate: "mediated-write" },
    severityCaps: [{ isolation: "advisory", maxSeverity: "warning" }],
    permissions: {
      default: "deny",
      rules: [
        { tool: "*", path: "infra/**", outcome: "deny" },
        { tool: "read_file", outcome: "allow" },
      ],
      credentialFence: ["*.kdbx"],
    },
    budgets: { timeoutMs: { gate: 30000 }, callbacksPerRequest: 20000 },
  };
  edit(p);
  return p;
};

describe("applyFloor", () => {
  const base = parsePolicy(basePolicy());
  const floor = parsePolicy(floorDoc());
  const merged = applyFloor(base, floor);

  describe("when the floor only tightens", () => {
    it("merges requirements: union of call-sites and sources, floor-only requirements added", () => {
      const byId = Object.fromEntries(merged.document.requirements.map((r) => [r.id, r]));
      expect(byId.secrets).toMatchObject({
        sources: ["secrets", "gitleaks"],
        callSites: ["gate", "sweep", "interactive"],
      });
      expect(byId.licenses).toMatchObject({ callSites: ["gate"] });
      expect(byId.types).toEqual(basePolicy().requirements[0]);
    });

    it("H7.1 takes the stricter fail-policy cell and the stronger assurance", () => {
      expect(failPolicyCell(merged, "crashed", "gate", { requiredSource: true })).toBe("deny");
      expect(failPolicyCell(merged, "crashed", "interactive", { requiredSource: true })).toBe("indeterminate");
      expect(failPolicyCell(merged, "timed_out", "gate", { requiredSource: true })).toBe("deny"); // base deny beats floor indeterminate
      expect(requiredAssurance(merged, "gate")).toBe("mediated-write");
      expect(requiredAssurance(merged, "sweep")).toBe("gated");
    });

    it("adds caps, deny/ask rules and fence entries, never the floor's allow rules; stricter default; smaller budgets", () => {
      expect(merged.document.severityCaps).toHaveLength(2);
      const rules = merged.document.permissions?.rules ?? [];
      expect(rules).toContainEqual({ tool: "*", path: "infra/**", outcome: "deny" });
      expect(rules).not.toContainEqual({ tool: "read_file", outcome: "allow" });
      expect(merged.document.permissions?.default).toBe("deny");
      expect(merged.document.permissions?.credentialFence).toEqual(["*.secret.json", "*.kdbx"]);
      expect(merged.document.budgets).toMatchObject({
        timeoutMs: { interactive: 2000, gate: 30000 },
        callbacksPerRequest: 10000,
      });
    });

    it("keeps the base's grants and records both digests as its origin", () => {
      expect(merged.document.grants).toEqual(base.document.grants);
      expect(merged.origin).toEqual({ kind: "floor", base: base.digest, floor: floor.digest });
      expect(merged.digest).not.toBe(base.digest);
    });
  });

  describe("when the floor tries to grant", () => {
    it.each([
      [
        "providers",
        (p: Policy): void => {
          p.providers.push({ id: "x", version: "1.0.0", digest: D(1) });
        },
      ],
      [
        "plugins",
        (p: Policy): void => {
          p.plugins = [{ id: "x", digest: D(1), capabilities: ["review"] }];
        },
      ],
    ] as const)("rejects a floor with %s (ASP_POLICY_FLOOR_GRANTS)", (_section, edit) => {
      expect(() => applyFloor(base, parsePolicy(floorDoc(edit)))).toThrowWithCode("ASP_POLICY_FLOOR_GRANTS");
    });
  });
});

// host §7: BasePolicyAuthority: the base (plus floor) decides; the candidate is only pending.
describe("createBasePolicyAuthority", () => {
  const base = parsePolicy(basePolicy());

  describe("when the changeset carries a valid candidate", () => {
    it("H7.1 H7.2 reports it pending, decides with the base, and lists self-authorization against base + floor", () => {
      const authority = createBasePolicyAuthority({ base, floor: parsePolicy(floorDoc()) });
      const candidate = policyWith((p) => {
        p.assurance = { interactive: "advisory", gate: "gated", sweep: "gated" }; // below the floor's mediated-write
      });
      const { active, pending } = authority.evaluate(JSON.stringify(candidate));
      expect(active).toBe(authority.active);
      expect(active.digest).not.toBe(base.digest);
      expect(pending.status).toBe("pending");
      if (pending.status !== "pending") return;
      expect(pending.policy.digest).not.toBe(active.digest);
      expect(pending.assessment.attempts.map((a) => a.kind)).toContain("lowers-assurance");
      expect(pending.assessment.attempts.map((a) => a.kind)).toContain("removes-requirement"); // licenses (floor)
      expect(pending.assessment.selfAuthorizing).toBe(true);
    });

    it("without a floor, decides with the base itself", () => {
      const authority = createBasePolicyAuthority({ base });
      expect(authority.active).toBe(base);
      const { pending } = authority.evaluate(basePolicy());
      expect(pending.status === "pending" && pending.assessment.selfAuthorizing).toBe(false);
    });
  });

  describe("when the candidate is invalid", () => {
    it("reports its problems and activates nothing", () => {
      const authority = createBasePolicyAuthority({ base });
      const { active, pending } = authority.evaluate(
        policyWith((p) => {
          p.grants[0] = { ...(p.grants[0] as Policy["grants"][number]), digest: D(3) };
        }),
      );
      expect(active).toBe(base);
      expect(pending).toMatchObject({
        status: "invalid",
        problems: [{ code: "ASP_POLICY_UNPINNED_GRANT", pointer: "/grants/0/digest" }],
      });
    });
  });
});
