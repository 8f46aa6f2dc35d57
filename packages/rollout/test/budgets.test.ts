import { BUDGET_LIMITS, type BudgetLimit, STAGE_FLAGS, validate } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import {
  BUDGET_TABLE,
  type ConsumableBudget,
  createBudgetMeter,
  createStageFlags,
  DEFAULT_BUDGETS,
  defaultBudgets,
  GUARDIAN_WINDOW_SIZE,
  resolveConfiguration,
  sourceOf,
  tightenBudgets,
} from "../src/index.js";
import { runStartedEvent } from "./helpers.js";

// The contract's "Frozen bounded budgets" table, transcribed: limit, default ceiling, variable.
const CONTRACT_TABLE: ReadonlyArray<readonly [BudgetLimit, number, string]> = [
  ["max_review_rounds", 2, "OPENAI4S_AUTO_MAX_REVIEW_ROUNDS"],
  ["max_repair_rounds", 2, "OPENAI4S_AUTO_MAX_REPAIR_ROUNDS"],
  ["repair_turns_per_round", 12, "OPENAI4S_AUTO_REPAIR_TURNS_PER_ROUND"],
  ["max_extra_cells", 30, "OPENAI4S_AUTO_MAX_EXTRA_CELLS"],
  ["wall_time_s", 900, "OPENAI4S_AUTO_WALL_TIME_S"],
  ["extra_token_multiplier", 1.5, "OPENAI4S_AUTO_EXTRA_TOKEN_MULTIPLIER"],
  ["repeated_finding_limit", 2, "OPENAI4S_AUTO_REPEATED_FINDING_LIMIT"],
  ["same_action_no_delta_limit", 3, "OPENAI4S_AUTO_SAME_ACTION_NO_DELTA_LIMIT"],
  ["no_progress_turn_limit", 5, "OPENAI4S_AUTO_NO_PROGRESS_TURN_LIMIT"],
  ["guardian_timeout_s", 90, "OPENAI4S_AUTO_GUARDIAN_TIMEOUT_S"],
  ["guardian_consecutive_denial_limit", 3, "OPENAI4S_AUTO_GUARDIAN_CONSECUTIVE_DENIAL_LIMIT"],
  ["guardian_window_size", 50, "OPENAI4S_AUTO_GUARDIAN_WINDOW_SIZE"],
  ["guardian_window_denial_limit", 10, "OPENAI4S_AUTO_GUARDIAN_WINDOW_DENIAL_LIMIT"],
];
const TIGHTENABLE = CONTRACT_TABLE.filter(([limit]) => limit !== "guardian_window_size");
const tighter = (limit: BudgetLimit, ceiling: number): number =>
  limit === "extra_token_multiplier" ? 1.25 : ceiling - 1;
const looser = (limit: BudgetLimit, ceiling: number): number => (limit === "extra_token_multiplier" ? 2 : ceiling + 1);

describe("BUDGET_TABLE", () => {
  it("AM.budgets.1 has all thirteen limits of the contract", () => {
    expect(CONTRACT_TABLE.map(([l]) => l)).toEqual([...BUDGET_LIMITS]);
  });

  // contract "Frozen bounded budgets": exact environment variable names and default ceilings.
  it.each(CONTRACT_TABLE)("AM.budgets.1 %s defaults to %d and is read from %s", (limit, ceiling, env) => {
    expect(BUDGET_TABLE[limit]).toMatchObject({ limit, ceiling, env });
    expect(DEFAULT_BUDGETS[limit]).toBe(ceiling);
  });

  it("gives every budget at least one owning stage", () => {
    for (const limit of BUDGET_LIMITS) {
      expect(BUDGET_TABLE[limit].owners.length).toBeGreaterThan(0);
      for (const owner of BUDGET_TABLE[limit].owners) expect(STAGE_FLAGS).toContain(owner);
    }
  });

  it("is a valid budget set for an Auto Run", () => {
    expect(
      validate(
        "event-auto-run-started",
        runStartedEvent({
          preset: "off",
          result_review_mode: "off",
          approvals_reviewer: "user",
          source: "built_in",
          normalized: false,
        }),
      ).ok,
    ).toBe(true);
    expect(validate("event-auto-run-started", runStartedEvent({ preset: "bogus" })).ok).toBe(false);
  });
});

