import type {
  ActionResult,
  AttemptOutcome,
  AutoRun,
  Candidate,
  EvidenceSnapshot,
  ExhaustedLimit,
  Finding,
  IndependencePolicy,
  ProposedAction,
  ReviewRun,
  RunIdentity,
  StopReason,
  TerminalReason,
  TerminalRecord,
  UnavailableReason,
} from "@asp/contracts";
import { CANDIDATE_USER_TRUTH, checkTerminalRecord, isMaterialSeverity, terminalUserTruth } from "@asp/contracts";
import {
  canonicalize,
  type Digest,
  digestBytes,
  type EvidenceRef,
  freezeSnapshot,
  type Store,
  toEvidenceSnapshot,
  verifySnapshot,
} from "@asp/evidence";
import {
  type AutoModeSelection,
  type BudgetCheck,
  type BudgetMeter,
  type BudgetSet,
  createBudgetMeter,
  DEFAULT_BUDGETS,
  isBudgetActive,
  type StageFlags,
} from "@asp/rollout";
import {
  type ActionWorkspace,
  type CanonicalAction,
  canonicalizeAction,
  HOST_TOOLS,
  type PermissionClassifier,
} from "./actions.js";
import {
  type Assessment,
  type AuditRequest,
  auditCompletedEvent,
  auditRequestDigest,
  auditStartedEvent,
} from "./audit.js";
import {
  type AutoEvent,
  commitStep,
  commitTransition,
  readRunFacts,
  runStateKey,
  type StepRecord,
  type TransitionRecord,
} from "./durable.js";
import type { ActorIdentity, Engine, EngineStep } from "./engine.js";
import { AutoModeError } from "./errors.js";
import { blocksVerified } from "./findings.js";
import { candidateIdOf, checkRun, findingFingerprint, findingIdOf, reviewRunIdOf, runIdOf } from "./identity.js";
import { type MachineInput, nextPhase, type RunPhase } from "./machine.js";
import { type AutoRunProjection, loadAutoRunProjection } from "./projection.js";
import { type AttemptResult, type ReviewerPort, runAttempt, selectReviewer } from "./review.js";
import { assertBuiltStages, type RunStages, resultReviewStage, runtimeStageFlags } from "./stages.js";

/** Options of {@link createAutoRunner}: the injected ports and the trusted settings. */
export interface AutoRunnerOptions {
  /** The store whose fact log holds every run record (a real level store in production). */
  readonly store: Pick<Store, "log" | "objects">;
  readonly engine: Engine;
  /** Candidate Reviewers, in order of preference; the first eligible one is selected. */
  readonly reviewers: ReadonlyArray<ReviewerPort>;
  readonly flags: StageFlags;
  /** Defaults to the system clock. */
  readonly clock?: { now(): Date };
  /** Per-attempt Reviewer timeout in ms (default 60,000). */
  readonly attemptTimeoutMs?: number;
  /**
   * Repair and promotion actors: never eligible to review, whatever their model. Frozen with the
   * run (`independence.excluded_actors`) and checked again by the projection.
   */
  readonly excludedActors?: ReadonlyArray<Pick<ActorIdentity, "actor_id" | "session_id">>;
  /**
   * The host's tool adapters over the run's scratch workspace. Without one the Engine is offered no
   * tools, and any action it proposes is refused (`policy_requires_explicit_setup`).
   */
  readonly workspace?: ActionWorkspace;
  /**
   * Deterministic permission policy (the host wires `@asp/policy` `classifyAction`). Without one
   * every action classifies `ask`, which has no channel before Stages 6/7: refused.
   */
  readonly permissions?: PermissionClassifier;
  /**
   * Timers the wall-time deadline is armed with (default: the global ones, unref'd). Tests inject
   * them together with `clock`, so a deadline never depends on how busy the machine is.
   */
  readonly timers?: RunTimers;
  /**
   * Deliver the reviewed candidate and return the exact bytes delivered; Verified requires them
   * byte-identical to the reviewed payload. Default: the payload as read back from the store. A
   * delivery that throws may have delivered: the run ends `outcome_unknown`, never Verified.
   */
  readonly deliver?: (candidate: Candidate, payload: Uint8Array) => Promise<Uint8Array>;
  /** Notified with each event after its transition committed (never before, never on failure). */
  readonly onEvent?: (event: AutoEvent) => void;
  /** Notified with each mediated step after it committed (turns, admitted / executed / refused actions). */
  readonly onStep?: (step: StepRecord) => void;
  /**
   * Stage 4 (`gate`) only: hears the Engine's prose as it streams and then the committed
   * candidate, each labelled provisional ({@link ProvisionalChunk}), before any verdict exists.
   * Nothing it hears is Verified; Verified is only ever the committed terminal. A listener that
   * throws is ignored (it is a notification, never part of a transition).
   */
  readonly onProvisional?: (chunk: ProvisionalChunk) => void;
}

/** The timers {@link AutoRunnerOptions.timers} injects. */
export interface RunTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

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
 * What a Stage 4 run streams before its verdict: the Engine's prose as it arrives, then the
 * candidate payload once its `candidate_ready` transition committed. Always provisional.
 */
export interface ProvisionalChunk {
  readonly label: "provisional";
  /** `Candidate · provisional / not verified`: the only truth a provisional chunk may carry. */
  readonly user_truth: typeof CANDIDATE_USER_TRUTH;
  readonly run: RunIdentity;
  /** `prose`: a chunk of the Engine's prose; `candidate`: the committed candidate's payload. */
  readonly kind: "prose" | "candidate";
  readonly text: string;
  /** The committed candidate (on `candidate` chunks only). */
  readonly candidate_id?: string;
}

