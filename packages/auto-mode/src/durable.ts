import {
  type BudgetLedger,
  type GuardianAssessment,
  PERMISSION_OUTCOMES,
  type PermissionOutcome,
  type RunIdentity,
  type SchemaName,
  TERMINAL_REASONS,
  type TerminalReason,
  validate,
} from "@asp/contracts";
import type { AppendOptions, FactEntry, FactInput, FactLog } from "@asp/evidence";
import { checkAuditCompletion } from "./audit.js";
import { AutoModeError } from "./errors.js";
import { checkGuardianFailure, type GuardianFailure } from "./guardian.js";
import { checkRunStages } from "./stages.js";

/** The fact kinds an Auto Run's records are stored under, one per durable record kind. */
export const AUTO_FACT_KINDS = Object.freeze({
  run: "auto.run",
  candidate: "auto.candidate",
  snapshot: "auto.snapshot",
  review: "auto.review_run",
  finding: "auto.finding",
  /** A Repair Run (Stage 5), committed with `repair_started` and again with `repair_completed`. */
  repair: "auto.repair_run",
  terminal: "auto.terminal",
  ledger: "auto.budget_ledger",
  /** A Guardian assessment (Stages 6 and 7), committed with the step that records its ask. */
  guardian: "auto.guardian_assessment",
  /** A Guardian-failure record (timeout, invalid output, a failed call), committed like an assessment. */
  guardian_failure: "auto.guardian_failure",
  /** The stages the run runs under (`RunStages`), committed with `auto_run_started`. */
  stages: "auto.stages",
  event: "auto.event",
} as const);

/**
 * The fact kind of a run's mediated steps ({@link StepRecord}): model turns and their usage, and
 * every proposed action as the host admitted, refused or executed it. These are the run's action
 * audits; they are not among the seven canonical events.
 */
export const AUTO_STEP_KIND = "auto.step";

/** One of the record kinds of {@link AUTO_FACT_KINDS} (everything but the event). */
export type AutoRecordKind = Exclude<keyof typeof AUTO_FACT_KINDS, "event">;

/** The fact log state key whose latest entry is a run's latest `auto.run` record. */
export function runStateKey(runId: string): string {
  return `auto.run:${runId}`;
}

/** The fact index every fact of one run carries: name `auto.run_id`, value the run id. */
export const RUN_ID_INDEX = "auto.run_id";

const SCHEMA: Readonly<Record<Exclude<AutoRecordKind, "stages" | "guardian_failure">, SchemaName>> = {
  run: "auto-run",
  candidate: "candidate",
  snapshot: "evidence-snapshot",
  review: "review-run",
  finding: "finding",
  repair: "repair-run",
  terminal: "terminal-record",
  ledger: "budget-ledger",
  guardian: "guardian-assessment",
};

const EVENT_SCHEMA: Readonly<Record<string, SchemaName>> = {
  auto_run_started: "event-auto-run-started",
  candidate_ready: "event-candidate-ready",
  auto_audit_started: "event-auto-audit-started",
  auto_audit_completed: "event-auto-audit-completed",
  repair_started: "event-repair-started",
  repair_completed: "event-repair-completed",
  auto_run_terminal: "event-auto-run-terminal",
};

/** A canonical Auto Mode event (one of the seven), as committed. */
export interface AutoEvent {
  readonly event_id: string;
  readonly type: string;
  readonly [field: string]: unknown;
}

/** One record a transition commits, wrapped with the transition's event id. */
export interface TransitionRecord {
  readonly kind: AutoRecordKind;
  readonly record: unknown;
}

/** One state transition: its records and its one canonical event, committed in one batch. */
export interface Transition {
  readonly event: AutoEvent;
  readonly records: ReadonlyArray<TransitionRecord>;
}

/** How a record fact stores its body: the transition's event id beside the contracts record. */
export interface RecordFact {
  readonly event_id: string;
  readonly body: unknown;
}

