import { BUDGET_LIMITS, type BudgetLimit, STAGE_FLAGS, validate } from "@asp/contracts";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { stageFlagsForTests } from "../src/flags.js";
import {
  BUDGET_TABLE,
  BudgetMeter,
  type Clock,
  COUNTER_LIMITS,
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

const RUN = { root_frame_id: "frame-1", branch_id: "main", turn_id: "turn-1", execution_id: "exec-1" };
const T0 = Date.parse("2026-12-01T10:00:00.000Z");
const D = (n: number): string => `sha256:${n.toString(16).padStart(64, "0")}`;

/** A clock the test moves by hand (no wall time in tests). */
function manualClock(start = T0): Clock & { advance(seconds: number): void } {
  let now = start;
  return {
    now: () => now,
    advance: (seconds) => {
      now += seconds * 1000;
    },
  };
}

// These tests drive the meter's counting directly through the package-internal stageFlagsForTests
// (not exported from index.ts), which turns on any stage without the public flag checks.
function meterWith(stages: Parameters<typeof stageFlagsForTests>[0], budgets = DEFAULT_BUDGETS, clock = manualClock()) {
  return {
    clock,
    meter: createBudgetMeter({ run: RUN, budgets, flags: stageFlagsForTests(stages), clock, initialTurnTokens: 1000 }),
  };
}

describe("BudgetMeter", () => {
  describe("AM.budgets.4 when every owning stage is off", () => {
    // contract: a component consumes its budget only when that component's rollout stage is enabled.
    it("records nothing and never refuses", () => {
      const { meter, clock } = meterWith([]);
      const before = meter.toJSON();
      clock.advance(10_000);
      for (let i = 0; i < 20; i++) {
        for (const check of [
          meter.admitReviewAttempt("c"),
          meter.admitRepairRound(),
          meter.admitRepairTurn(),
          meter.admitCells(100),
          meter.admitTokens(1_000_000),
          meter.checkWallTime(),
          meter.admitAction(D(1)),
          meter.recordAction(D(1), { durableDelta: false }),
          meter.recordTurn({ progress: false }),
          meter.recordFindings([D(2)]),
          meter.askGuardian(D(3)),
          meter.recordGuardianDecision("deny"),
        ]) {
          expect(check).toMatchObject({ admitted: true, active: false });
        }
      }
      expect(meter.toJSON()).toEqual(before);
    });
  });

  describe("AM.budgets.5 when a cumulative budget is active", () => {
    it.each([
      ["extra_cells", ["stage5_auto_repair"], (m: BudgetMeter, n: number) => m.admitCells(n), 30],
      ["extra_tokens", ["stage4_review_completion_gate"], (m: BudgetMeter, n: number) => m.admitTokens(n), 1500],
    ] as const)("%s admits up to its ceiling and then refuses", (counter, stages, admit, ceiling) => {
      const { meter } = meterWith([...stages]);
      expect(meter.ceiling(counter)).toBe(ceiling);
      expect(admit(meter, ceiling)).toMatchObject({ admitted: true, active: true });
      expect(admit(meter, 1)).toEqual({
        admitted: false,
        active: true,
        limit: COUNTER_LIMITS[counter],
        reason: "budget_exhausted",
        used: ceiling,
        ceiling,
      });
      expect(meter.used(counter)).toBe(ceiling);
    });

    it("requires initialTurnTokens to admit tokens", () => {
      const flags = stageFlagsForTests(["stage5_auto_repair"]);
      const meter = createBudgetMeter({ run: RUN, budgets: DEFAULT_BUDGETS, flags, clock: manualClock() });
      expect(() => meter.admitTokens(10)).toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
    });

    it.each([[-1], [Number.NaN], [Infinity], [1.5]])("refuses the amount %d", (amount) => {
      const { meter } = meterWith(["stage5_auto_repair"]);
      expect(() => meter.admitCells(amount)).toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
    });
  });

  describe("AM.budgets.5 when a limit is per candidate or per round", () => {
    it("Reviewer attempts reset for a new candidate, not for the same one", () => {
      const { meter } = meterWith(["stage4_review_completion_gate"]);
      expect(meter.admitReviewAttempt("cand-1").admitted).toBe(true);
      expect(meter.admitReviewAttempt("cand-1").admitted).toBe(true);
      expect(meter.admitReviewAttempt("cand-1")).toMatchObject({ admitted: false, limit: "max_review_rounds" });
      expect(meter.admitReviewAttempt("cand-2").admitted).toBe(true);
      expect(meter.toJSON().scope.candidate_id).toBe("cand-2");
    });

    it("Repair turns reset each round; rounds are cumulative (property)", () => {
      fc.assert(
        fc.property(
          fc.array(fc.oneof(fc.constant("round" as const), fc.constant("turn" as const)), { maxLength: 80 }),
          fc.integer({ min: 1, max: 12 }),
          fc.integer({ min: 1, max: 2 }),
          (ops, turns, rounds) => {
            const budgets = { ...DEFAULT_BUDGETS, repair_turns_per_round: turns, max_repair_rounds: rounds };
            const { meter } = meterWith(["stage5_auto_repair"], budgets);
            let round = 0;
            let inRound = 0;
            for (const op of ops) {
              if (op === "round") {
                const ok = round < rounds;
                expect(meter.admitRepairRound().admitted).toBe(ok);
                if (ok) {
                  round++;
                  inRound = 0;
                }
              } else {
                const ok = inRound < turns;
                expect(meter.admitRepairTurn().admitted).toBe(ok);
                if (ok) inRound++;
              }
              expect(meter.used("repair_turns")).toBe(inRound);
              expect(meter.used("repair_rounds")).toBe(round);
            }
          },
        ),
      );
    });
  });

  describe("AM.budgets.5 when a limit is a deadline", () => {
    it("wall time compares the clock against started_at + wall_time_s, whatever was consumed", () => {
      const { meter, clock } = meterWith(["stage4_review_completion_gate"], { ...DEFAULT_BUDGETS, wall_time_s: 600 });
      expect(meter.checkWallTime()).toMatchObject({ admitted: true, active: true });
      clock.advance(599);
      expect(meter.admitAction().admitted).toBe(true);
      clock.advance(1);
      expect(meter.checkWallTime()).toMatchObject({
        admitted: false,
        reason: "budget_exhausted",
        limit: "wall_time_s",
        used: 600,
      });
      expect(meter.admitAction(D(1))).toMatchObject({ admitted: false, limit: "wall_time_s" });
    });

    it("the deadline survives a reopen: restoring never restarts the clock", () => {
      const { meter, clock } = meterWith(["stage5_auto_repair"]);
      clock.advance(899);
      const reopened = BudgetMeter.fromLedger(meter.toJSON(), {
        flags: stageFlagsForTests(["stage5_auto_repair"]),
        clock,
      });
      clock.advance(1);
      expect(reopened.checkWallTime()).toMatchObject({ admitted: false, limit: "wall_time_s" });
    });

    it("a Guardian decision after guardian_timeout_s fails closed and is not counted", () => {
      const { meter, clock } = meterWith(["stage7_guardian_enforcement"]);
      meter.askGuardian(D(9));
      clock.advance(89);
      expect(meter.checkGuardianDeadline().admitted).toBe(true);
      clock.advance(1);
      expect(meter.checkGuardianDeadline()).toMatchObject({ admitted: false, reason: "guardian_timeout" });
      expect(meter.recordGuardianDecision("allow")).toMatchObject({ admitted: false, reason: "guardian_timeout" });
      expect(meter.toJSON().guardian_window).toEqual([]);
      // The next question has its own deadline.
      meter.askGuardian(D(9));
      expect(meter.recordGuardianDecision("allow")).toMatchObject({ admitted: true });
    });
  });

  describe("AM.budgets.8 when counting loops", () => {
    it("repeated findings count per fingerprint: another finding's repeats do not add up", () => {
      const { meter } = meterWith(["stage8_loop_circuits"]); // repeated_finding_limit 2
      expect(meter.recordFindings([D(1), D(2)]).admitted).toBe(true); // first sighting of both
      expect(meter.recordFindings([D(1)]).admitted).toBe(true); // D(1) repeated once
      expect(meter.recordFindings([D(2)]).admitted).toBe(true); // D(2) repeated once: still 1 each
      expect(meter.circuit("no_progress")).toBe("closed");
      expect(meter.recordFindings([D(1)])).toMatchObject({ admitted: false, reason: "loop_detected", used: 2 });
      expect(meter.circuit("no_progress")).toBe("open");
    });

    it("same action without a durable delta counts per action digest and resets on a delta", () => {
      const { meter } = meterWith(["stage8_loop_circuits"]); // same_action_no_delta_limit 3
      meter.recordAction(D(1), { durableDelta: false });
      meter.recordAction(D(1), { durableDelta: false });
      meter.recordAction(D(2), { durableDelta: false });
      meter.recordAction(D(2), { durableDelta: false });
      meter.recordAction(D(1), { durableDelta: true }); // a delta resets D(1)
      meter.recordAction(D(1), { durableDelta: false });
      meter.recordAction(D(1), { durableDelta: false });
      expect(meter.circuit("no_progress")).toBe("closed");
      expect(meter.admitAction(D(2)).admitted).toBe(true);
      expect(meter.recordAction(D(2), { durableDelta: false })).toMatchObject({
        admitted: false,
        reason: "loop_detected",
      });
      expect(meter.admitAction(D(3))).toMatchObject({ admitted: false, reason: "loop_detected" });
    });

    it("a Repair plan the host denied opens the circuit at its second denial; another plan counts apart; tightening below 2 opens at the first", () => {
      const { meter } = meterWith(["stage8_loop_circuits"]);
      expect(meter.recordDeniedPlan(D(7))).toMatchObject({ admitted: true, active: true });
      expect(meter.recordDeniedPlan(D(8)).admitted).toBe(true);
      expect(meter.circuit("no_progress")).toBe("closed");
      expect(meter.recordDeniedPlan(D(7))).toMatchObject({
        admitted: false,
        reason: "loop_detected",
        used: 2,
        ceiling: 2,
      });
      expect(meter.circuit("no_progress")).toBe("open");
      expect(meter.toJSON().same_action_no_delta[D(7)]).toBe(2);
      const tight = meterWith(["stage8_loop_circuits"], { ...DEFAULT_BUDGETS, same_action_no_delta_limit: 1 }).meter;
      expect(tight.recordDeniedPlan(D(7))).toMatchObject({ admitted: false, used: 1, ceiling: 1 });
      // Without the loop circuits nothing is recorded and nothing refuses.
      const off = meterWith([]).meter;
      expect(off.recordDeniedPlan(D(7))).toMatchObject({ admitted: true, active: false });
      expect(off.recordDeniedPlan(D(7)).admitted).toBe(true);
      expect(() => meter.recordDeniedPlan("plan-1")).toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
    });

    it("turns without progress reset on progress (property)", () => {
      fc.assert(
        fc.property(fc.array(fc.boolean(), { maxLength: 60 }), (progress) => {
          const { meter } = meterWith(["stage8_loop_circuits"]);
          let run = 0;
          let opened = false;
          for (const p of progress) {
            run = p ? 0 : run + 1;
            if (run >= 5) opened = true;
            const check = meter.recordTurn({ progress: p });
            expect(check.admitted).toBe(run < 5);
            expect(meter.used("no_progress_turns")).toBe(run);
            // The circuit, once open, stays open even after progress.
            expect(meter.circuit("no_progress")).toBe(opened ? "open" : "closed");
          }
        }),
      );
    });
  });

  describe("AM.budgets.9 when the Guardian decides", () => {
    it("AM.budgets.3 consecutive denials reset on an allow; denials count over the last 50 decisions (property)", () => {
      fc.assert(
        fc.property(fc.array(fc.constantFrom("allow" as const, "deny" as const), { maxLength: 200 }), (decisions) => {
          const { meter } = meterWith(["stage7_guardian_enforcement"]);
          const history: string[] = [];
          let consecutive = 0;
          let opened = false;
          for (const d of decisions) {
            history.push(d);
            consecutive = d === "allow" ? 0 : consecutive + 1;
            const inWindow = history.slice(-50).filter((x) => x === "deny").length;
            if (consecutive >= 3 || inWindow >= 10) opened = true;
            meter.askGuardian(D(7));
            expect(meter.recordGuardianDecision(d).admitted).toBe(!opened);
            expect(meter.used("guardian_consecutive_denials")).toBe(consecutive);
            expect(meter.toJSON().guardian_window).toEqual(history.slice(-50));
            expect(meter.circuit("guardian_denial")).toBe(opened ? "open" : "closed");
          }
        }),
      );
    });

    it("ten denials spread over the window open the circuit; the same denials spread wider do not", () => {
      const spread = (gap: number) => {
        const { meter } = meterWith(["stage7_guardian_enforcement"]);
        let last = meter.recordGuardianDecision("allow");
        for (let i = 0; i < 10; i++) {
          last = meter.recordGuardianDecision("deny");
          for (let j = 0; j < gap; j++) meter.recordGuardianDecision("allow");
        }
        return { last, circuit: meter.circuit("guardian_denial") };
      };
      expect(spread(4)).toMatchObject({ circuit: "open", last: { limit: "guardian_window_denial_limit" } });
      expect(spread(5).circuit).toBe("closed"); // 10 denials over 60 decisions: at most 9 in any 50
    });
  });

  describe("AM.budgets.6 when persisted and reopened", () => {
    it("the ledger uses the schema's counter names and round-trips exactly (property)", () => {
      const op = fc.oneof(
        fc.constant((m: BudgetMeter) => m.admitReviewAttempt("cand-1")),
        fc.constant((m: BudgetMeter) => m.admitReviewAttempt("cand-2")),
        fc.constant((m: BudgetMeter) => m.admitRepairRound()),
        fc.constant((m: BudgetMeter) => m.admitRepairTurn()),
        fc.integer({ min: 0, max: 10 }).map((n) => (m: BudgetMeter) => m.admitCells(n)),
        fc.integer({ min: 0, max: 500 }).map((n) => (m: BudgetMeter) => m.admitTokens(n)),
        fc.boolean().map((p) => (m: BudgetMeter) => m.recordTurn({ progress: p })),
        fc.integer({ min: 1, max: 3 }).map((n) => (m: BudgetMeter) => m.recordFindings([D(n)])),
        fc.tuple(fc.integer({ min: 1, max: 3 }), fc.boolean()).map(
          ([n, delta]) =>
            (m: BudgetMeter) =>
              m.recordAction(D(n), { durableDelta: delta }),
        ),
        fc.constantFrom("allow" as const, "deny" as const).map((d) => (m: BudgetMeter) => m.recordGuardianDecision(d)),
        fc.constant((m: BudgetMeter) => m.askGuardian(D(5))),
      );
      const flags = stageFlagsForTests(STAGE_FLAGS);
      fc.assert(
        fc.property(fc.array(op, { maxLength: 60 }), fc.array(op, { maxLength: 20 }), (before, after) => {
          const clock = manualClock();
          const a = createBudgetMeter({ run: RUN, budgets: DEFAULT_BUDGETS, flags, clock, initialTurnTokens: 1000 });
          for (const f of before) f(a);
          const ledger = a.toJSON();
          expect(validate("budget-ledger", ledger).ok).toBe(true);
          const b = BudgetMeter.fromLedger(JSON.parse(JSON.stringify(ledger)), { flags, clock });
          expect(b.toJSON()).toEqual(ledger);
          // The reopened meter behaves exactly as the original would have.
          for (const f of after) expect(f(b)).toEqual(f(a));
          expect(b.toJSON()).toEqual(a.toJSON());
        }),
        { numRuns: 60 },
      );
    });

    it("no limit replenishes on reopen", () => {
      const flags = stageFlagsForTests(["stage5_auto_repair"]);
      const { meter, clock } = meterWith(["stage5_auto_repair"]);
      meter.admitRepairRound();
      meter.admitRepairRound();
      const reopened = BudgetMeter.fromLedger(meter.toJSON(), { flags, clock });
      expect(reopened.admitRepairRound()).toMatchObject({ admitted: false, reason: "budget_exhausted" });
    });

    it("a ledger that does not validate is refused, never guessed", () => {
      const { meter, clock } = meterWith(["stage5_auto_repair"]);
      const ledger = meter.toJSON() as unknown as Record<string, Record<string, unknown>>;
      const bad = { ...ledger, consumed: { ...ledger.consumed, repair_rounds: -1 } };
      expect(() => BudgetMeter.fromLedger(bad, { flags: createStageFlags([]), clock })).toThrowWithCode(
        "ASP_ROLLOUT_CORRUPT_RECORD",
      );
      const renamed = { ...ledger, consumed: { ...ledger.consumed, review_rounds: 0 } };
      expect(() => BudgetMeter.fromLedger(renamed, { flags: createStageFlags([]), clock })).toThrowWithCode(
        "ASP_ROLLOUT_CORRUPT_RECORD",
      );
    });
  });
});

describe("BudgetMeter.recordTurnTokens (tokens spent before anyone could refuse them)", () => {
  it("AM.budgets.5 AM.budgets.6: the initial turn's turns build the base; extra turns count against 1.5x of it and are recorded past the ceiling", () => {
    const meter = createBudgetMeter({
      run: RUN,
      budgets: DEFAULT_BUDGETS,
      flags: stageFlagsForTests(["stage4_review_completion_gate"]),
      clock: manualClock(),
    });
    expect(meter.recordTurnTokens(100, "initial")).toMatchObject({ admitted: true, active: true });
    expect(meter.recordTurnTokens(100, "initial")).toMatchObject({ admitted: true });
    expect(meter.toJSON().initial_turn_tokens).toBe(200);
    expect(meter.recordTurnTokens(250, "extra")).toMatchObject({ admitted: true });
    expect(meter.checkTokens()).toMatchObject({ admitted: true });
    expect(meter.recordTurnTokens(100, "extra")).toMatchObject({
      admitted: false,
      reason: "budget_exhausted",
      limit: "extra_token_multiplier",
      used: 350,
      ceiling: 300,
    });
    expect(meter.toJSON().consumed.extra_tokens).toBe(350);
    expect(meter.checkTokens()).toMatchObject({ admitted: false, limit: "extra_token_multiplier" });
    // Restored from its ledger (a reopen), the spent budget stays spent.
    const reopened = BudgetMeter.fromLedger(meter.toJSON(), {
      flags: stageFlagsForTests(["stage4_review_completion_gate"]),
      clock: manualClock(),
    });
    expect(reopened.checkTokens()).toMatchObject({ admitted: false });
  });

  it("AM.budgets.4: records nothing while no owning stage is on", () => {
    const meter = createBudgetMeter({
      run: RUN,
      budgets: DEFAULT_BUDGETS,
      flags: stageFlagsForTests([]),
      clock: manualClock(),
    });
    expect(meter.recordTurnTokens(10_000, "extra")).toMatchObject({ admitted: true, active: false });
    expect(meter.toJSON().consumed.extra_tokens).toBe(0);
  });
});

describe("BudgetMeter.recordAction: ever-new actions without a delta", () => {
  it("AM.budgets.8: 500 distinct action digests without a durable delta open the no-progress circuit (the ledger stays bounded)", () => {
    const meter = createBudgetMeter({
      run: RUN,
      budgets: DEFAULT_BUDGETS,
      flags: stageFlagsForTests(["stage8_loop_circuits"]),
      clock: manualClock(),
    });
    const digestN = (n: number) => `sha256:${n.toString(16).padStart(64, "0")}`;
    for (let n = 0; n < 499; n++) expect(meter.recordAction(digestN(n), { durableDelta: false }).admitted).toBe(true);
    expect(meter.recordAction(digestN(499), { durableDelta: false })).toMatchObject({
      admitted: false,
      reason: "loop_detected",
    });
    expect(meter.circuit("no_progress")).toBe("open");
    expect(Object.keys(meter.toJSON().same_action_no_delta)).toHaveLength(500);
  });
});
