import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveConfiguration } from "@asp/rollout";
import { describe, expect, it } from "vitest";
import {
  assertStages,
  autoModeConfiguration,
  guardianName,
  readGuardianRules,
  repairEngineName,
  repairStep,
} from "../src/commands/auto.js";

// The next steps `asp auto run` prints when a run's stages or mode do not admit what was asked:
// each names what this run actually needs, and a --preset the user passed, never advice about
// "autoMode" that the preset would override. Pure functions over a real resolved configuration.

const STAGES = (more: Record<string, boolean> = {}) => ({
  stages: { stage2_auto_run_storage: true, stage4_review_completion_gate: true, ...more },
});
const resolve = (autoMode: Record<string, unknown>, preset?: string) =>
  autoModeConfiguration({}, { autoMode } as never, "/etc/asp/host.json", preset);

describe("asp auto run: the next step names what this run needs", () => {
  it("result_review_mode off from --preset off names the preset, not the configuration file", () => {
    const viaPreset = resolve(STAGES(), "off");
    expect(() => assertStages(viaPreset)).toThrow(/--preset off selects it: pass --preset on instead/);
    const viaFile = resolveConfiguration({
      deployment: { ...STAGES(), preset: "off", result_review_mode: "off" },
      deploymentOrigin: "/etc/asp/host.json",
    });
    expect(viaFile.selection.selection.result_review_mode).toBe("off");
    expect(() => assertStages(viaFile)).toThrow(/set "result_review_mode": "review_only" in "autoMode"/);
  });

  it("names only the repair stages that are off, and the preset only when the mode is not auto_fix", () => {
    const none = resolve(STAGES(), "on");
    expect(repairStep(none)).toMatch(/^turn stage5_auto_repair and stage9_safe_repair_checkpoint on /);
    const only9 = resolve(STAGES({ stage5_auto_repair: true }), "on");
    expect(repairStep(only9)).toMatch(/^turn stage9_safe_repair_checkpoint on /);
    const only5 = resolve(STAGES({ stage9_safe_repair_checkpoint: true }), "on");
    expect(repairStep(only5)).toMatch(/^turn stage5_auto_repair on /);
    const both = STAGES({ stage5_auto_repair: true, stage9_safe_repair_checkpoint: true });
    expect(repairStep(resolve(both, "off"))).toBe("pass --preset on instead of --preset off");
    expect(repairStep(resolve(both))).toMatch(/^pass --preset on \(or set "result_review_mode": "auto_fix"/);
    expect(resolve(both, "on").repair).toBe("checkpointed");
  });

  it("repairEngineName refuses --repair-engine with the step of this run, and provisions one once admitted", () => {
    const flags = { engine: "openai", repairEngine: "openai" };
    expect(() => repairEngineName(flags, resolve(STAGES({ stage5_auto_repair: true }), "on"))).toThrow(
      /Auto Repair is safe_rollback_unavailable: turn stage9_safe_repair_checkpoint on /,
    );
    const both = STAGES({ stage5_auto_repair: true, stage9_safe_repair_checkpoint: true });
    expect(() => repairEngineName(flags, resolve(both, "off"))).toThrow(
      /Auto Repair is off: pass --preset on instead of --preset off/,
    );
    expect(repairEngineName(flags, resolve(both, "on"))).toBe("openai");
    expect(repairEngineName({ engine: "openai" }, resolve(both))).toBeUndefined();
  });

  it("AM.stage7.1: guardianName needs --guardian exactly when Stage 6, or Stage 7 with auto_review, applies, and says how", () => {
    const shadow = resolve(STAGES({ stage6_guardian_shadow: true }));
    expect(() => guardianName({}, shadow)).toThrow(/stage6_guardian_shadow needs a Guardian: pass --guardian rules/);
    expect(guardianName({ guardian: "openai" }, shadow)).toBe("openai");
    const enforce = resolve({ ...STAGES({ stage7_guardian_enforcement: true }), approvals_reviewer: "auto_review" });
    expect(() => guardianName({}, enforce)).toThrow(/stage7_guardian_enforcement with approvals_reviewer=auto_review/);
    expect(() => guardianName({ guardian: "rules" }, enforce)).toThrow(/--guardian rules needs --guardian-rules FILE/);
    expect(guardianName({ guardian: "rules", guardianRules: "r.json" }, enforce)).toBe("rules");
    // Stage 7 with approvals_reviewer=user: no Guardian resolves anything, so --guardian is refused.
    const user = resolve(STAGES({ stage7_guardian_enforcement: true }));
    expect(guardianName({}, user)).toBeUndefined();
    expect(() => guardianName({ guardian: "rules", guardianRules: "r.json" }, user)).toThrow(
      /--guardian needs stage6_guardian_shadow, or stage7_guardian_enforcement with approvals_reviewer=auto_review/,
    );
    expect(() => guardianName({ guardian: "openai", guardianRules: "r.json" }, enforce)).toThrow(
      /--guardian-rules is for --guardian rules only/,
    );
  });

  it("readGuardianRules refuses a rules file inside the repository under evaluation, and a bad shape", () => {
    const root = mkdtempSync(join(tmpdir(), "asp-guardian-rules-"));
    try {
      const repo = join(root, "repo");
      const inside = join(repo, "rules.json");
      const outside = join(root, "rules.json");
      const rules = {
        version: "1",
        rules: [{ actionClass: "write_file", decision: "allow", risk: "low", rationale: "ok" }],
      };
      mkdirSync(repo);
      writeFileSync(inside, JSON.stringify(rules));
      writeFileSync(outside, JSON.stringify(rules));
      expect(() => readGuardianRules(inside, repo)).toThrow(
        expect.objectContaining({ code: "ASP_THS_UNTRUSTED_LOCATION" }),
      );
      expect(readGuardianRules(outside, repo).identity.prompt_version).toBe("rules:1");
      writeFileSync(outside, JSON.stringify({ rules: [] }));
      expect(() => readGuardianRules(outside, repo)).toThrow(expect.objectContaining({ code: "ASP_CLI_BAD_INPUT" }));
      writeFileSync(
        outside,
        JSON.stringify({
          version: "1",
          rules: [{ actionClass: "write_file", decision: "allow", risk: "critical", rationale: "x" }],
        }),
      );
      expect(() => readGuardianRules(outside, repo)).toThrow(
        expect.objectContaining({ code: "ASP_AUTO_MODE_INVALID_OPTION" }),
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