describe("resolveConfiguration budgets", () => {
  describe("when nothing is configured", () => {
    it("uses the frozen ceilings from the built-in source", () => {
      const { budgets } = resolveConfiguration();
      expect(budgets.values).toEqual(DEFAULT_BUDGETS);
      for (const limit of BUDGET_LIMITS) expect(budgets.sources[limit].kind).toBe("built_in");
    });
  });

  describe.each(TIGHTENABLE)("when %s (ceiling %d) is set by %s", (limit, ceiling, env) => {
    it("parses and applies a tighter value from the environment", () => {
      const value = tighter(limit, ceiling);
      const { budgets } = resolveConfiguration({ env: { [env]: String(value) } });
      expect(budgets.values[limit]).toBe(value);
      expect(budgets.sources[limit]).toEqual({ kind: "env", key: env, origin: null });
    });

    it("accepts the ceiling itself", () => {
      expect(resolveConfiguration({ env: { [env]: String(ceiling) } }).budgets.values[limit]).toBe(ceiling);
    });

    // contract: a deployment default may tighten the monotonic limits but cannot loosen them.
    it("AM.budgets.2 refuses a looser value from the environment", () => {
      expect(() => resolveConfiguration({ env: { [env]: String(looser(limit, ceiling)) } })).toThrowWithCode(
        "ASP_ROLLOUT_BUDGET_LOOSENED",
      );
    });

    it("refuses a looser value from the deployment file", () => {
      expect(() =>
        resolveConfiguration({ deployment: { budgets: { [limit]: looser(limit, ceiling) } } }),
      ).toThrowWithCode("ASP_ROLLOUT_BUDGET_LOOSENED");
    });

    it.each([["0"], ["-1"], ["abc"], ["1e3"]])("rejects the spelling %j", (raw) => {
      expect(() => resolveConfiguration({ env: { [env]: raw } })).toThrowWithCode("ASP_ROLLOUT_BAD_NUMBER");
    });

    it("rejects an empty variable", () => {
      expect(() => resolveConfiguration({ env: { [env]: "" } })).toThrowWithCode("ASP_ROLLOUT_EMPTY_VALUE");
    });

    // contract: project/frame policy may tighten but cannot loosen.
    it("AM.budgets.2 lets a project tighten the deployment value and refuses a frame that loosens the project's", () => {
      const t = tighter(limit, ceiling);
      const lower = limit === "extra_token_multiplier" ? 1 : Math.max(1, t - 1);
      const ok = resolveConfiguration({
        deployment: { budgets: { [limit]: t } },
        project: { budgets: { [limit]: lower } },
        projectOrigin: "project.json",
      });
      expect(ok.budgets.values[limit]).toBe(lower);
      expect(ok.budgets.sources[limit]).toEqual({ kind: "project", key: `budgets.${limit}`, origin: "project.json" });
      if (lower < t) {
        expect(() =>
          resolveConfiguration({ project: { budgets: { [limit]: lower } }, frame: { budgets: { [limit]: t } } }),
        ).toThrowWithCode("ASP_ROLLOUT_BUDGET_LOOSENED");
      }
    });
  });

  describe("when the layers disagree", () => {
    it("AM.budgets.2 applies deployment file, environment, project, frame in that order, each only tightening", () => {
      const r = resolveConfiguration({
        deployment: { budgets: { wall_time_s: 800 } },
        env: { OPENAI4S_AUTO_WALL_TIME_S: "700" },
        project: { budgets: { wall_time_s: 600 } },
        frame: { budgets: { wall_time_s: 500 } },
      });
      expect(r.budgets.values.wall_time_s).toBe(500);
      expect(r.budgets.sources.wall_time_s.kind).toBe("frame");
    });

    it("refuses an environment value looser than the deployment file and reports both", () => {
      try {
        resolveConfiguration({
          deployment: { budgets: { wall_time_s: 600 } },
          deploymentOrigin: "deploy.json",
          env: { OPENAI4S_AUTO_WALL_TIME_S: "700" },
        });
        expect.unreachable();
      } catch (error) {
        expect(error).toMatchObject({
          code: "ASP_ROLLOUT_BUDGET_LOOSENED",
          data: {
            key: "OPENAI4S_AUTO_WALL_TIME_S",
            source: "env",
            limit: "wall_time_s",
            attempted: 700,
            inForce: 600,
            inForceSource: { kind: "deployment", key: "budgets.wall_time_s", origin: "deploy.json" },
          },
        });
      }
    });

    it("refuses a project value looser than the frozen ceiling even with no deployment value", () => {
      expect(() => resolveConfiguration({ project: { budgets: { max_review_rounds: 3 } } })).toThrowWithCode(
        "ASP_ROLLOUT_BUDGET_LOOSENED",
      );
    });
  });

  describe("AM.budgets.3 when the Guardian window size is set", () => {
    // contract: the rolling circuit window stays fixed at 50.
    it("accepts exactly 50", () => {
      const r = resolveConfiguration({ env: { OPENAI4S_AUTO_GUARDIAN_WINDOW_SIZE: "50" } });
      expect(r.budgets.values.guardian_window_size).toBe(GUARDIAN_WINDOW_SIZE);
    });

    it.each([["49"], ["10"], ["51"], ["100"]])("refuses %s from the environment", (raw) => {
      expect(() => resolveConfiguration({ env: { OPENAI4S_AUTO_GUARDIAN_WINDOW_SIZE: raw } })).toThrowWithCode(
        "ASP_ROLLOUT_WINDOW_FIXED",
      );
    });

    it.each(["deployment", "project", "frame"] as const)("refuses 40 from the %s configuration", (scope) => {
      expect(() => resolveConfiguration({ [scope]: { budgets: { guardian_window_size: 40 } } })).toThrowWithCode(
        "ASP_ROLLOUT_WINDOW_FIXED",
      );
    });
  });

  describe("when an alias prefix is configured", () => {
    it("reads the budget alias and refuses a disagreeing pair", () => {
      const r = resolveConfiguration({ env: { ASP_AUTO_WALL_TIME_S: "100" }, aliasPrefix: "ASP_" });
      expect(r.budgets.values.wall_time_s).toBe(100);
      expect(r.budgets.sources.wall_time_s.key).toBe("ASP_AUTO_WALL_TIME_S");
      expect(() =>
        resolveConfiguration({
          env: { ASP_AUTO_WALL_TIME_S: "100", OPENAI4S_AUTO_WALL_TIME_S: "200" },
          aliasPrefix: "ASP_",
        }),
      ).toThrowWithCode("ASP_ROLLOUT_ALIAS_CONFLICT");
    });
  });
});

