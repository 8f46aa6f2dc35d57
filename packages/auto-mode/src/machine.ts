import type { AutoEventType, StageFlag } from "@asp/contracts";
import type { StepRecord } from "./durable.js";
import { AutoModeError } from "./errors.js";

/**
 * The durable phase an Auto Run is in, as its committed facts prove it:
 * - `absent`: nothing committed;
 * - `started`: `auto_run_started` committed, the Engine may propose (no candidate yet);
 * - `acting`: an action's admission committed and its result has not (it may be running);
 * - `refused`: a refusal (or the Engine's exhausted turns) committed: only the terminal may follow;
 * - `candidate`: the latest candidate committed, no Reviewer attempt in flight;
 * - `reviewing`: a Reviewer attempt started and has not completed;
 * - `terminal`: the terminal committed; nothing may follow.
 */
export type RunPhase = "absent" | "started" | "acting" | "refused" | "candidate" | "reviewing" | "terminal";

/** What moves the machine: one of the seven canonical events, or a committed mediated step. */
export type MachineInput = AutoEventType | `step:${StepRecord["phase"]}`;

/**
 * One row of the run machine: in phase `from`, the committed input `on` moves the run to `to`,
 * only when `entry` (the contract's sole entry condition, as this machine checks it) holds.
 * `module` is the stage module that adds the row; `test` names the test that covers it.
 */
export interface MachineTransition {
  readonly module: "storage" | "engine" | "actions" | "candidate" | "review" | "terminal";
  /** The stage whose module adds the row (Stage 2 for the run itself). */
  readonly stage: StageFlag;
  readonly from: RunPhase;
  readonly on: MachineInput;
  readonly to: RunPhase;
  readonly entry: string;
  readonly test: string;
}

/** Stage 2's module: the run itself. */
const STORAGE: ReadonlyArray<MachineTransition> = [
  {
    module: "storage",
    stage: "stage2_auto_run_storage",
    from: "absent",
    on: "auto_run_started",
    to: "started",
    entry:
      "no run with this identity exists (a compare-and-swap on the run's head); the selection, budgets, independence and stages freeze with it",
    test: "mediation.test.ts: two writers starting one run identity",
  },
];

/** Auto Mode I: the Engine's turns and the host's mediation of its actions. */
const ENGINE: ReadonlyArray<MachineTransition> = [
  {
    module: "engine",
    stage: "stage2_auto_run_storage",
    from: "started",
    on: "step:turn",
    to: "started",
    entry:
      "a model turn ended; its tokens are recorded in the ledger (the initial turn's) before the next step is admitted",
    test: "mediation.test.ts: the producing run is the initial turn",
  },
  {
    module: "engine",
    stage: "stage2_auto_run_storage",
    from: "started",
    on: "step:max_turns",
    to: "refused",
    entry: "the Engine reported its own turn limit: only budget_exhausted(engine_turns) may follow",
    test: "runner.test.ts: max-turn exhaustion",
  },
  {
    module: "actions",
    stage: "stage2_auto_run_storage",
    from: "started",
    on: "step:admitted",
    to: "acting",
    entry:
      "the canonical action passed the ledger (wall time, tokens, circuits, cells) and deterministic policy allowed it; nothing has run",
    test: "mediation.test.ts: a read and a write run through the host's adapters",
  },
  {
    module: "actions",
    stage: "stage2_auto_run_storage",
    from: "acting",
    on: "step:executed",
    to: "started",
    entry:
      "the result of exactly the admitted action (same ordinal and digest): a result is accepted only for an admitted action",
    test: "mediation.test.ts: a read and a write run through the host's adapters",
  },
  {
    module: "actions",
    stage: "stage2_auto_run_storage",
    from: "started",
    on: "step:refused",
    to: "refused",
    entry:
      "an unknown tool, an uncanonicalizable target, a deny, an ask without a channel, a spent budget or an open circuit refused the unexecuted action; its audit committed",
    test: "mediation.test.ts: is refused, its audit committed, nothing executed",
  },
  {
    module: "actions",
    stage: "stage2_auto_run_storage",
    from: "acting",
    on: "step:refused",
    to: "refused",
    entry: "the host's adapter found a path or sandbox escape while running the admitted action (nothing escaped)",
    test: "mediation.test.ts: a link planted in the workspace is never followed",
  },
];

