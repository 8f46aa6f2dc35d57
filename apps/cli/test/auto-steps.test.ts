import { resolveConfiguration } from "@asp/rollout";
import { describe, expect, it } from "vitest";
import { assertStages, autoModeConfiguration, repairEngineName, repairStep } from "../src/commands/auto.js";

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
});