/**
 * Validate a record against its contracts schema (the `stages` record, which is this package's
 * own, against {@link checkRunStages}), or report the first errors. Pure.
 */
export function checkRecord(kind: AutoRecordKind, record: unknown): string | null {
  if (kind === "stages") return checkRunStages(record);
  if (kind === "guardian_failure") return checkGuardianFailure(record);
  const result = validate(SCHEMA[kind], record);
  return result.ok ? null : `${kind}: ${result.errors.map((e) => `${e.pointer} ${e.message}`).join("; ")}`;
}

/**
 * Validate one of the seven events against its schema (the two valid subject pairings included),
 * and re-hash a completion's assessment. Returns the problem, or null. Pure.
 */
export function checkEvent(event: unknown): string | null {
  const type = (event as { type?: unknown } | null)?.type;
  const name = typeof type === "string" ? EVENT_SCHEMA[type] : undefined;
  if (name === undefined) return `event: unknown type ${String(type)}`;
  const result = validate(name, event);
  if (!result.ok) return `event ${String(type)}: ${result.errors.map((e) => `${e.pointer} ${e.message}`).join("; ")}`;
  if (type === "auto_audit_completed") {
    try {
      checkAuditCompletion(result.value as never);
    } catch {
      return "event auto_audit_completed: assessment does not re-hash to assessment_digest";
    }
  }
  return null;
}

/**
 * Commit one transition: every record and its event in ONE atomic, synced fact log append (one
 * batch, one event id), each fact indexed by the run id. Resolves only once durable; the caller
 * notifies after this resolves, never before. `options.expect` makes it a compare-and-swap on
 * state keys (run creation: the run's key has no entry; Verified promotion: it still has the
 * entry this writer committed last).
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_RECORD` when a record or the event does not validate
 *   (nothing is written); `ASP_AUTO_MODE_PERSIST_FAILED` (category `integrity`) when the append did
 *   not commit. EvidenceError `ASP_EVIDENCE_CONDITION_FAILED` when an `expect` condition no longer
 *   holds (nothing is written).
 */
export async function commitTransition(
  log: FactLog,
  runId: string,
  transition: Transition,
  options: AppendOptions = {},
): Promise<FactEntry[]> {
  const problems: string[] = [];
  for (const r of transition.records) {
    const p = checkRecord(r.kind, r.record);
    if (p !== null) problems.push(p);
  }
  const ep = checkEvent(transition.event);
  if (ep !== null) problems.push(ep);
  if (problems.length > 0) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_RECORD", "a transition record does not validate; nothing written", {
      data: { problems: problems.slice(0, 5) },
    });
  }
  const index = [{ name: RUN_ID_INDEX, value: runId }];
  const facts: FactInput[] = transition.records.map((r) => ({
    kind: AUTO_FACT_KINDS[r.kind],
    record: { event_id: transition.event.event_id, body: r.record } satisfies RecordFact,
    index,
    ...(r.kind === "run" ? { state: [runStateKey(runId)] } : {}),
  }));
  facts.push({ kind: AUTO_FACT_KINDS.event, record: transition.event, index });
  try {
    return await log.append(facts, options);
  } catch (cause) {
    // A compare-and-swap that lost (another writer moved the run) is not a persistence failure.
    if ((cause as { code?: unknown }).code === "ASP_EVIDENCE_CONDITION_FAILED") throw cause;
    throw new AutoModeError("ASP_AUTO_MODE_PERSIST_FAILED", "the transition and its event did not commit", {
      category: "integrity",
      cause,
      data: { event_id: transition.event.event_id, type: transition.event.type },
    });
  }
}

/**
 * Every committed fact of one run, in commit order, each verified by the fact log.
 *
 * @throws EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN` when the log does not verify.
 */
