import { describe, expect, it } from "vitest";
import {
  AUTO_RUN_TERMINAL_STATES,
  checkTerminalRecord,
  STOP_REASONS,
  TERMINAL_REASONS,
  TERMINAL_USER_TRUTH,
  type TerminalRecord,
  terminalUserTruth,
  UNAVAILABLE_REASONS,
  validate,
} from "../src/index.js";
import { VALID } from "./fixtures/valid.js";

// The contract's terminal table, restated independently of the schema: which fields each
// terminal requires and forbids. The schema must accept exactly these combinations.
type Combo = {
  state: string | null;
  terminal_reason: string | null;
  stop_reason: string | null;
  unavailable_reason: string | null;
  candidate_id: string | null;
  unresolved_finding_ids: string[];
  exhausted_limit: string | null;
  guardian_record_id: string | null;
};

function allowed(c: Combo): boolean {
  if ((c.state === null) === (c.terminal_reason === null)) return false;
  const none = (...keys: (keyof Combo)[]) => keys.every((k) => c[k] === null);
  const unresolved = c.unresolved_finding_ids.length;
  switch (c.state) {
    case "verified":
      return (
        none("stop_reason", "unavailable_reason", "exhausted_limit", "guardian_record_id") &&
        c.candidate_id !== null &&
        unresolved === 0
      );
    case "completed_with_issues":
      return (
        c.stop_reason !== null &&
        none("unavailable_reason", "guardian_record_id") &&
        c.candidate_id !== null &&
        unresolved >= 1 &&
        (c.exhausted_limit !== null) === (c.stop_reason === "budget_exhausted")
      );
    case "review_unavailable":
      return (
        none("stop_reason", "exhausted_limit", "guardian_record_id") &&
        c.unavailable_reason !== null &&
        c.candidate_id !== null &&
        unresolved === 0
      );
    case "blocked_by_guardian":
      return (
        (c.stop_reason === null || c.stop_reason === "loop_detected") &&
        none("unavailable_reason", "exhausted_limit") &&
        c.guardian_record_id !== null &&
        unresolved === 0
      );
    default:
      return (
        none("stop_reason", "unavailable_reason", "guardian_record_id") &&
        (c.exhausted_limit !== null) === (c.terminal_reason === "budget_exhausted")
      );
  }
}

const withNull = <T>(xs: readonly T[]): (T | null)[] => [null, ...xs];
const combos: Combo[] = [];
for (const state of withNull(AUTO_RUN_TERMINAL_STATES))
  for (const terminal_reason of withNull(TERMINAL_REASONS))
    for (const stop_reason of withNull(STOP_REASONS))
      for (const unavailable_reason of withNull(UNAVAILABLE_REASONS))
        for (const candidate_id of [null, "cand-1"])
          for (const unresolved_finding_ids of [[], ["f-1", "f-2"]])
            for (const exhausted_limit of [null, "wall_time_s"])
              for (const guardian_record_id of [null, "ga-1"])
                combos.push({
                  state,
                  terminal_reason,
                  stop_reason,
                  unavailable_reason,
                  candidate_id,
                  unresolved_finding_ids,
                  exhausted_limit,
                  guardian_record_id,
                });

// The rest of a record comes from the valid fixture.
const { run, counters } = VALID["terminal-record"];
function record(c: Combo, user_truth?: string): Record<string, unknown> {
  const label =
    user_truth ??
    (c.state === "completed_with_issues"
      ? `Completed · unverified · ${c.unresolved_finding_ids.length} unresolved issues`
      : TERMINAL_USER_TRUTH[(c.state ?? c.terminal_reason ?? "verified") as keyof typeof TERMINAL_USER_TRUTH]);
  return { run, ...c, counters, user_truth: label, event_id: "evt-1", committed_at: "2026-12-01T10:00:00Z" };
}

describe("TerminalRecordSchema", () => {
  describe("AM.states.12 AM.terminals.1 when given every combination of state, reason and fields", () => {
    it("AM.states.7 AM.states.8 accepts exactly the combinations the contract allows", () => {
      expect(combos.length).toBe(5 * 9 * 4 * 4 * 2 * 2 * 2 * 2);
      const wrong = combos.filter((c) => validate("terminal-record", record(c)).ok !== allowed(c));
      expect(wrong).toEqual([]);
      // Both sides of the table are exercised.
      expect(combos.filter(allowed).length).toBeGreaterThan(40);
      expect(combos.filter((c) => !allowed(c)).length).toBeGreaterThan(10_000);
    });

    it("refuses a stop reason on verified, and an unavailable reason outside review_unavailable", () => {
      const verified = combos.find((c) => c.state === "verified" && allowed(c)) as Combo;
      expect(validate("terminal-record", record({ ...verified, stop_reason: "review_only" })).ok).toBe(false);
      for (const c of combos.filter((x) => allowed(x) && x.state !== "review_unavailable")) {
        for (const reason of UNAVAILABLE_REASONS) {
          expect(validate("terminal-record", record({ ...c, unavailable_reason: reason })).ok).toBe(false);
        }
      }
    });

    it("AM.states.7 refuses completed_with_issues without its preserved candidate or its stop reason", () => {
      const base: Combo = {
        state: "completed_with_issues",
        terminal_reason: null,
        stop_reason: "review_only",
        unavailable_reason: null,
        candidate_id: "cand-1",
        unresolved_finding_ids: ["f-1"],
        exhausted_limit: null,
        guardian_record_id: null,
      };
      expect(validate("terminal-record", record(base)).ok).toBe(true);
      expect(validate("terminal-record", record({ ...base, candidate_id: null })).ok).toBe(false);
      expect(validate("terminal-record", record({ ...base, stop_reason: null })).ok).toBe(false);
      expect(validate("terminal-record", record({ ...base, unresolved_finding_ids: [] })).ok).toBe(false);
    });
  });

  describe("AM.states.12 when given a user-truth label", () => {
    const allowedCombos = combos.filter(allowed);

    it("accepts only each state's exact label, never free text or another state's label", () => {
      const labels = [...Object.values(TERMINAL_USER_TRUTH), "Verified ✓", "verified", "Completed", ""];
      for (const c of allowedCombos) {
        const own = terminalUserTruth(record(c) as unknown as TerminalRecord);
        for (const label of labels) {
          if (label === own) continue;
          expect(validate("terminal-record", record(c, label)).ok, `${c.state ?? c.terminal_reason}: ${label}`).toBe(
            false,
          );
        }
      }
    });

    it("names N, the number of unresolved findings, in completed_with_issues (checkTerminalRecord)", () => {
      const c = allowedCombos.find((x) => x.state === "completed_with_issues") as Combo;
      const good = record(c) as unknown as TerminalRecord;
      expect(good.user_truth).toBe("Completed · unverified · 2 unresolved issues");
      expect(checkTerminalRecord(good)).toBeNull();
      const lying = record(c, "Completed · unverified · 7 unresolved issues");
      expect(validate("terminal-record", lying).ok).toBe(true);
      expect(checkTerminalRecord(lying as unknown as TerminalRecord)).toEqual({
        expected: "Completed · unverified · 2 unresolved issues",
        actual: "Completed · unverified · 7 unresolved issues",
      });
    });

    it("has a label for every terminal state and every terminal reason", () => {
      expect(Object.keys(TERMINAL_USER_TRUTH).sort()).toEqual(
        [...AUTO_RUN_TERMINAL_STATES, ...TERMINAL_REASONS].sort(),
      );
    });
  });
});
