import { BUDGET_LIMITS, STAGE_FLAGS } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { stageFlagsForTests } from "../src/flags.js";
import {
  BUILT_STAGES,
  configurationReport,
  formatSource,
  isResolvedConfiguration,
  repairAdmission,
  resolveConfiguration,
  sourceOf,
} from "../src/index.js";

describe("resolveConfiguration", () => {
  describe("when the environment has unknown variables in the contract's namespaces", () => {
    it.each([
      ["OPENAI4S_STAGE13_EXTRA"],
      ["OPENAI4S_STAGE1_TRUSTED_DELIVERYY"],
      ["OPENAI4S_AUTO_MAX_REVEIW_ROUNDS"],
      ["OPENAI4S_AUTO_MODE"],
    ])("rejects %s with ASP_ROLLOUT_UNKNOWN_KEY naming it", (name) => {
      try {
        resolveConfiguration({ env: { [name]: "1" } });
        expect.unreachable();
      } catch (error) {
        expect(error).toMatchObject({ code: "ASP_ROLLOUT_UNKNOWN_KEY", data: { key: name, source: "env" } });
      }
    });

    it("AM.rollout.3 rejects unknown alias-namespaced variables only when the alias is configured", () => {
      expect(() => resolveConfiguration({ env: { ASP_STAGE99: "1" }, aliasPrefix: "ASP_" })).toThrowWithCode(
        "ASP_ROLLOUT_UNKNOWN_KEY",
      );
      expect(() => resolveConfiguration({ env: { ASP_STAGE99: "1" } })).not.toThrow();
    });

    it("ignores other variables, including other OPENAI4S_ ones and unset ones", () => {
      expect(() =>
        resolveConfiguration({ env: { PATH: "/bin", OPENAI4S_API_BASE: "x", OPENAI4S_STAGE13_X: undefined } }),
      ).not.toThrow();
    });
  });

  describe("when everything is configured", () => {
    const config = resolveConfiguration({
      env: { OPENAI4S_STAGE2_AUTO_RUN_STORAGE: "1", OPENAI4S_AUTO_MAX_REPAIR_ROUNDS: "1" },
      deployment: {
        preset: "on",
        stages: { stage4_review_completion_gate: true, stage5_auto_repair: false },
        budgets: { wall_time_s: 600 },
      },
      deploymentOrigin: "deploy.json",
      project: { result_review_mode: "review_only", approvals_reviewer: "auto_review" },
      projectOrigin: "project.json",
      legacyReviewAuto: { rootFrameId: "f1", value: "1" },
    });

    it("resolves flags, selection and budgets together", () => {
      expect(isResolvedConfiguration(config)).toBe(true);
      expect(config.flags.enabled()).toEqual(["stage2_auto_run_storage", "stage4_review_completion_gate"]);
      expect(config.selection.selection).toEqual({
        preset: "off",
        result_review_mode: "review_only",
        approvals_reviewer: "auto_review",
        source: "project",
        normalized: false,
      });
      expect(config.budgets.values).toMatchObject({ wall_time_s: 600, max_repair_rounds: 1, max_review_rounds: 2 });
    });

    it("reports every flag, selection value and budget with its source", () => {
      const report = configurationReport(config);
      expect(Object.keys(report.stages)).toEqual([...STAGE_FLAGS]);
      expect(Object.keys(report.budgets)).toEqual([...BUDGET_LIMITS]);
      expect(report.built_stages).toEqual([...BUILT_STAGES]);
      expect(report.stages.stage2_auto_run_storage).toEqual({
        enabled: true,
        built: true,
        env: "OPENAI4S_STAGE2_AUTO_RUN_STORAGE",
        source: { kind: "env", key: "OPENAI4S_STAGE2_AUTO_RUN_STORAGE", origin: null },
      });
      expect(report.stages.stage4_review_completion_gate.source).toEqual({
        kind: "deployment",
        key: "stages.stage4_review_completion_gate",
        origin: "deploy.json",
      });
      // A stage set off by deployment configuration is reported as set, with whether it is built.
      expect(report.stages.stage5_auto_repair).toMatchObject({
        enabled: false,
        built: true,
        source: { kind: "deployment", key: "stages.stage5_auto_repair", origin: "deploy.json" },
      });
      for (const [flag, state] of Object.entries(report.stages)) {
        expect(state.built).toBe(BUILT_STAGES.includes(flag as (typeof BUILT_STAGES)[number]));
      }
      expect(report.selection).toMatchObject({
        source: "project",
        result_review_mode: { value: "review_only", source: { kind: "project", key: "result_review_mode" } },
        preset: { value: "off", source: { kind: "built_in" } },
      });
      expect(report.budgets.max_repair_rounds).toMatchObject({
        value: 1,
        ceiling: 2,
        env: "OPENAI4S_AUTO_MAX_REPAIR_ROUNDS",
        owners: ["stage5_auto_repair"],
        active: false,
        source: { kind: "env", key: "OPENAI4S_AUTO_MAX_REPAIR_ROUNDS" },
      });
      expect(report.budgets.wall_time_s).toMatchObject({ value: 600, active: true });
      expect(report.budgets.guardian_timeout_s.active).toBe(false);
      expect(JSON.parse(JSON.stringify(report))).toEqual(report);
    });
  });

  describe("when an unbuilt stage is turned on", () => {
    it("refuses the whole configuration, naming the deployment file and key", () => {
      let error: unknown;
      try {
        resolveConfiguration({
          env: { OPENAI4S_STAGE2_AUTO_RUN_STORAGE: "1" },
          deployment: { stages: { stage10_effect_reconciliation: true }, approvals_reviewer: "auto_review" },
          deploymentOrigin: "deploy.json",
        });
      } catch (e) {
        error = e;
      }
      expect(error).toMatchObject({
        code: "ASP_ROLLOUT_STAGE_NOT_BUILT",
        data: {
          key: "stages.stage10_effect_reconciliation",
          source: "deployment",
          origin: "deploy.json",
          stage: "stage10_effect_reconciliation",
        },
      });
      expect((error as Error).message).toContain(
        "Turn it off: remove stages.stage10_effect_reconciliation from deploy.json (or set it to false)",
      );
    });

    it("refuses it from the environment and through a host alias", () => {
      expect(() => resolveConfiguration({ env: { OPENAI4S_STAGE11_PORTABLE_RUNS: "1" } })).toThrowWithCode(
        "ASP_ROLLOUT_STAGE_NOT_BUILT",
      );
      expect(() =>
        resolveConfiguration({ env: { ASP_STAGE12_RESTART_RECOVERY: "1" }, aliasPrefix: "ASP_" }),
      ).toThrowWithCode("ASP_ROLLOUT_STAGE_NOT_BUILT");
    });
  });

  describe("when nothing is configured", () => {
    it("is all built-in", () => {
      const report = configurationReport(resolveConfiguration());
      expect(Object.values(report.stages).every((s) => !s.enabled && s.source.kind === "built_in")).toBe(true);
      expect(report.selection.source).toBe("built_in");
      expect(Object.values(report.budgets).every((b) => b.value === b.ceiling && b.source.kind === "built_in")).toBe(
        true,
      );
    });
  });
});

