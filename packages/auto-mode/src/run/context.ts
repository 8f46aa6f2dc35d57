import type {
  AutoRun,
  Candidate,
  ExhaustedLimit,
  Finding,
  RunIdentity,
  StopReason,
  TerminalReason,
  UnavailableReason,
} from "@asp/contracts";
import type { BudgetCheck, BudgetMeter } from "@asp/rollout";
import type { AutoEvent, StepAudit, StepRecord, TransitionRecord } from "../durable.js";
import type { ActorIdentity } from "../engine.js";
import type { AutoRunnerOptions, ProvisionalChunk, RunTimers } from "../runner.js";
import type { RunStages } from "../stages.js";

// The runner's side of the run machine: what a stage module's activity may use. An activity does
// its side effect (an Engine turn, an action, a Reviewer attempt, a delivery) and commits its
// outcome as facts through `commit` / `step`, each checked against RUN_MACHINE before it is written.

/**
 * How a run ends, before it is a terminal record: a terminal reason outside the five states, or
 * one of the three review terminals the runner enters (`buildTerminalRecord` turns it into the
 * record).
 */
export type TerminalOutcome =
  | {
      readonly kind: "reason";
      readonly reason: TerminalReason;
      readonly candidateId: string | null;
      readonly limit?: ExhaustedLimit;
    }
  | { readonly kind: "verified"; readonly candidate: Candidate }
  | {
      readonly kind: "issues";
      readonly candidateId: string;
      readonly stop: StopReason;
      readonly unresolved: string[];
      readonly limit?: ExhaustedLimit;
      /** The unresolved findings themselves (what a Repair Run is asked to address). */
      readonly findings?: ReadonlyArray<Finding>;
    }
  | { readonly kind: "unavailable"; readonly candidateId: string; readonly reason: UnavailableReason }
  /**
   * `blocked_by_guardian`: the committed assessment or failure record that stopped the run, and
   * whether the denial circuit opened (`stop_reason=loop_detected`).
   */
  | {
      readonly kind: "guardian";
      readonly recordId: string;
      readonly loop: boolean;
      readonly candidateId: string | null;
    };

/** What `orAbort` returns when the run's signal aborted first. */
export const ABORTED: unique symbol = Symbol("aborted");

/** One run being driven, as its stage modules' activities see it. */
export interface RunContext {
  readonly options: AutoRunnerOptions;
  readonly run: RunIdentity;
  readonly runId: string;
  /** The run record as last committed. */
  readonly record: AutoRun;
  /** The seq of the last run record this writer committed (the head a compare-and-swap expects). */
  readonly lastRunSeq: number | null;
  readonly meter: BudgetMeter;
  readonly producer: ActorIdentity;
  readonly stages: RunStages;
  /** Aborts when the wall time is spent; passed to the Engine and to commands. */
  readonly signal: AbortSignal;
  readonly task: string;
  /** Whether the user's Stop/Cancel (`AutoRunParams.cancel`) aborted. */
  readonly cancelled: boolean;
  now(): string;
  nextEventId(): string;
  /** The next action's ordinal (1, 2, …). */
  nextActionOrdinal(): number;
  /**
   * Commit one transition (records + run record + ledger + event), then notify. Only if the run's
   * state key still has `cas.seq` as its head (default: this writer's last run record; `null`: the
   * run does not exist), or `"unconditional"`.
   *
   * @throws AutoModeError `ASP_AUTO_MODE_ILLEGAL_TRANSITION` when the run machine has no such row.
   * @throws EvidenceError `ASP_EVIDENCE_CONDITION_FAILED` when another writer moved the run's head.
   */
  commit(
    event: AutoEvent,
    records: TransitionRecord[],
    next?: Partial<AutoRun>,
    cas?: { readonly seq: number | null } | "unconditional",
  ): Promise<void>;
  /**
   * Commit one mediated step with the ledger as it stands (checked against the run machine first),
   * with the permission-review audit of its ask when a Guardian was asked (one append).
   */
  step(partial: Partial<StepRecord> & Pick<StepRecord, "phase">, audit?: StepAudit): Promise<StepRecord>;
  /**
   * The exact actions (canonical digests) the Guardian denied recoverably in this run, with the
   * denial's record: the host never asks about one of them again (Stage 7).
   */
  readonly guardianDenials: Map<
    string,
    { readonly record_id: string; readonly audit_id: string; readonly rationale: string }
  >;
  /**
   * The Repair plans (digests of their exact after-states) the host's checks denied in this run,
   * with the Repair Run and receipt that denied them: the same plan is never checked again
   * (ADR 0012 decision 4).
   */
  readonly repairDenials: Map<string, { readonly repair_run_id: string; readonly receipt_id: string | null }>;
  /** The id the next committed step will have (what a Guardian's ask decision id names). */
  nextStepId(): string;
  /** The timers deadlines are armed with (`options.timers`, else the system's). */
  readonly timers: RunTimers;
  /**
   * Commit the terminal the outcome names, on this writer's head (`"unconditional"`: the safety
   * boundary once the head was lost, so the run still ends).
   */
  terminal(outcome: TerminalOutcome, extra?: TransitionRecord[], cas?: "head" | "unconditional"): Promise<void>;
  /** Wait for `work`, unless the run's signal aborts first (an Engine that ignores it never holds the run). */
  orAbort<T>(work: Promise<T>): Promise<T | typeof ABORTED>;
  /**
   * The admission of the next autonomous step (the user's cancel, wall time, tokens, the open
   * circuit); null when admitted.
   */
  admitNext(candidateId: string | null): TerminalOutcome | null;
  /** The outcome a refused budget check gives. */
  refusal(check: Extract<BudgetCheck, { admitted: false }>, candidateId: string | null): TerminalOutcome;
  /** Tell the Stage 4 listener (only under `gate`); its failures are not the run's. */
  provisional(kind: ProvisionalChunk["kind"], text: string, candidateId?: string): void;
}
