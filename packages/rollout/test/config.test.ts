import { BUDGET_LIMITS, STAGE_FLAGS, validate } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { type ConfigScope, parseAutoModeConfig, resolveConfiguration, toAutoModeConfig } from "../src/index.js";

function thrown(fn: () => unknown): { code: string; data: Record<string, unknown>; json: string } {
  try {
    fn();
  } catch (error) {
    const e = error as { code: string; data: Record<string, unknown>; toJSON(): unknown };
    return { code: e.code, data: e.data, json: JSON.stringify(e.toJSON()) };
  }
  throw new Error("expected a throw");
}

describe("parseAutoModeConfig", () => {
  describe("when the configuration is valid", () => {
    it("AM.modes.1 parses every key and keeps absent keys absent", () => {
      const parsed = parseAutoModeConfig(
        {
          preset: "off",
          result_review_mode: "review_only",
          approvals_reviewer: "auto_review",
          stages: { stage2_auto_run_storage: true, stage4_review_completion_gate: "on" },
          budgets: { wall_time_s: 600, extra_token_multiplier: "1.25", guardian_window_size: 50 },
        },
        "deployment",
        { origin: "deploy.json" },
      );
      expect(parsed).toMatchObject({
        scope: "deployment",
        origin: "deploy.json",
        preset: "off",
        result_review_mode: "review_only",
        approvals_reviewer: "auto_review",
        stages: { stage2_auto_run_storage: true, stage4_review_completion_gate: true },
        budgets: { wall_time_s: 600, extra_token_multiplier: 1.25, guardian_window_size: 50 },
      });
      expect(validate("auto-mode-config", toAutoModeConfig(parsed)).ok).toBe(true);
    });

    it("treats an empty object as a configuration that states nothing", () => {
      expect(parseAutoModeConfig({}, "frame")).toEqual({ scope: "frame", origin: null, stages: {}, budgets: {} });
    });

    it("treats a JS undefined value as absent", () => {
      expect(parseAutoModeConfig({ preset: undefined }, "project").preset).toBeUndefined();
    });
  });

  describe("AM.modes.3 when any value is rejected", () => {
    // contract "Product modes": unknown boolean spellings and unknown enum values reject configuration;
    // an explicitly empty value also rejects rather than meaning off.
    const rows: ReadonlyArray<readonly [string, ConfigScope, unknown, string, string]> = [
      ["unknown preset", "deployment", { preset: "autopilot" }, "ASP_ROLLOUT_UNKNOWN_VALUE", "preset"],
      ["preset in the wrong case", "frame", { preset: "On" }, "ASP_ROLLOUT_UNKNOWN_VALUE", "preset"],
      ["empty preset", "project", { preset: "" }, "ASP_ROLLOUT_EMPTY_VALUE", "preset"],
      ["null preset", "project", { preset: null }, "ASP_ROLLOUT_EMPTY_VALUE", "preset"],
      ["boolean preset", "project", { preset: true }, "ASP_ROLLOUT_UNKNOWN_VALUE", "preset"],
      [
        "unknown review mode",
        "frame",
        { result_review_mode: "auto" },
        "ASP_ROLLOUT_UNKNOWN_VALUE",
        "result_review_mode",
      ],
      ["empty review mode", "frame", { result_review_mode: " " }, "ASP_ROLLOUT_EMPTY_VALUE", "result_review_mode"],
      [
        "unknown approvals reviewer",
        "deployment",
        { approvals_reviewer: "guardian" },
        "ASP_ROLLOUT_UNKNOWN_VALUE",
        "approvals_reviewer",
      ],
      [
        "empty approvals reviewer",
        "deployment",
        { approvals_reviewer: "" },
        "ASP_ROLLOUT_EMPTY_VALUE",
        "approvals_reviewer",
      ],
      ["misspelled key", "project", { result_reveiw_mode: "off" }, "ASP_ROLLOUT_UNKNOWN_KEY", "result_reveiw_mode"],
      [
        "unknown stage",
        "deployment",
        { stages: { stage13_magic: true } },
        "ASP_ROLLOUT_UNKNOWN_KEY",
        "stages.stage13_magic",
      ],
      [
        "misspelled boolean",
        "deployment",
        { stages: { stage1_trusted_delivery: "ture" } },
        "ASP_ROLLOUT_BAD_BOOLEAN",
        "stages.stage1_trusted_delivery",
      ],
      [
        "numeric boolean",
        "deployment",
        { stages: { stage1_trusted_delivery: 1 } },
        "ASP_ROLLOUT_BAD_BOOLEAN",
        "stages.stage1_trusted_delivery",
      ],
      [
        "empty boolean",
        "deployment",
        { stages: { stage1_trusted_delivery: "" } },
        "ASP_ROLLOUT_EMPTY_VALUE",
        "stages.stage1_trusted_delivery",
      ],
      ["stages in a project", "project", { stages: {} }, "ASP_ROLLOUT_KEY_NOT_ALLOWED", "stages"],
      [
        "stages in a frame",
        "frame",
        { stages: { stage7_guardian_enforcement: true } },
        "ASP_ROLLOUT_KEY_NOT_ALLOWED",
        "stages",
      ],
      ["unknown budget", "frame", { budgets: { max_cost_usd: 1 } }, "ASP_ROLLOUT_UNKNOWN_KEY", "budgets.max_cost_usd"],
      [
        "zero budget",
        "frame",
        { budgets: { max_repair_rounds: 0 } },
        "ASP_ROLLOUT_BAD_NUMBER",
        "budgets.max_repair_rounds",
      ],
      ["empty budget", "frame", { budgets: { wall_time_s: "" } }, "ASP_ROLLOUT_EMPTY_VALUE", "budgets.wall_time_s"],
      [
        "window size changed",
        "deployment",
        { budgets: { guardian_window_size: 40 } },
        "ASP_ROLLOUT_WINDOW_FIXED",
        "budgets.guardian_window_size",
      ],
      ["array configuration", "deployment", [], "ASP_ROLLOUT_BAD_SHAPE", "(configuration)"],
      ["string configuration", "deployment", "preset=on", "ASP_ROLLOUT_BAD_SHAPE", "(configuration)"],
      [
        "stages not an object",
        "deployment",
        { stages: ["stage1_trusted_delivery"] },
        "ASP_ROLLOUT_BAD_SHAPE",
        "stages",
      ],
      ["budgets not an object", "deployment", { budgets: 3 }, "ASP_ROLLOUT_BAD_SHAPE", "budgets"],
    ];

    it.each(rows)("rejects %s (%s): %j -> %s naming the key", (_name, scope, value, code, key) => {
      const error = thrown(() => parseAutoModeConfig(value, scope));
      expect(error.code).toBe(code);
      expect(error.data).toMatchObject({ key, source: scope });
    });

    it.each(rows)("rejects the whole configuration when %s sits next to valid keys", (_n, scope, value, code) => {
      if (typeof value !== "object" || value === null || Array.isArray(value)) return;
      const valid: ReadonlyArray<Record<string, unknown>> = [
        { budgets: { max_extra_cells: 10 } },
        { approvals_reviewer: "user" },
        { preset: "off" },
      ];
      const extra = valid.find((v) => !Object.keys(v).some((k) => k in value)) ?? {};
      const withValid = { ...extra, ...value };
      expect(() => resolveConfiguration({ [scope]: withValid })).toThrowWithCode(code);
    });
  });

  describe("when a rejected value looks like a secret", () => {
    it("never puts the value in the error", () => {
      const secret = "sk-proj-0123456789abcdefSECRET";
      for (const value of [
        { preset: secret },
        { stages: { stage1_trusted_delivery: secret } },
        { budgets: { wall_time_s: secret } },
      ]) {
        const error = thrown(() => parseAutoModeConfig(value, "deployment"));
        expect(error.json).not.toContain(secret);
      }
    });
  });

  describe("when every stage flag and budget is stated", () => {
    it("AM.budgets.1 accepts all twelve flags and all thirteen limits at their ceilings", () => {
      const parsed = parseAutoModeConfig(
        {
          stages: Object.fromEntries(STAGE_FLAGS.map((f) => [f, false])),
          budgets: { ...Object.fromEntries(BUDGET_LIMITS.map((l) => [l, 1])), guardian_window_size: 50 },
        },
        "deployment",
      );
      expect(Object.keys(parsed.stages)).toHaveLength(12);
      expect(Object.keys(parsed.budgets)).toHaveLength(13);
    });
  });
});