export async function readRunFacts(log: Pick<FactLog, "list">, runId: string): Promise<FactEntry[]> {
  return log.list({ index: { name: RUN_ID_INDEX, value: runId } });
}

/** One mediated step of a run, committed (with the budget ledger as it stood) before the run goes on. */
export interface StepRecord {
  readonly run: RunIdentity;
  /** 1-based, in commit order. */
  readonly ordinal: number;
  /**
   * - `turn`: a model turn ended (its token usage, and whether it made Artifact progress);
   * - `admitted`: an action passed admission and policy and is about to run (nothing ran yet);
   * - `executed`: the host ran the admitted action of the same `action_ordinal`;
   * - `refused`: an action was refused and did not run; `terminal` is the run's terminal reason
   *   (null when the Guardian stopped the run: `blocked_by_guardian`);
   * - `denied`: the Guardian denied an ask recoverably (Stage 7): nothing ran, its rationale goes
   *   back to the Agent and the run goes on;
   * - `max_turns`: the Engine reported its own turn limit exhausted.
   */
  readonly phase: "turn" | "admitted" | "executed" | "refused" | "denied" | "max_turns";
  readonly committed_at: string;
  readonly usage: { readonly input_tokens: number; readonly output_tokens: number } | null;
  readonly progress: boolean | null;
  readonly turns: number | null;
  readonly action: {
    readonly action_ordinal: number;
    /** The host tool, or the proposed tool name (clipped) when it was not one. */
    readonly tool: string;
    readonly target: string | null;
    readonly action_digest: string;
    readonly classification: {
      readonly outcome: PermissionOutcome;
      readonly reason: string;
      readonly fenced: boolean;
    } | null;
  } | null;
  readonly refusal: { readonly code: string; readonly detail: string; readonly terminal: TerminalReason | null } | null;
  readonly result: {
    readonly output_digest: string;
    readonly delta: boolean;
    readonly exit_code: number | null;
  } | null;
  readonly ledger: BudgetLedger;
  /**
   * The Guardian's review of this step's `ask` (Stages 6 and 7), committed in the same append;
   * absent or null when no Guardian was asked (steps recorded before Stages 6 and 7 lack it).
   */
  readonly guardian?: StepGuardian | null;
}

/** What a step records of the Guardian's review of its ask ({@link StepRecord.guardian}). */
export interface StepGuardian {
  /** `shadow`: Stage 6 advice, resolving nothing; `enforce`: Stage 7 with auto_review. */
  readonly mode: "shadow" | "enforce";
  /** The assessment's `assessment_id`, or the failure record's `failure_id`. */
  readonly record_id: string;
  readonly audit_id: string;
  /** The Guardian's decision, or null when it gave none (a failure record). */
  readonly decision: "allow" | "deny" | null;
  /** The one-shot capability this admitted step consumes (an enforced allow only), else null. */
  readonly capability_id: string | null;
  /**
   * The Agent proposed an exact action (the same canonical digest) the Guardian already denied in
   * this run: the host did not ask again; `record_id` is the earlier denial's, and the step
   * commits no audit of its own.
   */
  readonly repeat: boolean;
}

/**
 * The permission-review audit a step commits with it (ADR 0010 §1): the assessment or failure
 * record and its `auto_audit_started` / `auto_audit_completed` events.
 */
export interface StepAudit {
  readonly record:
    | { readonly kind: "guardian"; readonly record: GuardianAssessment }
    | { readonly kind: "guardian_failure"; readonly record: GuardianFailure };
  readonly started: AutoEvent;
  readonly completed: AutoEvent;
}

/** The id of a run's step `ordinal` (what a Guardian's `ask_decision_id` names). Pure. */
export function stepIdOf(runId: string, ordinal: number): string {
  return `step:${runId.slice(7)}:${ordinal}`;
}

/** The fact log state key a consumed one-shot capability holds (one entry: its one use). */
export function capabilityStateKey(capabilityId: string): string {
  return `auto.capability:${capabilityId}`;
}