describe("tightenBudgets", () => {
  describe("when given an unknown limit", () => {
    it("throws ASP_ROLLOUT_UNKNOWN_KEY", () => {
      expect(() =>
        tightenBudgets(defaultBudgets(), { max_cost_usd: 1 } as never, sourceOf("frame", "budgets.max_cost_usd")),
      ).toThrowWithCode("ASP_ROLLOUT_UNKNOWN_KEY");
    });
  });

  describe("when tightening", () => {
    it("does not change its input", () => {
      const base = defaultBudgets();
      const next = tightenBudgets(base, { max_extra_cells: 5 }, sourceOf("frame"));
      expect(base.values.max_extra_cells).toBe(30);
      expect(next.values.max_extra_cells).toBe(5);
    });
  });
});

describe("BudgetMeter", () => {
  const CONSUMABLE = BUDGET_LIMITS.filter((l): l is ConsumableBudget => l !== "guardian_window_size");

  describe("when every owning stage is off", () => {
    // contract: a component consumes its budget only when that component's rollout stage is enabled.
    it.each(CONSUMABLE.map((l) => [l]))("AM.budgets.4 %s records nothing and never refuses", (limit) => {
      const others = STAGE_FLAGS.filter((s) => !BUDGET_TABLE[limit].owners.includes(s));
      const meter = createBudgetMeter({
        budgets: DEFAULT_BUDGETS,
        flags: createStageFlags(others),
        initialTurnTokens: 100,
      });
      for (let i = 0; i < 5; i++) {
        expect(meter.admit(limit, 1_000_000)).toEqual({ admitted: true, active: false, limit });
      }
      expect(meter.consumed(limit)).toBe(0);
      expect(meter.exhausted(limit)).toBe(false);
      expect(meter.snapshot()).toEqual({});
    });
  });

  describe("when an owning stage is on", () => {
    it.each(CONSUMABLE.map((l) => [l]))("AM.budgets.5 %s admits up to its ceiling and then refuses", (limit) => {
      const [owner] = BUDGET_TABLE[limit].owners;
      if (owner === undefined) throw new Error("no owner");
      const meter = createBudgetMeter({
        budgets: DEFAULT_BUDGETS,
        flags: createStageFlags([owner]),
        initialTurnTokens: 100,
      });
      const ceiling = meter.ceiling(limit);
      expect(meter.admit(limit, ceiling)).toMatchObject({ admitted: true, active: true, consumed: ceiling, ceiling });
      expect(meter.exhausted(limit)).toBe(true);
      expect(meter.admit(limit, 1)).toEqual({
        admitted: false,
        active: true,
        limit,
        consumed: ceiling,
        ceiling,
        reason: "budget_exhausted",
      });
      expect(meter.consumed(limit)).toBe(ceiling);
    });

    it("counts any one of several owners", () => {
      const meter = createBudgetMeter({
        budgets: DEFAULT_BUDGETS,
        flags: createStageFlags(["stage3_scientific_review_shadow"]),
      });
      expect(meter.isActive("max_review_rounds")).toBe(true);
      expect(meter.isActive("max_repair_rounds")).toBe(false);
    });
  });

  describe("when restored from persisted counters", () => {
    // contract: no limit silently replenishes itself on reopen.
    it("AM.budgets.6 keeps the consumed count", () => {
      const flags = createStageFlags(["stage5_auto_repair"]);
      const first = createBudgetMeter({ budgets: DEFAULT_BUDGETS, flags });
      first.admit("max_repair_rounds");
      first.admit("max_repair_rounds");
      const reopened = createBudgetMeter({ budgets: DEFAULT_BUDGETS, flags, consumed: first.snapshot() });
      expect(reopened.admit("max_repair_rounds")).toMatchObject({ admitted: false, reason: "budget_exhausted" });
    });
  });

  describe("when consuming tokens", () => {
    it("AM.budgets.1 measures extra tokens against multiplier x initial turn tokens", () => {
      const meter = createBudgetMeter({
        budgets: { ...DEFAULT_BUDGETS, extra_token_multiplier: 1.5 },
        flags: createStageFlags(["stage4_review_completion_gate"]),
        initialTurnTokens: 1000,
      });
      expect(meter.ceiling("extra_token_multiplier")).toBe(1500);
      expect(meter.admit("extra_token_multiplier", 1500).admitted).toBe(true);
      expect(meter.admit("extra_token_multiplier", 1).admitted).toBe(false);
    });

    it("requires initialTurnTokens once the budget is active", () => {
      const meter = createBudgetMeter({ budgets: DEFAULT_BUDGETS, flags: createStageFlags(["stage5_auto_repair"]) });
      expect(() => meter.admit("extra_token_multiplier", 10)).toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
    });
  });

  describe("when the amount is invalid", () => {
    it.each([[-1], [Number.NaN], [Infinity]])("refuses %d", (amount) => {
      const meter = createBudgetMeter({ budgets: DEFAULT_BUDGETS, flags: createStageFlags([]) });
      expect(() => meter.admit("max_extra_cells", amount)).toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
    });
  });
});