/** The candidate: a completion frozen with its snapshot. */
const CANDIDATE: ReadonlyArray<MachineTransition> = [
  {
    module: "candidate",
    stage: "stage2_auto_run_storage",
    from: "started",
    on: "candidate_ready",
    to: "candidate",
    entry:
      "a valid completion, its immutable Evidence Snapshot, payload and Artifact versions committed in one transition",
    test: "runner.test.ts: AM.states.2",
  },
];

/** Stages 3 and 4: review attempts. */
const REVIEW: ReadonlyArray<MachineTransition> = [
  {
    module: "review",
    stage: "stage3_scientific_review_shadow",
    from: "candidate",
    on: "auto_audit_started",
    to: "reviewing",
    entry:
      "an eligible Reviewer under the frozen independence policy; the attempt admitted by the ledger (at most two)",
    test: "runner.test.ts: AM.states.8",
  },
  {
    module: "review",
    stage: "stage3_scientific_review_shadow",
    from: "reviewing",
    on: "auto_audit_completed",
    to: "candidate",
    entry: "the attempt's assessment re-hashes and names the same audit request",
    test: "runner.test.ts: AM.states.8",
  },
];

/** Terminals: the committed reason chooses the row. */
const TERMINAL: ReadonlyArray<MachineTransition> = [
  {
    module: "terminal",
    stage: "stage2_auto_run_storage",
    from: "started",
    on: "auto_run_terminal",
    to: "terminal",
    entry:
      "a terminal reason outside the five states (agent_failed, user_cancelled, budget_exhausted, loop_detected, safety_boundary), proved by the committed ledger where it names a limit",
    test: "mediation.test.ts: budgets bound a run",
  },
  {
    module: "terminal",
    stage: "stage2_auto_run_storage",
    from: "refused",
    on: "auto_run_terminal",
    to: "terminal",
    entry:
      "the terminal reason the committed refusal named (policy_requires_explicit_setup, safety_boundary, loop_detected, budget_exhausted)",
    test: "mediation.test.ts: is refused, its audit committed, nothing executed",
  },
  {
    module: "terminal",
    stage: "stage2_auto_run_storage",
    from: "acting",
    on: "auto_run_terminal",
    to: "terminal",
    entry: "safety_boundary only: the admitted action's result could not commit",
    test: "mediation.test.ts: a refusal audit that cannot commit",
  },
  {
    module: "terminal",
    stage: "stage4_review_completion_gate",
    from: "candidate",
    on: "auto_run_terminal",
    to: "terminal",
    entry:
      "verified / completed_with_issues / review_unavailable by the gating review's records, or a reason outside the five states",
    test: "runner.test.ts: AM.states.3",
  },
  {
    module: "terminal",
    stage: "stage4_review_completion_gate",
    from: "reviewing",
    on: "auto_run_terminal",
    to: "terminal",
    entry: "safety_boundary only: an attempt's completion could not commit, or the Reviewer's identity drifted",
    test: "runner.test.ts: AM.states.9",
  },
];

/**
 * The run machine: every legal transition, composed from its stage modules. The runner checks each
 * commit against it before writing, and the projection replays the committed facts through it
 * ({@link replayRun}); a committed history it does not accept projects the safety boundary.
 */
export const RUN_MACHINE: ReadonlyArray<MachineTransition> = Object.freeze(
  [...STORAGE, ...ENGINE, ...CANDIDATE, ...REVIEW, ...TERMINAL].map((t) => Object.freeze(t)),
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
