import { STAGE_FLAGS, type StageFlag } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import {
  createStageFlags,
  isStageFlags,
  resolveConfiguration,
  resolveStageFlags,
  STAGE_ENV_VARS,
} from "../src/index.js";

describe("STAGE_ENV_VARS", () => {
  it.each(STAGE_FLAGS.map((flag, i) => [flag, i + 1] as const))(
    "AM.rollout.3 names %s OPENAI4S_STAGE%d_<NAME> (stages.md)",
    (flag, n) => {
      const name = flag.replace(/^stage\d+_/, "").toUpperCase();
      expect(STAGE_ENV_VARS[flag]).toBe(`OPENAI4S_STAGE${n}_${name}`);
    },
  );
});

describe("resolveStageFlags", () => {
  describe("when nothing is configured", () => {
    it("AM.rollout.1 leaves all twelve flags off, from the built-in default", () => {
      const flags = resolveStageFlags();
      for (const flag of STAGE_FLAGS) {
        expect(flags.isEnabled(flag)).toBe(false);
        expect(flags.describe(flag).source.kind).toBe("built_in");
      }
      expect(flags.enabled()).toEqual([]);
    });
  });

  describe("when exactly one flag is turned on by its variable", () => {
    // contract: each stage is an independent opt-in; enabling a later stage never implies an earlier one.
    it.each(STAGE_FLAGS.map((f) => [f]))("AM.rollout.2 %s alone enables exactly that one stage", (flag) => {
      const flags = resolveStageFlags({ env: { [STAGE_ENV_VARS[flag]]: "1" } });
      for (const other of STAGE_FLAGS) expect(flags.isEnabled(other)).toBe(other === flag);
      expect(flags.enabled()).toEqual([flag]);
      expect(flags.describe(flag).source).toEqual({ kind: "env", key: STAGE_ENV_VARS[flag], origin: null });
    });
  });

  describe("when exactly one flag is turned on by deployment configuration", () => {
    it.each(STAGE_FLAGS.map((f) => [f]))("AM.rollout.2 %s alone enables exactly that one stage", (flag) => {
      const flags = resolveStageFlags({ deployment: { [flag]: true }, deploymentOrigin: "deploy.json" });
      expect(flags.enabled()).toEqual([flag]);
      expect(flags.describe(flag).source).toEqual({ kind: "deployment", key: `stages.${flag}`, origin: "deploy.json" });
    });
  });

  describe("when every flag but one is on", () => {
    it.each(STAGE_FLAGS.map((f) => [f]))("AM.rollout.2 %s stays off", (flag) => {
      const env = Object.fromEntries(STAGE_FLAGS.filter((f) => f !== flag).map((f) => [STAGE_ENV_VARS[f], "true"]));
      const flags = resolveStageFlags({ env });
      expect(flags.isEnabled(flag)).toBe(false);
      expect(flags.enabled()).toHaveLength(11);
    });
  });

  describe("when the environment and deployment configuration disagree", () => {
    it("applies the environment on top of the deployment file (both directions)", () => {
      const on = resolveStageFlags({
        env: { OPENAI4S_STAGE2_AUTO_RUN_STORAGE: "off" },
        deployment: { stage2_auto_run_storage: true, stage3_scientific_review_shadow: true },
      });
      expect(on.isEnabled("stage2_auto_run_storage")).toBe(false);
      expect(on.describe("stage2_auto_run_storage").source.kind).toBe("env");
      expect(on.isEnabled("stage3_scientific_review_shadow")).toBe(true);
      expect(on.describe("stage3_scientific_review_shadow").source.kind).toBe("deployment");
    });
  });

  describe("AM.rollout.3 when an alias prefix is configured", () => {
    // stages.md: a composed host may add its own prefix as an alias; the contract names always work.
    it("reads the alias", () => {
      const flags = resolveStageFlags({ env: { ASP_STAGE5_AUTO_REPAIR: "yes" }, aliasPrefix: "ASP_" });
      expect(flags.enabled()).toEqual(["stage5_auto_repair"]);
      expect(flags.describe("stage5_auto_repair").source.key).toBe("ASP_STAGE5_AUTO_REPAIR");
    });

    it("still reads the contract name", () => {
      const flags = resolveStageFlags({ env: { OPENAI4S_STAGE5_AUTO_REPAIR: "1" }, aliasPrefix: "ASP_" });
      expect(flags.enabled()).toEqual(["stage5_auto_repair"]);
    });

    it("accepts both names when they agree", () => {
      const flags = resolveStageFlags({
        env: { OPENAI4S_STAGE5_AUTO_REPAIR: "1", ASP_STAGE5_AUTO_REPAIR: "true" },
        aliasPrefix: "ASP_",
      });
      expect(flags.isEnabled("stage5_auto_repair")).toBe(true);
    });

    it("refuses both names when they disagree", () => {
      expect(() =>
        resolveStageFlags({
          env: { OPENAI4S_STAGE5_AUTO_REPAIR: "1", ASP_STAGE5_AUTO_REPAIR: "0" },
          aliasPrefix: "ASP_",
        }),
      ).toThrowWithCode("ASP_ROLLOUT_ALIAS_CONFLICT");
    });

    it("ignores the alias name when no alias prefix is configured", () => {
      expect(resolveStageFlags({ env: { ASP_STAGE5_AUTO_REPAIR: "1" } }).enabled()).toEqual([]);
    });

    it.each([["asp_"], ["ASP"], ["OPENAI4S_"], ["OPENAI4S_X_"], ["_"], [""]])("refuses the prefix %j", (prefix) => {
      expect(() => resolveConfiguration({ aliasPrefix: prefix })).toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
    });
  });

  describe("when a flag variable is badly spelled", () => {
    it.each([
      ["", "ASP_ROLLOUT_EMPTY_VALUE"],
      ["TRUE", "ASP_ROLLOUT_BAD_BOOLEAN"],
      ["enable", "ASP_ROLLOUT_BAD_BOOLEAN"],
    ])("rejects %j with %s", (raw, code) => {
      expect(() => resolveStageFlags({ env: { OPENAI4S_STAGE1_TRUSTED_DELIVERY: raw } })).toThrowWithCode(code);
    });
  });
});

describe("StageFlags", () => {
  describe("when asked about a name that is not a stage", () => {
    it("throws ASP_ROLLOUT_UNKNOWN_KEY", () => {
      expect(() => createStageFlags([]).isEnabled("stage13_x" as StageFlag)).toThrowWithCode("ASP_ROLLOUT_UNKNOWN_KEY");
      expect(() => createStageFlags(["stage0" as StageFlag])).toThrowWithCode("ASP_ROLLOUT_UNKNOWN_KEY");
    });
  });

  describe("when checking the brand", () => {
    it("recognises flags and nothing else", () => {
      expect(isStageFlags(createStageFlags([]))).toBe(true);
      expect(isStageFlags({ isEnabled: () => true })).toBe(false);
      expect(isStageFlags(null)).toBe(false);
    });
  });
});