describe("formatSource", () => {
  it.each([
    [sourceOf("built_in"), "built-in default"],
    [sourceOf("env", "OPENAI4S_AUTO_WALL_TIME_S"), "env OPENAI4S_AUTO_WALL_TIME_S"],
    [sourceOf("deployment", "budgets.wall_time_s", "deploy.json"), "deployment (deploy.json) budgets.wall_time_s"],
    [sourceOf("imported_quarantine"), "imported_quarantine"],
  ])("formats %j as %s", (source, text) => {
    expect(formatSource(source)).toBe(text);
  });
});

describe("AM.stage5.1 AM.invariants.9 repair admission (ADR 0006)", () => {
  // ADR 0006: Stage 5 without Stage 9 admits no Repair (safe_rollback_unavailable).
  const selection = (preset: "on" | "off") => resolveConfiguration({ frame: { preset } }).selection.selection;
  const S5 = "stage5_auto_repair";
  const S9 = "stage9_safe_repair_checkpoint";

  it.each([
    [[], "on", "off"],
    [[S9], "on", "off"],
    [[S5], "off", "off"], // preset off, review off: auto_fix not selected
    [[S5], "on", "safe_rollback_unavailable"],
    [[S5, S9], "on", "checkpointed"],
  ] as const)("flags %j, preset %s: repair is %s", (stages, preset, repair) => {
    expect(repairAdmission(stageFlagsForTests(stages), selection(preset))).toBe(repair);
  });

  it("stage 5 on with stage 9 off never turns stage 9 on, and Repair never starts without a checkpoint", () => {
    const flags = stageFlagsForTests([S5]);
    expect(flags.isEnabled(S9)).toBe(false);
    expect(selection("on").result_review_mode).toBe("auto_fix");
    expect(repairAdmission(flags, selection("on"))).toBe("safe_rollback_unavailable");
  });

  it("review_only never repairs, whatever the flags", () => {
    const reviewOnly = resolveConfiguration({ frame: { result_review_mode: "review_only" } }).selection.selection;
    expect(repairAdmission(stageFlagsForTests([S5, S9]), reviewOnly)).toBe("off");
  });

  it("resolves stages 5 and 9 from the environment, and repair admission follows them", () => {
    const on = (env: Record<string, string>) =>
      resolveConfiguration({ env: { OPENAI4S_STAGE2_AUTO_RUN_STORAGE: "1", ...env }, frame: { preset: "on" } });
    expect(on({}).repair).toBe("off");
    expect(on({ OPENAI4S_STAGE5_AUTO_REPAIR: "1" }).repair).toBe("safe_rollback_unavailable");
    expect(on({ OPENAI4S_STAGE9_SAFE_REPAIR_CHECKPOINT: "1" }).repair).toBe("off");
    const both = on({ OPENAI4S_STAGE5_AUTO_REPAIR: "1", OPENAI4S_STAGE9_SAFE_REPAIR_CHECKPOINT: "1" });
    expect(both.repair).toBe("checkpointed");
    expect(configurationReport(both).repair).toBe("checkpointed");
  });
});