/** What one Auto Run is started with. */
export interface AutoRunParams {
  readonly run: RunIdentity;
  /** The resolved selection (Stage 2), frozen with the run. */
  readonly selection: AutoModeSelection;
  /** The frozen budget set (default: the contract's ceilings). */
  readonly budgets?: BudgetSet;
  /** The frozen fingerprint rule (default `distinct_fingerprint`). */
  readonly independencePolicy?: IndependencePolicy;
  /** What the agent is asked to do (passed to the Engine). */
  readonly task?: string;
}

/** Runs Auto Runs to a committed state and returns their projection. */
export interface AutoRunner {
  /**
   * Start and drive one Auto Run: engine to candidate, then by the run's frozen stages
   * ({@link resultReviewStage}): `off` stops at the provisional candidate; `shadow` (Stage 3
   * alone) records the review and gates nothing; `gate` (Stage 4) streams provisional, reviews
   * and commits the terminal, Verified only after the compare-and-swap promotion. Returns the
   * projection of what committed.
   *
   * @throws AutoModeError `ASP_AUTO_MODE_STAGE_DISABLED` (stage 2 off; or `auto_fix` without stage
   *   5, ADR 0009), `ASP_AUTO_MODE_STAGE_NOT_BUILT` (a stage this runtime does not implement is on),
   *   `ASP_AUTO_MODE_RUN_EXISTS`, `ASP_AUTO_MODE_INVALID_OPTION`, `ASP_AUTO_MODE_PERSIST_FAILED` when
   *   not even the safety-boundary terminal could commit.
   */
  run(params: AutoRunParams): Promise<AutoRunProjection>;
}

/**
 * How a run ends, before it is a terminal record: a terminal reason outside the five states, or
 * one of the three review terminals the runner enters ({@link buildTerminalRecord} turns it into
 * the record).
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
    }
  | { readonly kind: "unavailable"; readonly candidateId: string; readonly reason: UnavailableReason };

/**
 * Build a terminal record from an outcome, with its exact user truth, checked with
 * `checkTerminalRecord`. Pure.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_RECORD` when the user truth would not check.
 */
export function buildTerminalRecord(
  base: Pick<TerminalRecord, "run" | "counters" | "event_id" | "committed_at">,
  outcome: TerminalOutcome,
): TerminalRecord {
  const fields = {
    state: null,
    terminal_reason: null,
    stop_reason: null,
    unavailable_reason: null,
    candidate_id: null,
    unresolved_finding_ids: [],
    exhausted_limit: null,
    guardian_record_id: null,
  } as Record<string, unknown>;
  if (outcome.kind === "reason") {
    Object.assign(fields, {
      terminal_reason: outcome.reason,
      candidate_id: outcome.candidateId,
      exhausted_limit: outcome.reason === "budget_exhausted" ? (outcome.limit ?? null) : null,
    });
  } else if (outcome.kind === "verified") {
    Object.assign(fields, { state: "verified", candidate_id: outcome.candidate.candidate_id });
  } else if (outcome.kind === "issues") {
    Object.assign(fields, {
      state: "completed_with_issues",
      stop_reason: outcome.stop,
      candidate_id: outcome.candidateId,
      unresolved_finding_ids: outcome.unresolved,
      exhausted_limit: outcome.stop === "budget_exhausted" ? (outcome.limit ?? null) : null,
    });
  } else {
    Object.assign(fields, {
      state: "review_unavailable",
      unavailable_reason: outcome.reason,
      candidate_id: outcome.candidateId,
    });
  }
  const record = { ...base, ...fields } as unknown as TerminalRecord;
  const full = { ...record, user_truth: terminalUserTruth(record) } as TerminalRecord;
  const problem = checkTerminalRecord(full);
  if (problem !== null) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_RECORD", "terminal user truth does not check", {
      data: { ...problem },
    });
  }
  return full;
}

const utf8 = new TextEncoder();
type Completion = Extract<EngineStep, { kind: "completion" }>;
const ABORTED = Symbol("aborted");
/** What a tool result may carry back to the model (64 KiB). */
const clip = (text: string): string => (text.length > 65_536 ? `${text.slice(0, 65_536)}\n[clipped]` : text);
const same = (a: unknown, b: unknown): boolean => canonicalize(a) === canonicalize(b);

/** One run's state while it is driven (everything here is also committed before it is shown). */
class RunDriver {
  readonly #o: AutoRunnerOptions;
  readonly #clock: { now(): Date };
  readonly #runId: string;
  readonly #hex: string;
  #events = 0;
  #record: AutoRun;
  readonly #meter: BudgetMeter;
  readonly #producer: ActorIdentity;
  readonly #excluded: ReadonlyArray<{ actor_id: string; session_id: string }>;
  readonly #abort = new AbortController();
  readonly #task: string;
  #timer: unknown;
  #ordinal = 0;
  #actions = 0;
  /** The seq of the last run record this writer committed (the head a compare-and-swap expects). */
  #lastRunSeq: number | null = null;
  /** The run machine's phase after the last commit ({@link RUN_MACHINE}). */
  #phase: RunPhase = "absent";
  readonly stages: RunStages;

