import type { AutoEventType, StageFlag } from "@asp/contracts";
import type { StepRecord } from "./durable.js";
import { AutoModeError } from "./errors.js";
import { ACTION_ROWS } from "./modules/actions.js";
import { CANDIDATE_ROWS } from "./modules/candidate.js";
import { ENGINE_ROWS } from "./modules/engine.js";
import { GUARDIAN_ROWS } from "./modules/guardian.js";
import { REPAIR_ROWS } from "./modules/repair.js";
import { REVIEW_ROWS } from "./modules/review.js";
import { STORAGE_ROWS } from "./modules/storage.js";
import { TERMINAL_ROWS } from "./modules/terminal.js";

/**
 * The durable phase an Auto Run is in, as its committed facts prove it:
 * - `absent`: nothing committed;
 * - `started`: `auto_run_started` committed, the Engine may propose (no candidate yet);
 * - `acting`: an action's admission committed and its result has not (it may be running);
 * - `refused`: a refusal (or the Engine's exhausted turns) committed: only the terminal may follow;
 * - `candidate`: the latest candidate committed, no Reviewer attempt in flight;
 * - `reviewing`: a Reviewer attempt started and has not completed;
 * - `repairing`: a Repair Run started from its committed checkpoint (Stage 5) and has not completed;
 * - `repair_acting`: a Repair Agent's admitted action (a read, or a write inside the mutation set)
 *   has not committed its result;
 * - `repaired`: the Repair Run's new candidate committed, its `repair_completed` has not;
 * - `terminal`: the terminal committed; nothing may follow.
 */
export type RunPhase =
  | "absent"
  | "started"
  | "acting"
  | "refused"
  | "candidate"
  | "reviewing"
  | "repairing"
  | "repair_acting"
  | "repaired"
  | "terminal";

/** What moves the machine: one of the seven canonical events, or a committed mediated step. */
export type MachineInput = AutoEventType | `step:${StepRecord["phase"]}`;

/**
 * One row of the run machine: in phase `from`, the committed input `on` moves the run to `to`,
 * only when `entry` (the contract's sole entry condition, as this machine checks it) holds.
 * `module` is the stage module that adds the row; `test` names the test that covers it.
 */
export interface MachineTransition {
  readonly module: "storage" | "engine" | "actions" | "guardian" | "candidate" | "review" | "repair" | "terminal";
  /** The stage whose module adds the row (Stage 2 for the run itself). */
  readonly stage: StageFlag;
  readonly from: RunPhase;
  readonly on: MachineInput;
  readonly to: RunPhase;
  readonly entry: string;
  readonly test: string;
}

/**
 * The run machine: every legal transition, composed from the rows its stage modules add
 * (`src/modules/*`: each module adds its rows, the activity that commits them and the proof the
 * projection replays them with). The runner checks each
 * commit against it before writing, and the projection replays the committed facts through it
 * ({@link replayRun}); a committed history it does not accept projects the safety boundary.
 */
export const RUN_MACHINE: ReadonlyArray<MachineTransition> = Object.freeze(
  [
    ...STORAGE_ROWS,
    ...ENGINE_ROWS,
    ...ACTION_ROWS,
    ...GUARDIAN_ROWS,
    ...CANDIDATE_ROWS,
    ...REVIEW_ROWS,
    ...REPAIR_ROWS,
    ...TERMINAL_ROWS,
  ].map((t) => Object.freeze(t)),
);

/** The row that moves `from` on `on`, or null when the machine has none. Pure. */
export function transitionOf(from: RunPhase, on: MachineInput): MachineTransition | null {
  return RUN_MACHINE.find((t) => t.from === from && t.on === on) ?? null;
}

/**
 * The phase after `on` in `from`.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_ILLEGAL_TRANSITION` when the machine has no such row.
 */
export function nextPhase(from: RunPhase, on: MachineInput): RunPhase {
  const row = transitionOf(from, on);
  if (row === null) {
    throw new AutoModeError("ASP_AUTO_MODE_ILLEGAL_TRANSITION", `no transition from ${from} on ${on}`, {
      data: { from, on },
    });
  }
  return row.to;
}

/** One committed fact as the machine reads it: its seq, and its input (null for a record fact). */
export interface MachineFact {
  readonly seq: number;
  readonly input: MachineInput | null;
}

/** What {@link replayRun} found: the phase the facts prove, each move, and what it refused. */
export interface RunReplay {
  readonly phase: RunPhase;
  readonly trace: ReadonlyArray<{
    readonly seq: number;
    readonly on: MachineInput;
    readonly from: RunPhase;
    readonly to: RunPhase;
  }>;
  readonly violations: ReadonlyArray<string>;
}

/**
 * Replay a run's committed inputs, in seq order, through {@link RUN_MACHINE}. Pure: the projection
 * and (Stage 12) restart recovery are this same replay. An input with no row from the current phase
 * is a violation and leaves the phase where it was.
 */
export function replayRun(facts: ReadonlyArray<MachineFact>): RunReplay {
  let phase: RunPhase = "absent";
  const trace: Array<RunReplay["trace"][number]> = [];
  const violations: string[] = [];
  for (const f of [...facts].sort((a, b) => a.seq - b.seq)) {
    if (f.input === null) continue;
    const row = transitionOf(phase, f.input);
    if (row === null) {
      violations.push(`seq ${f.seq}: ${f.input} is not a transition from ${phase}`);
      continue;
    }
    trace.push({ seq: f.seq, on: f.input, from: phase, to: row.to });
    phase = row.to;
  }
  return { phase, trace, violations };
}