const PHASES = ["turn", "admitted", "executed", "refused", "denied", "max_turns"];
const STEP_KEYS = "action,committed_at,ledger,ordinal,phase,progress,refusal,result,run,turns,usage";
const STEP_KEYS_GUARDIAN = "action,committed_at,guardian,ledger,ordinal,phase,progress,refusal,result,run,turns,usage";
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const isCount = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;

/** Validate a {@link StepRecord} (closed shape, its ledger against `budget-ledger`). Returns the problem, or null. Pure. */
export function checkStepRecord(record: unknown): string | null {
  const r = record as Partial<StepRecord> | null;
  if (typeof r !== "object" || r === null) return "step: not an object";
  const keys = Object.keys(r).sort().join(",");
  if (keys !== STEP_KEYS && keys !== STEP_KEYS_GUARDIAN) return `step: fields ${keys}`;
  if (!PHASES.includes(r.phase as string)) return "step: unknown phase";
  if (!Number.isSafeInteger(r.ordinal) || (r.ordinal as number) < 1) return "step: bad ordinal";
  if (typeof r.committed_at !== "string" || Number.isNaN(Date.parse(r.committed_at))) return "step: bad committed_at";
  const ledger = validate("budget-ledger", r.ledger);
  if (!ledger.ok) return "step: ledger does not validate";
  const a = r.action;
  if (a !== null) {
    if (typeof a !== "object" || a === undefined) return "step: bad action";
    if (!isCount(a.action_ordinal) || typeof a.tool !== "string" || a.tool.length > 128) return "step: bad action";
    if (!DIGEST.test(String(a.action_digest))) return "step: bad action digest";
    if (a.target !== null && typeof a.target !== "string") return "step: bad action target";
    const c = a.classification;
    if (
      c !== null &&
      (typeof c !== "object" ||
        !(PERMISSION_OUTCOMES as ReadonlyArray<unknown>).includes(c?.outcome) ||
        typeof c?.reason !== "string" ||
        typeof c?.fenced !== "boolean")
    ) {
      return "step: bad classification";
    }
  }
  const needsAction = r.phase === "admitted" || r.phase === "executed" || r.phase === "denied";
  if (needsAction && a === null) return `step: ${r.phase} without its action`;
  if (r.phase === "turn") {
    const u = r.usage;
    if (u === null || typeof u !== "object" || !isCount(u?.input_tokens) || !isCount(u?.output_tokens)) {
      return "step: turn without its usage";
    }
    if (typeof r.progress !== "boolean") return "step: turn without progress";
  } else if (r.usage !== null || r.progress !== null) return "step: usage outside a turn";
  if (r.phase === "max_turns" ? !isCount(r.turns) : r.turns !== null) return "step: turns only on max_turns";
  const g = r.guardian ?? null;
  if (g !== null) {
    if (
      typeof g !== "object" ||
      Object.keys(g).sort().join(",") !== "audit_id,capability_id,decision,mode,record_id,repeat" ||
      typeof g.repeat !== "boolean" ||
      (g.repeat && (g.decision !== "deny" || g.capability_id !== null)) ||
      !["shadow", "enforce"].includes(g.mode) ||
      ![null, "allow", "deny"].includes(g.decision) ||
      typeof g.record_id !== "string" ||
      typeof g.audit_id !== "string" ||
      (g.capability_id !== null && typeof g.capability_id !== "string")
    ) {
      return "step: bad guardian";
    }
    if (a === null) return "step: a Guardian review without its action";
  }
  if (r.phase === "denied" && g?.decision !== "deny") return "step: denied without the Guardian's deny";
  const f = r.refusal;
  if (r.phase === "refused" || r.phase === "denied") {
    if (
      f === null ||
      typeof f !== "object" ||
      typeof f?.code !== "string" ||
      typeof f?.detail !== "string" ||
      (f.terminal !== null && !(TERMINAL_REASONS as ReadonlyArray<unknown>).includes(f.terminal))
    ) {
      return "step: refused without its refusal";
    }
  } else if (f !== null) return "step: a refusal outside a refused or denied step";
  const res = r.result;
  if (r.phase === "executed") {
    if (
      res === null ||
      typeof res !== "object" ||
      !DIGEST.test(String(res?.output_digest)) ||
      typeof res?.delta !== "boolean" ||
      (res.exit_code !== null && !Number.isSafeInteger(res.exit_code))
    ) {
      return "step: executed without its result";
    }
  } else if (res !== null) return "step: a result outside an executed step";
  return null;
}