  constructor(o: AutoRunnerOptions, params: AutoRunParams, run: RunIdentity, runId: string) {
    this.#o = o;
    this.#task = typeof params.task === "string" ? params.task : "";
    this.#excluded = (o.excludedActors ?? []).map((a) => ({ actor_id: a.actor_id, session_id: a.session_id }));
    const flags = runtimeStageFlags(o.flags);
    this.stages = { run, flags, result_review: resultReviewStage(params.selection, flags) };
    this.#clock = o.clock ?? { now: () => new Date() };
    this.#runId = runId;
    this.#hex = runId.slice(7);
    this.#producer = { ...o.engine.actor };
    const budgets = params.budgets ?? DEFAULT_BUDGETS;
    this.#meter = createBudgetMeter({
      run,
      budgets,
      flags: o.flags,
      clock: { now: () => this.#clock.now().getTime() },
    });
    const now = this.#now();
    this.#record = {
      $$type: "@asp/AutoRun",
      version: 1,
      run,
      selection: { ...params.selection },
      budgets: { ...budgets },
      independence: {
        policy: params.independencePolicy ?? "distinct_fingerprint",
        producer_fingerprint: this.#producer.fingerprint,
        excluded_actors: [...this.#excluded],
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

  #now(): string {
    return this.#clock.now().toISOString();
  }

  #nextEventId(): string {
    this.#events += 1;
    return `event:${this.#hex}:${this.#events}`;
  }

  get run(): RunIdentity {
    return this.#record.run;
  }

