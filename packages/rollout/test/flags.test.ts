import { STAGE_FLAGS, type StageFlag } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import {
  BUILT_STAGES,
  createStageFlags,
  isStageBuilt,
  isStageFlags,
  type RolloutError,
  resolveConfiguration,
  resolveStageFlags,
  STAGE_ENV_VARS,
  StageFlags,
  sourceOf,
} from "../src/index.js";

const UNBUILT = STAGE_FLAGS.filter((f) => !BUILT_STAGES.includes(f));

function thrown(f: () => unknown): RolloutError {
  try {
    f();
  } catch (error) {
    return error as RolloutError;
  }
  throw new Error("expected a throw");
}

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

  describe("when exactly one built flag is turned on by its variable", () => {
    // contract: each stage is an independent opt-in; enabling a later stage never implies an earlier one.
    it.each(BUILT_STAGES.map((f) => [f]))("AM.rollout.2 %s alone enables exactly that one stage", (flag) => {
      const flags = resolveStageFlags({ env: { [STAGE_ENV_VARS[flag]]: "1" } });
      for (const other of STAGE_FLAGS) expect(flags.isEnabled(other)).toBe(other === flag);
      expect(flags.enabled()).toEqual([flag]);
      expect(flags.describe(flag).source).toEqual({ kind: "env", key: STAGE_ENV_VARS[flag], origin: null });
    });
  });

  describe("when exactly one built flag is turned on by deployment configuration", () => {
    it.each(BUILT_STAGES.map((f) => [f]))("AM.rollout.2 %s alone enables exactly that one stage", (flag) => {
      const flags = resolveStageFlags({ deployment: { [flag]: true }, deploymentOrigin: "deploy.json" });
      expect(flags.enabled()).toEqual([flag]);
      expect(flags.describe(flag).source).toEqual({ kind: "deployment", key: `stages.${flag}`, origin: "deploy.json" });
    });
  });

  describe("when every built flag but one is on", () => {
    it.each(BUILT_STAGES.map((f) => [f]))("AM.rollout.2 %s stays off", (flag) => {
      const env = Object.fromEntries(BUILT_STAGES.filter((f) => f !== flag).map((f) => [STAGE_ENV_VARS[f], "true"]));
      const flags = resolveStageFlags({ env });
      expect(flags.isEnabled(flag)).toBe(false);
      expect(flags.enabled()).toHaveLength(BUILT_STAGES.length - 1);
    });
  });

  describe("when an unbuilt flag is turned on by its variable", () => {
    // issue 25: an unbuilt stage switched on would change nothing while `asp config show` said "on".
    it.each(UNBUILT.map((f) => [f, STAGE_ENV_VARS[f]]))(
      "refuses %s with ASP_ROLLOUT_STAGE_NOT_BUILT: unset %s",
      (flag, name) => {
        const error = thrown(() => resolveStageFlags({ env: { [name]: "1" } }));
        expect(error.code).toBe("ASP_ROLLOUT_STAGE_NOT_BUILT");
        expect(error.data).toMatchObject({ key: name, source: "env", stage: flag, built: [...BUILT_STAGES] });
        expect(error.message).toContain(`Turn it off: unset ${name}`);
        expect(error.message).toContain(flag);
      },
    );

    it.each(["1", "true", "on", "yes"])("refuses every spelling of on (%j)", (raw) => {
      expect(() => resolveStageFlags({ env: { OPENAI4S_STAGE10_EFFECT_RECONCILIATION: raw } })).toThrowWithCode(
        "ASP_ROLLOUT_STAGE_NOT_BUILT",
      );
    });

    it("names every unbuilt flag that is on and one step that turns them all off", () => {
      const error = thrown(() =>
        resolveStageFlags({
          env: {
            OPENAI4S_STAGE2_AUTO_RUN_STORAGE: "1",
            OPENAI4S_STAGE10_EFFECT_RECONCILIATION: "1",
            OPENAI4S_STAGE12_RESTART_RECOVERY: "yes",
          },
          deployment: { stage11_portable_runs: true },
          deploymentOrigin: "deploy.json",
        }),
      );
      expect(error.data).toMatchObject({
        key: "OPENAI4S_STAGE10_EFFECT_RECONCILIATION",
        stage: "stage10_effect_reconciliation",
      });
      expect((error.data as { unbuilt: { stage: string }[] }).unbuilt.map((u) => u.stage)).toEqual([
        "stage10_effect_reconciliation",
        "stage11_portable_runs",
        "stage12_restart_recovery",
      ]);
      expect(error.message).toContain("(nor are stage11_portable_runs, stage12_restart_recovery, also turned on)");
      expect(error.message).toContain(
        "Turn it off: unset OPENAI4S_STAGE10_EFFECT_RECONCILIATION OPENAI4S_STAGE12_RESTART_RECOVERY; " +
          "remove stages.stage11_portable_runs from deploy.json (or set it to false)",
      );
    });

    it("never echoes the value", () => {
      const error = thrown(() => resolveStageFlags({ env: { OPENAI4S_STAGE1_TRUSTED_DELIVERY: "yes" } }));
      expect(JSON.stringify(error.toJSON())).not.toMatch(/"yes"/);
    });
  });

  describe("when an unbuilt flag is turned on by deployment configuration", () => {
    it.each(UNBUILT.map((f) => [f]))("refuses %s naming the file and the key", (flag) => {
      const error = thrown(() => resolveStageFlags({ deployment: { [flag]: true }, deploymentOrigin: "deploy.json" }));
      expect(error.code).toBe("ASP_ROLLOUT_STAGE_NOT_BUILT");
      expect(error.data).toMatchObject({ key: `stages.${flag}`, source: "deployment", origin: "deploy.json" });
      expect(error.message).toContain(`Turn it off: remove stages.${flag} from deploy.json (or set it to false)`);
    });

    it("asks to unset the variable and remove the key when both turn it on", () => {
      const error = thrown(() =>
        resolveStageFlags({
          env: { OPENAI4S_STAGE10_EFFECT_RECONCILIATION: "1" },
          deployment: { stage10_effect_reconciliation: true },
        }),
      );
      expect(error.data).toMatchObject({ key: "OPENAI4S_STAGE10_EFFECT_RECONCILIATION", source: "env" });
      expect(error.message).toContain(
        "Turn it off: unset OPENAI4S_STAGE10_EFFECT_RECONCILIATION; remove stages.stage10_effect_reconciliation from the deployment configuration",
      );
    });
  });

  describe("when an unbuilt flag is set off", () => {
    it("accepts it, from the variable and from the file, and reports the source", () => {
      const env = Object.fromEntries(UNBUILT.map((f) => [STAGE_ENV_VARS[f], "0"]));
      const flags = resolveStageFlags({ env, deployment: Object.fromEntries(UNBUILT.map((f) => [f, false])) });
      expect(flags.enabled()).toEqual([]);
      for (const flag of UNBUILT) expect(flags.describe(flag).source.kind).toBe("env");
      const fromFile = resolveStageFlags({ deployment: { stage10_effect_reconciliation: false } });
      expect(fromFile.describe("stage10_effect_reconciliation")).toMatchObject({ enabled: false });
    });

    it("accepts the file turning it on when the environment turns it off", () => {
      const flags = resolveStageFlags({
        env: { OPENAI4S_STAGE10_EFFECT_RECONCILIATION: "off" },
        deployment: { stage10_effect_reconciliation: true },
      });
      expect(flags.isEnabled("stage10_effect_reconciliation")).toBe(false);
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
      const flags = resolveStageFlags({ env: { ASP_STAGE8_LOOP_CIRCUITS: "yes" }, aliasPrefix: "ASP_" });
      expect(flags.enabled()).toEqual(["stage8_loop_circuits"]);
      expect(flags.describe("stage8_loop_circuits").source.key).toBe("ASP_STAGE8_LOOP_CIRCUITS");
    });

    it("still reads the contract name", () => {
      const flags = resolveStageFlags({ env: { OPENAI4S_STAGE8_LOOP_CIRCUITS: "1" }, aliasPrefix: "ASP_" });
      expect(flags.enabled()).toEqual(["stage8_loop_circuits"]);
    });

    it("accepts both names when they agree", () => {
      const flags = resolveStageFlags({
        env: { OPENAI4S_STAGE8_LOOP_CIRCUITS: "1", ASP_STAGE8_LOOP_CIRCUITS: "true" },
        aliasPrefix: "ASP_",
      });
      expect(flags.isEnabled("stage8_loop_circuits")).toBe(true);
    });

    it("refuses both names when they disagree", () => {
      expect(() =>
        resolveStageFlags({
          env: { OPENAI4S_STAGE8_LOOP_CIRCUITS: "1", ASP_STAGE8_LOOP_CIRCUITS: "0" },
          aliasPrefix: "ASP_",
        }),
      ).toThrowWithCode("ASP_ROLLOUT_ALIAS_CONFLICT");
    });

    it("refuses an unbuilt stage turned on through the alias, naming the alias to unset", () => {
      const error = thrown(() =>
        resolveStageFlags({ env: { ASP_STAGE10_EFFECT_RECONCILIATION: "on" }, aliasPrefix: "ASP_" }),
      );
      expect(error.data).toMatchObject({ key: "ASP_STAGE10_EFFECT_RECONCILIATION", source: "env" });
      expect(error.message).toContain("Turn it off: unset ASP_STAGE10_EFFECT_RECONCILIATION");
      const both = thrown(() =>
        resolveStageFlags({
          env: { OPENAI4S_STAGE10_EFFECT_RECONCILIATION: "1", ASP_STAGE10_EFFECT_RECONCILIATION: "on" },
          aliasPrefix: "ASP_",
        }),
      );
      expect(both.message).toContain(
        "Turn it off: unset OPENAI4S_STAGE10_EFFECT_RECONCILIATION ASP_STAGE10_EFFECT_RECONCILIATION",
      );
    });

    it("ignores the alias name when no alias prefix is configured", () => {
      expect(resolveStageFlags({ env: { ASP_STAGE8_LOOP_CIRCUITS: "1" } }).enabled()).toEqual([]);
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

describe("BUILT_STAGES and isStageBuilt", () => {
  it("lists the built stages in stage order, frozen", () => {
    expect(BUILT_STAGES).toEqual([
      "stage2_auto_run_storage",
      "stage3_scientific_review_shadow",
      "stage4_review_completion_gate",
      "stage5_auto_repair",
      "stage6_guardian_shadow",
      "stage7_guardian_enforcement",
      "stage8_loop_circuits",
      "stage9_safe_repair_checkpoint",
    ]);
    expect(Object.isFrozen(BUILT_STAGES)).toBe(true);
    expect(STAGE_FLAGS.filter((f) => BUILT_STAGES.includes(f))).toEqual([...BUILT_STAGES]);
  });

  it.each(STAGE_FLAGS.map((f) => [f, BUILT_STAGES.includes(f)] as const))("isStageBuilt(%s) is %s", (flag, built) => {
    expect(isStageBuilt(flag)).toBe(built);
  });

  it("refuses a name that is not a stage", () => {
    expect(() => isStageBuilt("stage13_x" as StageFlag)).toThrowWithCode("ASP_ROLLOUT_UNKNOWN_KEY");
  });
});

describe("StageFlags", () => {
  describe("when asked about a name that is not a stage", () => {
    it("throws ASP_ROLLOUT_UNKNOWN_KEY", () => {
      expect(() => createStageFlags([]).isEnabled("stage13_x" as StageFlag)).toThrowWithCode("ASP_ROLLOUT_UNKNOWN_KEY");
      expect(() => createStageFlags(["stage0" as StageFlag])).toThrowWithCode("ASP_ROLLOUT_UNKNOWN_KEY");
    });
  });

  describe("when created for code that knows which stages are on", () => {
    it("turns on built stages", () => {
      expect(createStageFlags(BUILT_STAGES).enabled()).toEqual([...BUILT_STAGES]);
    });

    it.each(UNBUILT.map((f) => [f]))("refuses the unbuilt %s, from createStageFlags and the constructor", (flag) => {
      const error = thrown(() => createStageFlags(["stage2_auto_run_storage", flag]));
      expect(error.code).toBe("ASP_ROLLOUT_STAGE_NOT_BUILT");
      expect(error.data).toMatchObject({ key: flag, source: "built_in", stage: flag });
      expect(error.message).toContain(`Turn it off: leave ${flag} out of the flags you turn on`);
      expect(() => createStageFlags([flag], sourceOf("env", STAGE_ENV_VARS[flag]))).toThrowWithCode(
        "ASP_ROLLOUT_STAGE_NOT_BUILT",
      );
      expect(() => new StageFlags({ [flag]: { enabled: true, source: sourceOf("built_in") } })).toThrowWithCode(
        "ASP_ROLLOUT_STAGE_NOT_BUILT",
      );
      expect(new StageFlags({ [flag]: { enabled: false, source: sourceOf("built_in") } }).enabled()).toEqual([]);
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