/**
 * Commit one mediated step (one synced append, indexed by the run id). Resolves only once durable:
 * an action runs only after its `admitted` step committed, and a refusal counts only once its
 * audit committed. With `audit` (a Guardian's review of the step's ask, ADR 0010 §1) the record
 * and its two permission-review events commit in the same append, before the step:
 * `[auto_audit_started, record, auto_audit_completed, step]`. A step that consumes a one-shot
 * capability is a compare-and-swap on {@link capabilityStateKey} having no entry: a reuse, or a
 * second writer consuming it concurrently, writes nothing.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_RECORD` (nothing written), `ASP_AUTO_MODE_PERSIST_FAILED`
 *   (category `integrity`) when the append did not commit. EvidenceError
 *   `ASP_EVIDENCE_CONDITION_FAILED` when the capability was already consumed (nothing written).
 */
export async function commitStep(log: FactLog, runId: string, record: StepRecord, audit?: StepAudit): Promise<void> {
  const problems: string[] = [];
  const problem = checkStepRecord(record);
  if (problem !== null) problems.push(problem);
  const g = record.guardian ?? null;
  // A Guardian's review commits its audit with the step; a repeat of a denied action names the earlier one.
  if ((g === null || g.repeat) !== (audit === undefined))
    problems.push("step: a Guardian review without its audit, or the reverse");
  if (audit !== undefined) {
    const rp = checkRecord(audit.record.kind, audit.record.record);
    if (rp !== null) problems.push(rp);
    for (const ev of [audit.started, audit.completed]) {
      const ep = checkEvent(ev);
      if (ep !== null) problems.push(ep);
    }
  }
  if (problems.length > 0) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_RECORD", "a step record does not validate; nothing written", {
      data: { problems: problems.slice(0, 5) },
    });
  }
  const index = [{ name: RUN_ID_INDEX, value: runId }];
  const capability = g?.capability_id ?? null;
  const facts: FactInput[] = [];
  if (audit !== undefined) {
    facts.push(
      { kind: AUTO_FACT_KINDS.event, record: audit.started, index },
      {
        kind: AUTO_FACT_KINDS[audit.record.kind],
        record: { event_id: audit.completed.event_id, body: audit.record.record } satisfies RecordFact,
        index,
      },
      { kind: AUTO_FACT_KINDS.event, record: audit.completed, index },
    );
  }
  facts.push({
    kind: AUTO_STEP_KIND,
    record: { step_id: stepIdOf(runId, record.ordinal), body: record },
    index,
    ...(capability === null ? {} : { state: [capabilityStateKey(capability)] }),
  });
  try {
    await log.append(
      facts,
      capability === null ? {} : { expect: [{ key: capabilityStateKey(capability), seq: null }] },
    );
  } catch (cause) {
    // A consumed capability is refused, not a persistence failure: nothing was written.
    if ((cause as { code?: unknown }).code === "ASP_EVIDENCE_CONDITION_FAILED") throw cause;
    throw new AutoModeError("ASP_AUTO_MODE_PERSIST_FAILED", "the step audit did not commit", {
      category: "integrity",
      cause,
      data: { phase: record.phase, ordinal: record.ordinal },
    });
  }
}