  /**
   * Commit one transition (records + run record + ledger + event), then notify. `cas`: only if the
   * run's state key still has the head this writer committed last (`null`: the run does not exist).
   */
  async commit(
    event: AutoEvent,
    records: TransitionRecord[],
    next: Partial<AutoRun> = {},
    cas?: { readonly seq: number | null },
  ): Promise<void> {
    const record = { ...this.#record, ...next, updated_at: event.committed_at as string } as AutoRun;
    // Every commit is a row of the run machine, checked before anything is written.
    const phase = nextPhase(this.#phase, event.type as MachineInput);
    const entries = await commitTransition(
      this.#o.store.log,
      this.#runId,
      { event, records: [...records, { kind: "run", record }, { kind: "ledger", record: this.#meter.toJSON() }] },
      cas === undefined ? {} : { expect: [{ key: runStateKey(this.#runId), seq: cas.seq }] },
    );
    this.#lastRunSeq = entries.find((e) => e.kind === "auto.run")?.seq ?? this.#lastRunSeq;
    this.#phase = phase;
    this.#record = record;
    this.#o.onEvent?.(event);
  }

  async start(): Promise<void> {
    const at = this.#now();
    await this.commit(
      {
        event_id: this.#nextEventId(),
        type: "auto_run_started",
        run: this.run,
        committed_at: at,
        selection: this.#record.selection,
        budgets: this.#record.budgets,
      },
      [{ kind: "stages", record: this.stages }],
      {},
      // Run creation is a compare-and-swap: two writers starting one identity, one run.
      { seq: null },
    );
  }

  /** Tell the Stage 4 listener (only under `gate`); its failures are not the run's. */
  provisional(kind: ProvisionalChunk["kind"], text: string, candidateId?: string): void {
    if (this.stages.result_review !== "gate" || this.#o.onProvisional === undefined) return;
    try {
      this.#o.onProvisional({
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

  async terminal(outcome: TerminalOutcome, extra: TransitionRecord[] = []): Promise<void> {
    const eventId = this.#nextEventId();
    const at = this.#now();
    const terminal = buildTerminalRecord(
      { run: this.run, counters: this.#meter.toJSON().consumed, event_id: eventId, committed_at: at },
      outcome,
    );
    await this.commit(
      { event_id: eventId, type: "auto_run_terminal", run: this.run, committed_at: at, terminal },
      [...extra, { kind: "terminal", record: terminal }],
      { state: terminal.state, terminal_reason: terminal.terminal_reason },
      // Verified is a compare-and-swap on the run's head: a newer candidate committed by another
      // writer between the check and this append is never superseded.
      outcome.kind === "verified" ? { seq: this.#lastRunSeq } : undefined,
    );
  }

  /** Drive the engine until a completion becomes a candidate, or the run ends without one. */
  async produce(): Promise<
    { candidate: Candidate; snapshot: EvidenceSnapshot; payload: Uint8Array } | TerminalOutcome
  > {
    // An Engine that throws is an ordinary Agent failure (caught where the Engine is called); any
    // other failure (a step audit that did not commit) reaches the caller: the safety boundary.
    const driven = await this.#drive();
    return driven.kind === "completion" ? this.#candidate(driven) : driven;
  }

  /** The outcome a refused budget check gives (before a candidate, or for `candidateId`). */
  #refusal(check: Extract<BudgetCheck, { admitted: false }>, candidateId: string | null): TerminalOutcome {
    if (check.reason === "loop_detected") return { kind: "reason", reason: "loop_detected", candidateId };
    return { kind: "reason", reason: "budget_exhausted", candidateId, limit: check.limit };
  }

  /**
   * The admission of the next autonomous step: the wall-time deadline, the extra-token budget and
   * the open no-progress circuit. Null when admitted.
   */
  admitNext(candidateId: string | null): TerminalOutcome | null {
    for (const check of [this.#meter.checkWallTime(), this.#meter.checkTokens(), this.#meter.admitAction()]) {
      if (!check.admitted) return this.#refusal(check, candidateId);
    }
    return null;
  }

  /** Arm the wall-time deadline: when it passes, the Engine's signal aborts. */
  armWallTime(): void {
    if (!this.#meter.isActive("wall_time_s")) return;
    const timers = this.#o.timers ?? SYSTEM_TIMERS;
    const arm = (): void => {
      const started = Date.parse(this.#meter.toJSON().started_at);
      const remaining = started + this.#record.budgets.wall_time_s * 1000 - this.#clock.now().getTime();
      this.#timer = timers.setTimeout(
        () => {
          this.#timer = undefined;
          // A timer may fire a little early against the clock: abort only once the clock agrees.
          if (this.#meter.checkWallTime().admitted) arm();
          else this.#abort.abort(new Error("wall_time_s"));
        },
        Math.max(1, Math.ceil(remaining)),
      );
    };
    arm();
  }

  /** Disarm the deadline (the run committed its terminal, or stopped). */
  disarm(): void {
    if (this.#timer !== undefined) (this.#o.timers ?? SYSTEM_TIMERS).clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Wait for `work`, unless the run's signal aborts first (an Engine that ignores it never holds the run). */
  async #orAbort<T>(work: Promise<T>): Promise<T | typeof ABORTED> {
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

  /** Commit one mediated step with the ledger as it stands. */
  async #step(partial: Partial<StepRecord> & Pick<StepRecord, "phase">): Promise<StepRecord> {
    this.#ordinal += 1;
    const record: StepRecord = {
      run: this.run,
      ordinal: this.#ordinal,
      committed_at: this.#now(),
      usage: null,
      progress: null,
      turns: null,
      action: null,
      refusal: null,
      result: null,
      ...partial,
      ledger: this.#meter.toJSON(),
    };
    const phase = nextPhase(this.#phase, `step:${record.phase}`);
    await commitStep(this.#o.store.log, this.#runId, record);
    this.#phase = phase;
    this.#o.onStep?.(record);
    return record;
  }

  /** Read the Engine's steps up to its first completion, or the outcome that ends the run without one. */
  async #drive(): Promise<Completion | TerminalOutcome> {
    const failed: TerminalOutcome = { kind: "reason", reason: "agent_failed", candidateId: null };
    let it: AsyncIterator<EngineStep, void, ActionResult | undefined>;
    try {
      const steps = this.#o.engine.run({
        run: this.run,
        task: this.#task,
        tools: this.#o.workspace === undefined ? [] : HOST_TOOLS,
        signal: this.#abort.signal,
      });
      it = (
        Symbol.asyncIterator in steps ? (steps as AsyncIterable<EngineStep>)[Symbol.asyncIterator]() : steps
      ) as AsyncIterator<EngineStep, void, ActionResult | undefined>;
    } catch {
      return failed;
    }
    let reply: ActionResult | undefined;
    let progress = false;
    try {
      for (;;) {
        const gate = this.admitNext(null);
        if (gate !== null) return gate;
        let next: IteratorResult<EngineStep, void> | typeof ABORTED;
        try {
          next = await this.#orAbort(Promise.resolve().then(() => it.next(reply as ActionResult)));
        } catch {
          return failed;
        }
        if (next === ABORTED) return this.admitNext(null) ?? failed;
        reply = undefined;
        if (next.done === true) return failed;
        const step = next.value as EngineStep | { kind?: unknown };
        switch (step.kind) {
          case "prose":
            // Prose never makes a candidate; under Stage 4 it streams provisional.
            this.provisional("prose", String((step as { text?: unknown }).text ?? ""));
            break;
          case "turn": {
            const usage = (step as { usage?: { input_tokens?: unknown; output_tokens?: unknown } }).usage;
            const input = usage?.input_tokens as number;
            const output = usage?.output_tokens as number;
            if (!Number.isSafeInteger(input) || !Number.isSafeInteger(output) || input < 0 || output < 0) return failed;
            // The producing run is the initial turn (ADR 0009): its tokens are the base of the 1.5x
            // budget, which Auto Mode's own later turns (review, repair) spend.
            const tokens = this.#meter.recordTurnTokens(input + output, "initial");
            const turn = this.#meter.recordTurn({ progress });
            await this.#step({ phase: "turn", usage: { input_tokens: input, output_tokens: output }, progress });
            progress = false;
            if (!tokens.admitted) return this.#refusal(tokens, null);
            if (!turn.admitted) return this.#refusal(turn, null);
            break;
          }
          case "action": {
            const acted = await this.#act((step as { action?: unknown }).action);
            if ("kind" in acted) return acted;
            reply = acted.result;
            if (acted.delta) progress = true;
            break;
          }
          case "cancelled":
            return { kind: "reason", reason: "user_cancelled", candidateId: null };
          case "max_turns": {
            // The Engine's own turn limit is a turn budget: budget_exhausted naming it (ADR 0009).
            const turns = (step as { turns?: unknown }).turns as number;
            await this.#step({ phase: "max_turns", turns: Number.isSafeInteger(turns) && turns >= 0 ? turns : 0 });
            return { kind: "reason", reason: "budget_exhausted", candidateId: null, limit: "engine_turns" };
          }
          case "completion":
            return step as Completion;
          case "tool_result":
            // A tool that already ran bypassed the host: an unmediated action, never a result.
            return { kind: "reason", reason: "safety_boundary", candidateId: null };
          default:
            // `failed` (a coded Engine failure) and anything unknown: an ordinary Agent failure.
            return failed;
        }
      }
    } finally {
      // Never wait on an Engine that ignores its signal.
      void Promise.resolve()
        .then(() => it.return?.())
        .catch(() => undefined);
    }
  }

  /**
   * Mediate one proposed action: canonicalize and digest it, admit it through the ledger, classify
   * it under deterministic policy, commit its admission, run it through the host's adapters and
   * commit the result. A refusal commits its audit, then ends the run with its terminal reason.
   */
  async #act(proposal: unknown): Promise<{ result: ActionResult; delta: boolean } | TerminalOutcome> {
    this.#actions += 1;
    const actionOrdinal = this.#actions;
    const canonical = canonicalizeAction(proposal as ProposedAction);
    const toolName = String((proposal as { tool?: unknown } | null)?.tool ?? "").slice(0, 128);
    const refuse = async (
      terminal: "policy_requires_explicit_setup" | "safety_boundary" | "loop_detected" | "budget_exhausted",
      code: string,
      detail: string,
      action: StepRecord["action"],
      limit?: ExhaustedLimit,
    ): Promise<TerminalOutcome> => {
      await this.#step({ phase: "refused", action, refusal: { code, detail: detail.slice(0, 500), terminal } });
      return terminal === "budget_exhausted"
        ? { kind: "reason", reason: terminal, candidateId: null, limit: limit as ExhaustedLimit }
        : { kind: "reason", reason: terminal, candidateId: null };
    };
    if (!canonical.ok) {
      const action = {
        action_ordinal: actionOrdinal,
        tool: toolName,
        target: null,
        action_digest: canonical.digest,
        classification: null,
      };
      if (canonical.refusal === "path_escape") {
        return refuse("safety_boundary", "ASP_AUTO_MODE_PATH_ESCAPE", canonical.detail, action);
      }
      return refuse("policy_requires_explicit_setup", canonical.refusal, canonical.detail, action);
    }
    const a: CanonicalAction = canonical.action;
    const base = {
      action_ordinal: actionOrdinal,
      tool: a.tool,
      target: a.target,
      action_digest: a.digest,
      classification: null,
    };
    const same = this.#meter.admitAction(a.digest);
    if (!same.admitted) {
      // The wall time or an open circuit may refuse here too: the refusal names what refused.
      return same.reason === "loop_detected"
        ? refuse(
            "loop_detected",
            "same_action_no_delta",
            "this action without a durable delta reached its circuit",
            base,
          )
        : refuse("budget_exhausted", "budget_exhausted", `${same.limit} is spent`, base, same.limit);
    }
    const cells = this.#meter.admitCells(1);
    if (!cells.admitted)
      return refuse("budget_exhausted", "budget_exhausted", "no Cell budget left", base, cells.limit);
    const classification = this.#o.permissions?.classify(a.permission, {
      // The credential-shaped file fence is Stage 7's deterministic control.
      fence: this.#o.flags.isEnabled("stage7_guardian_enforcement"),
    }) ?? { outcome: "ask" as const, reason: "no permission policy: the built-in default is ask", fenced: false };
    const classified = {
      ...base,
      classification: {
        outcome: classification.outcome,
        reason: String(classification.reason).slice(0, 500),
        fenced: classification.fenced === true,
      },
    };
    if (classification.outcome === "deny") {
      return refuse("policy_requires_explicit_setup", "policy_deny", classified.classification.reason, classified);
    }
    if (classification.outcome !== "allow") {
      // No channel resolves an ask before Stages 6/7: refused headless, attributed to policy.
      return refuse(
        "policy_requires_explicit_setup",
        "ask_without_channel",
        `${classified.classification.reason}; no approval channel is attached`,
        classified,
      );
    }
    const workspace = this.#o.workspace;
    if (workspace === undefined) {
      return refuse(
        "policy_requires_explicit_setup",
        "no_workspace",
        "the host offers no tool adapters to this run",
        classified,
      );
    }
    // The admission commits before anything runs: a result is accepted only for an admitted action.
    await this.#step({ phase: "admitted", action: classified });
    let output: string;
    let delta = false;
    let exitCode: number | null = null;
    try {
      if (a.tool === "read_file") {
        const bytes = await workspace.read(a.target);
        output = bytes === null ? `error: no file ${a.target}` : clip(new TextDecoder().decode(bytes));
      } else if (a.tool === "write_file") {
        delta = (await workspace.write(a.target, a.content as Uint8Array)).changed;
        output = `wrote ${a.target}${delta ? "" : " (unchanged)"}`;
      } else {
        const ran = await workspace.run(a.argv as string[], this.#abort.signal);
        exitCode = ran.exitCode;
        // What the command changed is a write: each path must be one policy lets the agent write,
        // and a changed file is a durable delta.
        for (const path of ran.changedPaths) {
          const write = this.#o.permissions?.classify(
            { tool: "write_file", path },
            { fence: this.#o.flags.isEnabled("stage7_guardian_enforcement") },
          );
          if (write?.outcome !== "allow") {
            return refuse(
              "policy_requires_explicit_setup",
              "command_write_refused",
              `the command changed ${path}, which policy does not let the agent write`,
              classified,
            );
          }
        }
        delta = ran.changedPaths.length > 0;
        output = clip(
          `exit ${ran.exitCode ?? "signal"}\n${ran.stdout}${ran.stderr === "" ? "" : `\nstderr:\n${ran.stderr}`}`,
        );
      }
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const message = String((error as Error).message ?? error);
      if (code === "ASP_AUTO_MODE_PATH_ESCAPE") return refuse("safety_boundary", code, message, classified);
      if (code === "ASP_AUTO_MODE_SANDBOX_UNAVAILABLE") {
        return refuse("policy_requires_explicit_setup", code, message, classified);
      }
      output = `error: ${clip(message)}`;
    }
    this.#meter.recordAction(a.digest, { durableDelta: delta });
    const outputDigest = await this.#o.store.objects.putBlob(utf8.encode(output));
    await this.#step({
      phase: "executed",
      action: classified,
      result: { output_digest: outputDigest, delta, exit_code: exitCode },
    });
    return { result: { status: "executed", action_digest: a.digest, output }, delta };
  }
  /** Store the completion's bytes, freeze its snapshot and commit the candidate transition. */
  async #candidate(
    completion: Completion,
  ): Promise<{ candidate: Candidate; snapshot: EvidenceSnapshot; payload: Uint8Array } | TerminalOutcome> {
    if (typeof completion.payload !== "string" || completion.payload.length === 0) {
      return { kind: "reason", reason: "agent_failed", candidateId: null };
    }
    const { objects } = this.#o.store;
    const payload = utf8.encode(completion.payload);
    const refs: EvidenceRef[] = [{ name: "payload", kind: "blob", digest: await objects.putBlob(payload) }];
    const versions: Candidate["artifact_versions"] = [];
    // The files the host itself holds in the workspace are the run's Artifacts.
    let artifacts: ReadonlyArray<{ artifact_id: string; version_id: string; bytes: Uint8Array }> = completion.artifacts;
    if (this.#o.workspace !== undefined) {
      let written: ReadonlyArray<{ path: string; bytes: Uint8Array }>;
      try {
        written = await this.#o.workspace.changes();
      } catch {
        return { kind: "reason", reason: "safety_boundary", candidateId: null };
      }
      // With a workspace the Artifacts are only what the host itself holds there: an Engine's
      // claim about other files is never part of the candidate.
      artifacts = written.map((w) => ({
        artifact_id: w.path,
        version_id: digestBytes(w.bytes).slice(7, 23),
        bytes: w.bytes,
      }));
    }
    try {
      for (const a of artifacts) {
        const d = await objects.putBlob(a.bytes);
        refs.push({ name: `artifact:${a.artifact_id}`, kind: "blob", digest: d });
        versions.push({ artifact_id: a.artifact_id, version_id: a.version_id, checksum: d });
      }
      for (const e of completion.evidence) {
        // The host's own ref names (the payload, the Artifacts) are never an Engine's to take.
        if (e.name === "payload" || e.name.startsWith("artifact:")) {
          return { kind: "reason", reason: "agent_failed", candidateId: null };
        }
        refs.push(
          "bytes" in e
            ? { name: e.name, kind: "blob", digest: await objects.putBlob(e.bytes) }
            : { ...e.ref, name: e.name },
        );
      }
    } catch {
      return { kind: "reason", reason: "agent_failed", candidateId: null };
    }
    const payloadDigest = refs[0]?.digest as Digest;
    let frozen: Awaited<ReturnType<typeof freezeSnapshot>>;
    try {
      // A snapshot that cannot be frozen completely (an unresolved ref: a partial snapshot) is the
      // safety boundary, never a candidate.
      frozen = await freezeSnapshot(this.#o.store, { refs, labels: { run_id: this.#runId } });
    } catch {
      return { kind: "reason", reason: "safety_boundary", candidateId: null };
    }
    const generation = this.#record.generation + 1;
    const candidateId = candidateIdOf(this.run, generation, payloadDigest, frozen.digest);
    const at = this.#now();
    const snapshot = toEvidenceSnapshot(frozen, { run: this.run, candidateId, createdAt: at });
    const candidate: Candidate = {
      candidate_id: candidateId,
      run: this.run,
      snapshot_digest: frozen.digest,
      payload_digest: payloadDigest,
      artifact_versions: versions,
      producer: { ...this.#producer },
      review_status: "candidate",
      parent_candidate_id: null,
      created_at: at,
    };
    await this.commit(
      {
        event_id: this.#nextEventId(),
        type: "candidate_ready",
        run: this.run,
        committed_at: at,
        candidate_id: candidateId,
        snapshot_digest: frozen.digest,
      },
      [
        { kind: "snapshot", record: snapshot },
        { kind: "candidate", record: candidate },
      ],
      { state: "candidate", candidate_id: candidateId, generation },
    );
    return { candidate, snapshot, payload };
  }

  /**
   * Review the candidate under the frozen independence policy and the attempt budget. Returns the
   * outcome the verdict gives, or null when the review already committed the terminal (gate) or
   * recorded nothing (a shadow review without an eligible Reviewer). Under `shadow` the caller
   * commits only an integrity outcome (`safety_boundary`); the verdict gates nothing.
   */
  async review(candidate: Candidate, snapshot: EvidenceSnapshot, payload: Uint8Array): Promise<TerminalOutcome | null> {
    const reviewRunId = reviewRunIdOf(this.run, candidate.candidate_id, 1);
    const auditId = `audit:${reviewRunId.slice(7)}`;
    const selected = selectReviewer(this.#o.reviewers, {
      policy: this.#record.independence.policy,
      producer: this.#producer,
      excluded: this.#record.independence.excluded_actors ?? [],
    });
    const frozen = selected === null ? null : { ...selected.identity };
    const request: AuditRequest = {
      audit_id: auditId,
      subject_kind: "result_review",
      subject_entity_kind: "candidate_evidence_snapshot",
      subject_id: candidate.candidate_id,
      run: this.run,
      review_run_id: reviewRunId,
      candidate_payload_digest: candidate.payload_digest,
      snapshot_digest: candidate.snapshot_digest,
      reviewer:
        frozen === null
          ? null
          : { actor_id: frozen.actor_id, session_id: frozen.session_id, fingerprint: frozen.fingerprint },
    };
    let rr: ReviewRun = {
      review_run_id: reviewRunId,
      run: this.run,
      candidate_id: candidate.candidate_id,
      candidate_payload_digest: candidate.payload_digest,
      snapshot_digest: candidate.snapshot_digest,
      selection: selected === null ? "reviewer_independence_unavailable" : "selected",
      selected_at: this.#now(),
      reviewer:
        frozen === null
          ? null
          : {
              actor_id: frozen.actor_id,
              session_id: frozen.session_id,
              fingerprint: frozen.fingerprint,
              ...(frozen.model === undefined ? {} : { model: frozen.model }),
            },
      attempts: [],
      verdict: null,
      finding_ids: [],
      audit_id: auditId,
      audit_request_digest: auditRequestDigest(request),
      assessment_digest: null,
    };
    const unavailable = (reason: UnavailableReason): TerminalOutcome => ({
      kind: "unavailable",
      candidateId: candidate.candidate_id,
      reason,
    });
    const gating = this.stages.result_review === "gate";
    if (selected === null || frozen === null) {
      // Shadow: no Reviewer could be provisioned, so there is no judgment to record, and no
      // event of the seven names a selection that admitted no inference without ending the run.
      if (!gating) return null;
      // Pre-inference: no Reviewer satisfies the frozen policy; no call is made.
      // The selection record and the terminal commit together; nothing is left to decide.
      await this.terminal(unavailable("reviewer_independence_unavailable"), [{ kind: "review", record: rr }]);
      return null;
    }
    const maxAttempts = Math.min(2, this.#record.budgets.max_review_rounds);
    let findings: Finding[] = [];
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      // Wall time and the token budget bound the review too (outside the review terminals).
      const gate = this.admitNext(candidate.candidate_id);
      if (gate !== null) return gate;
      const admitted = this.#meter.admitReviewAttempt(candidate.candidate_id);
      if (!admitted.admitted) break;
      if (!same(selected.identity, frozen))
        return { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id };
      const startedAt = this.#now();
      await this.commit(auditStartedEvent(this.#nextEventId(), startedAt, request, attempt) as unknown as AutoEvent, [
        { kind: "review", record: rr },
      ]);
      // The run's deadline bounds the attempt too: an aborted attempt is recorded as timed out,
      // and the run then ends on the spent budget.
      const raced = await this.#orAbort(
        runAttempt(
          selected,
          snapshot,
          { candidate_id: candidate.candidate_id, payload: new TextDecoder().decode(payload), snapshot },
          this.#o.attemptTimeoutMs ?? 60_000,
        ),
      );
      const aborted = raced === ABORTED;
      const result: AttemptResult = raced === ABORTED ? { outcome: "timeout", missing_coverage: [] } : raced;
      // A reply under a drifted identity binding is an integrity failure, never a verdict.
      if (!same(selected.identity, frozen))
        return { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id };
      const completedAt = this.#now();
      findings =
        result.outcome === "verdict"
          ? result.verdict.findings.map((f) => {
              const fingerprint = findingFingerprint(f);
              return {
                finding_id: findingIdOf(reviewRunId, fingerprint),
                review_run_id: reviewRunId,
                fingerprint,
                severity: f.severity,
                material: isMaterialSeverity(f.severity),
                category: f.category,
                claim: f.claim,
                evidence_refs: [...f.evidence_refs],
                status: "open",
              } satisfies Finding;
            })
          : [];
      // Two findings with the same content in one run are one finding.
      findings = [...new Map(findings.map((f) => [f.finding_id, f])).values()];
      const outcome: AttemptOutcome = result.outcome;
      const missing = result.outcome === "verdict" ? [] : [...result.missing_coverage];
      const final = result.outcome === "verdict" || attempt === maxAttempts;
      const assessment: Assessment = {
        audit_request_digest: rr.audit_request_digest as Digest,
        subject_kind: "result_review",
        subject_entity_kind: "candidate_evidence_snapshot",
        subject_id: candidate.candidate_id,
        attempt,
        verdict: result.outcome === "verdict" ? result.verdict.verdict : null,
        decision: null,
        findings: findings.map((f) => ({
          finding_id: f.finding_id,
          fingerprint: f.fingerprint as Digest,
          severity: f.severity,
          category: f.category,
          claim: f.claim,
          evidence_refs: f.evidence_refs,
        })),
        risk: null,
        authorization: null,
        outcome,
        rationale: result.outcome === "verdict" ? result.verdict.rationale : null,
        failure: result.outcome === "verdict" ? null : { outcome, missing_coverage: missing },
        bookkeeping: { durable: true, retry: attempt > 1, final, gating },
      };
      const completed = auditCompletedEvent(this.#nextEventId(), completedAt, request, assessment);
      rr = {
        ...rr,
        attempts: [
          ...rr.attempts,
          {
            attempt,
            outcome,
            started_at: startedAt,
            completed_at: completedAt,
            ...(outcome === "evidence_incomplete" ? { missing_coverage: missing } : {}),
          },
        ],
        verdict: assessment.verdict,
        finding_ids: findings.map((f) => f.finding_id),
        assessment_digest: assessment.verdict === null ? null : completed.assessment_digest,
      };
      await this.commit(completed as unknown as AutoEvent, [
        { kind: "review", record: rr },
        ...findings.map((f) => ({ kind: "finding" as const, record: f })),
      ]);
      if (result.outcome === "verdict") break;
      if (aborted) {
        const gate = this.admitNext(candidate.candidate_id);
        if (gate !== null) return gate;
      }
    }
    const last = rr.attempts[rr.attempts.length - 1];
    if (rr.verdict === null || last === undefined) {
      return unavailable(last?.outcome === "evidence_incomplete" ? "evidence_incomplete" : "no_admissible_verdict");
    }
    if (rr.verdict === "issues") {
      return {
        kind: "issues",
        candidateId: candidate.candidate_id,
        stop: "review_only",
        unresolved: findings.map((f) => f.finding_id),
      };
    }
    // A pass beside an open material finding is contradictory: the safety boundary.
    if (findings.some(blocksVerified))
      return { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id };
    return { kind: "verified", candidate };
  }

  /** Compare-and-swap promotion: the exact reviewed candidate, still the latest, bytes unchanged. */
  async promote(candidate: Candidate): Promise<TerminalOutcome> {
    const store = this.#o.store;
    const check = await verifySnapshot(store, candidate.snapshot_digest as Digest).catch(() => null);
    if (check === null || !check.ok)
      return { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id };
    let payload: Uint8Array;
    try {
      payload = await store.objects.readBlob(candidate.payload_digest as Digest);
    } catch {
      return { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id };
    }
    let delivered: Uint8Array;
    try {
      delivered = this.#o.deliver === undefined ? payload : await this.#o.deliver(candidate, payload);
    } catch {
      // The bytes may have reached the user before the failure: the truthful row is outcome_unknown.
      return { kind: "reason", reason: "outcome_unknown", candidateId: candidate.candidate_id };
    }
    if (digestBytes(delivered) !== candidate.payload_digest) {
      return { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id };
    }
    // Compare-and-swap, as late as possible: the run must still point at the exact reviewed
    // candidate and generation (a newer candidate removes eligibility).
    const latest = await store.log.latest(runStateKey(this.#runId));
    const body = (latest?.record as { body?: AutoRun } | undefined)?.body;
    if (body?.candidate_id !== candidate.candidate_id || body.generation !== this.#record.generation) {
      return { kind: "reason", reason: "safety_boundary", candidateId: candidate.candidate_id };
    }
    return { kind: "verified", candidate };
  }
}

/**
 * Create the Auto Run runner over injected ports (store, Engine, Reviewers, stage flags, clock).
 * Every transition and its canonical event commit in one atomic append; `onEvent` hears of it
 * only afterwards, and `onProvisional` (Stage 4) hears prose and the committed candidate before
 * any verdict.
 *
 * @example
 * ```ts
 * const runner = createAutoRunner({ store, engine: createScriptedEngine(script), reviewers, flags });
 * const projection = await runner.run({ run, selection });
 * projection.user_truth; // "Verified"
 * ```
 */
export function createAutoRunner(options: AutoRunnerOptions): AutoRunner {
  return {
    async run(params) {
      const run = checkRun(params.run);
      if (!options.flags.isEnabled("stage2_auto_run_storage")) {
        throw new AutoModeError("ASP_AUTO_MODE_STAGE_DISABLED", "Auto Run storage needs stage2_auto_run_storage", {
          data: { stage: "stage2_auto_run_storage" },
        });
      }
      assertBuiltStages(options.flags);
      if (params.selection.result_review_mode === "auto_fix" && !options.flags.isEnabled("stage5_auto_repair")) {
        // ADR 0009: without Stage 5 nothing can repair, and review_only did not forbid repair, so
        // no terminal this run could reach would be truthful: refuse it before anything commits.
        throw new AutoModeError(
          "ASP_AUTO_MODE_STAGE_DISABLED",
          "result_review_mode auto_fix needs stage5_auto_repair (Repair Runs), which is off: select review_only",
          { data: { stage: "stage5_auto_repair" } },
        );
      }
      if (options.workspace !== undefined && !isBudgetActive("wall_time_s", options.flags)) {
        // An Engine with tools must be bounded by the host: without a stage owning the wall-time
        // budget nothing would end a run whose Engine never stops.
        throw new AutoModeError(
          "ASP_AUTO_MODE_STAGE_DISABLED",
          "an Engine with tools runs only under stage4_review_completion_gate (its wall-time budget bounds the run): turn it on",
          { data: { stage: "stage4_review_completion_gate" } },
        );
      }
      const runId = runIdOf(run);
      if ((await readRunFacts(options.store.log, runId)).length > 0) {
        throw new AutoModeError("ASP_AUTO_MODE_RUN_EXISTS", "a run with this identity already exists", {
          data: { runId },
        });
      }
      const driver = new RunDriver(options, params, run, runId);
      try {
        await driver.start();
      } catch (error) {
        // Another writer created this run between the check above and the append.
        if ((error as { code?: unknown }).code === "ASP_EVIDENCE_CONDITION_FAILED") {
          throw new AutoModeError("ASP_AUTO_MODE_RUN_EXISTS", "a run with this identity already exists", {
            cause: error,
            data: { runId },
          });
        }
        throw error;
      }
      driver.armWallTime();
      try {
        const produced = await driver.produce();
        if ("kind" in produced) {
          await driver.terminal(produced);
        } else if (driver.stages.result_review === "shadow") {
          // Stage 3: the judgment is recorded, completion is not gated. Only an integrity failure
          // (a pass beside a material finding, a drifted Reviewer) ends the run: the safety boundary.
          const outcome = await driver.review(produced.candidate, produced.snapshot, produced.payload);
          if (outcome?.kind === "reason") await driver.terminal(outcome);
        } else if (driver.stages.result_review === "gate") {
          // Stage 4: the candidate committed (review_status=candidate) before any verdict; it
          // streams provisional; only the compare-and-swap promotion below makes it Verified.
          driver.provisional("candidate", new TextDecoder().decode(produced.payload), produced.candidate.candidate_id);
          const outcome = await driver.review(produced.candidate, produced.snapshot, produced.payload);
          if (outcome !== null) {
            const final = outcome.kind === "verified" ? await driver.promote(outcome.candidate) : outcome;
            if (final.kind === "verified") {
              const promoted: Candidate = { ...final.candidate, review_status: "verified" };
              try {
                await driver.terminal(final, [{ kind: "candidate", record: promoted }]);
              } catch (error) {
                if ((error as { code?: unknown }).code !== "ASP_EVIDENCE_CONDITION_FAILED") throw error;
                // The compare-and-swap lost: the run moved on; the reviewed candidate is not Verified.
                await driver.terminal({
                  kind: "reason",
                  reason: "safety_boundary",
                  candidateId: final.candidate.candidate_id,
                });
              }
            } else {
              await driver.terminal(final);
            }
          }
        }
      } catch (error) {
        // A required record did not commit, or anything else failed after the run started: the
        // safety boundary, if even that can commit; a run never stays without its terminal.
        try {
          await driver.terminal({ kind: "reason", reason: "safety_boundary", candidateId: null });
        } catch {
          throw error;
        }
      } finally {
        driver.disarm();
      }
      return loadAutoRunProjection(options.store, runId);
    },
  };
}
