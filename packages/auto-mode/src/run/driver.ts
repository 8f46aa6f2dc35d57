import type { AutoRun, RunIdentity } from "@asp/contracts";
import { CANDIDATE_USER_TRUTH } from "@asp/contracts";
import { type BudgetCheck, type BudgetMeter, createBudgetMeter, DEFAULT_BUDGETS } from "@asp/rollout";
import {
  type AutoEvent,
  commitStep,
  commitTransition,
  runStateKey,
  type StepAudit,
  type StepRecord,
  stepIdOf,
  type TransitionRecord,
} from "../durable.js";
import type { ActorIdentity } from "../engine.js";
import { type MachineInput, nextPhase, type RunPhase } from "../machine.js";
import { buildTerminalRecord } from "../modules/terminal.js";
import type { AutoRunnerOptions, AutoRunParams, ProvisionalChunk, RunTimers } from "../runner.js";
import { type RunStages, resultReviewStage, runtimeStageFlags } from "../stages.js";
import { ABORTED, type RunContext, type TerminalOutcome } from "./context.js";

const SYSTEM_TIMERS: RunTimers = {
  setTimeout(fn, ms) {
    // Referenced: an Engine whose next() never settles must not let the process end mid-run.
    return setTimeout(fn, ms);
  },
  clearTimeout(handle) {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};

/**
 * One run's state while it is driven: the run machine's phase, the budget meter, the wall-time
 * deadline and the writer's head. Every commit is checked against RUN_MACHINE before it is written;
 * everything here is also committed before it is shown. The stage modules' activities drive it
 * through {@link RunContext}.
 */
export class RunDriver implements RunContext {
  readonly options: AutoRunnerOptions;
  readonly runId: string;
  readonly meter: BudgetMeter;
  readonly producer: ActorIdentity;
  readonly stages: RunStages;
  readonly task: string;
  readonly #clock: { now(): Date };
  readonly #hex: string;
  readonly #abort = new AbortController();
  #events = 0;
  #record: AutoRun;
  #timer: unknown;
  #ordinal = 0;
  #actions = 0;
  #lastRunSeq: number | null = null;
  #phase: RunPhase = "absent";
  readonly guardianDenials = new Map<
    string,
    { readonly record_id: string; readonly audit_id: string; readonly rationale: string }
  >();
  readonly repairDenials = new Map<string, { readonly repair_run_id: string; readonly receipt_id: string | null }>();
  #cancel: AbortSignal | undefined;
  #onCancel: (() => void) | undefined;

  constructor(o: AutoRunnerOptions, params: AutoRunParams, run: RunIdentity, runId: string) {
    this.options = o;
    this.task = typeof params.task === "string" ? params.task : "";
    // The Repair actor is frozen with the other excluded actors: it never reviews or promotes.
    const excluded = [...(o.excludedActors ?? []), ...(o.repair === undefined ? [] : [o.repair.engine.actor])].map(
      (a) => ({ actor_id: a.actor_id, session_id: a.session_id }),
    );
    const flags = runtimeStageFlags(o.flags);
    this.stages = { run, flags, result_review: resultReviewStage(params.selection, flags) };
    this.#clock = o.clock ?? { now: () => new Date() };
    this.runId = runId;
    this.#hex = runId.slice(7);
    this.producer = { ...o.engine.actor };
    this.#cancel = params.cancel;
    const budgets = params.budgets ?? DEFAULT_BUDGETS;
    this.meter = createBudgetMeter({
      run,
      budgets,
      flags: o.flags,
      clock: { now: () => this.#clock.now().getTime() },
    });
    const now = this.now();
    this.#record = {
      $$type: "@asp/AutoRun",
      version: 1,
      run,
      selection: { ...params.selection },
      budgets: { ...budgets },
      independence: {
        policy: params.independencePolicy ?? "distinct_fingerprint",
        producer_fingerprint: this.producer.fingerprint,
        excluded_actors: excluded,
      },
      state: null,
      terminal_reason: null,
      candidate_id: null,
      generation: 0,
      imported: false,
      created_at: now,
      updated_at: now,
    } as AutoRun;
  }

  get run(): RunIdentity {
    return this.#record.run;
  }

  get record(): AutoRun {
    return this.#record;
  }

  get lastRunSeq(): number | null {
    return this.#lastRunSeq;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get cancelled(): boolean {
    return this.#cancel?.aborted === true;
  }

  now(): string {
    return this.#clock.now().toISOString();
  }

  nextEventId(): string {
    this.#events += 1;
    return `event:${this.#hex}:${this.#events}`;
  }

  nextActionOrdinal(): number {
    this.#actions += 1;
    return this.#actions;
  }

  async commit(
    event: AutoEvent,
    records: TransitionRecord[],
    next: Partial<AutoRun> = {},
    cas: { readonly seq: number | null } | "unconditional" = { seq: this.#lastRunSeq },
  ): Promise<void> {
    const record = { ...this.#record, ...next, updated_at: event.committed_at as string } as AutoRun;
    // Every commit is a row of the run machine, checked before anything is written.
    const phase = nextPhase(this.#phase, event.type as MachineInput);
    // And a compare-and-swap on the run's head: this writer's last run record must still be the
    // head, so nothing another writer committed (a newer candidate) is ever written over, and a
    // review of a candidate that is no longer the latest can never become Verified.
    const entries = await commitTransition(
      this.options.store.log,
      this.runId,
      { event, records: [...records, { kind: "run", record }, { kind: "ledger", record: this.meter.toJSON() }] },
      cas === "unconditional" ? {} : { expect: [{ key: runStateKey(this.runId), seq: cas.seq }] },
    );
    this.#lastRunSeq = entries.find((e) => e.kind === "auto.run")?.seq ?? this.#lastRunSeq;
    this.#phase = phase;
    this.#record = record;
    this.options.onEvent?.(event);
  }

  nextStepId(): string {
    return stepIdOf(this.runId, this.#ordinal + 1);
  }

  get timers(): RunTimers {
    return this.options.timers ?? SYSTEM_TIMERS;
  }

  async step(partial: Partial<StepRecord> & Pick<StepRecord, "phase">, audit?: StepAudit): Promise<StepRecord> {
    this.#ordinal += 1;
    const record: StepRecord = {
      run: this.run,
      ordinal: this.#ordinal,
      committed_at: this.now(),
      usage: null,
      progress: null,
      turns: null,
      action: null,
      refusal: null,
      result: null,
      ...partial,
      ledger: this.meter.toJSON(),
    };
    const phase = nextPhase(this.#phase, `step:${record.phase}`);
    await commitStep(this.options.store.log, this.runId, record, audit);
    this.#phase = phase;
    this.options.onStep?.(record);
    return record;
  }

  /** Stage 2's activity: commit `auto_run_started`, a compare-and-swap on the run not existing. */
  async start(): Promise<void> {
    await this.commit(
      {
        event_id: this.nextEventId(),
        type: "auto_run_started",
        run: this.run,
        committed_at: this.now(),
        selection: this.#record.selection,
        budgets: this.#record.budgets,
      },
      [{ kind: "stages", record: this.stages }],
      {},
      // Run creation is a compare-and-swap: two writers starting one identity, one run.
      { seq: null },
    );
  }

  async terminal(
    outcome: TerminalOutcome,
    extra: TransitionRecord[] = [],
    cas: "head" | "unconditional" = "head",
  ): Promise<void> {
    const eventId = this.nextEventId();
    const at = this.now();
    const terminal = buildTerminalRecord(
      { run: this.run, counters: this.meter.toJSON().consumed, event_id: eventId, committed_at: at },
      outcome,
    );
    await this.commit(
      { event_id: eventId, type: "auto_run_terminal", run: this.run, committed_at: at, terminal },
      [...extra, { kind: "terminal", record: terminal }],
      { state: terminal.state, terminal_reason: terminal.terminal_reason },
      // Like every transition, on this writer's head (Verified: a newer candidate committed by
      // another writer between the check and this append is never superseded). Only the last
      // resort, the safety boundary after the head was lost, is written unconditionally.
      cas === "head" ? { seq: this.#lastRunSeq } : "unconditional",
    );
  }

  provisional(kind: ProvisionalChunk["kind"], text: string, candidateId?: string): void {
    if (this.stages.result_review !== "gate" || this.options.onProvisional === undefined) return;
    try {
      this.options.onProvisional({
        label: "provisional",
        user_truth: CANDIDATE_USER_TRUTH,
        run: this.run,
        kind,
        text,
        ...(candidateId === undefined ? {} : { candidate_id: candidateId }),
      });
    } catch {
      // A notification listener never decides anything.
    }
  }

  refusal(check: Extract<BudgetCheck, { admitted: false }>, candidateId: string | null): TerminalOutcome {
    if (check.reason === "loop_detected") return { kind: "reason", reason: "loop_detected", candidateId };
    return { kind: "reason", reason: "budget_exhausted", candidateId, limit: check.limit };
  }

  admitNext(candidateId: string | null): TerminalOutcome | null {
    // The user's Stop/Cancel comes first: nothing more is admitted once it aborted.
    if (this.cancelled) return { kind: "reason", reason: "user_cancelled", candidateId };
    for (const check of [this.meter.checkWallTime(), this.meter.checkTokens(), this.meter.admitAction()]) {
      if (!check.admitted) return this.refusal(check, candidateId);
    }
    return null;
  }

  /** Arm the user's cancel and the wall-time deadline: when either fires, the run's signal aborts. */
  arm(): void {
    const cancel = this.#cancel;
    if (cancel !== undefined) {
      this.#onCancel = () => this.#abort.abort(new Error("user_cancelled"));
      if (cancel.aborted) this.#onCancel();
      else cancel.addEventListener("abort", this.#onCancel, { once: true });
    }
    this.#armWallTime();
  }

  #armWallTime(): void {
    if (!this.meter.isActive("wall_time_s")) return;
    const timers = this.options.timers ?? SYSTEM_TIMERS;
    const arm = (): void => {
      const started = Date.parse(this.meter.toJSON().started_at);
      const remaining = started + this.#record.budgets.wall_time_s * 1000 - this.#clock.now().getTime();
      this.#timer = timers.setTimeout(
        () => {
          this.#timer = undefined;
          // A timer may fire a little early against the clock: abort only once the clock agrees.
          if (this.meter.checkWallTime().admitted) arm();
          else this.#abort.abort(new Error("wall_time_s"));
        },
        Math.max(1, Math.ceil(remaining)),
      );
    };
    arm();
  }

  /** Disarm the deadline and the cancel listener (the run committed its terminal, or stopped). */
  disarm(): void {
    if (this.#onCancel !== undefined) this.#cancel?.removeEventListener("abort", this.#onCancel);
    this.#onCancel = undefined;
    if (this.#timer !== undefined) (this.options.timers ?? SYSTEM_TIMERS).clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async orAbort<T>(work: Promise<T>): Promise<T | typeof ABORTED> {
    if (this.#abort.signal.aborted) return ABORTED;
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<typeof ABORTED>((resolve) => {
      onAbort = () => resolve(ABORTED);
      this.#abort.signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([work, aborted]);
    } finally {
      if (onAbort !== undefined) this.#abort.signal.removeEventListener("abort", onAbort);
    }
  }
}
