import { type SchemaName, validate } from "@asp/contracts";
import type { FactEntry, FactInput, FactLog } from "@asp/evidence";
import { checkAuditCompletion } from "./audit.js";
import { AutoModeError } from "./errors.js";
import { checkRunStages } from "./stages.js";

/** The fact kinds an Auto Run's records are stored under, one per durable record kind. */
export const AUTO_FACT_KINDS = Object.freeze({
  run: "auto.run",
  candidate: "auto.candidate",
  snapshot: "auto.snapshot",
  review: "auto.review_run",
  finding: "auto.finding",
  terminal: "auto.terminal",
  ledger: "auto.budget_ledger",
  /** The stages the run runs under (`RunStages`), committed with `auto_run_started`. */
  stages: "auto.stages",
  event: "auto.event",
} as const);

/** One of the record kinds of {@link AUTO_FACT_KINDS} (everything but the event). */
export type AutoRecordKind = Exclude<keyof typeof AUTO_FACT_KINDS, "event">;

/** The fact log state key whose latest entry is a run's latest `auto.run` record. */
export function runStateKey(runId: string): string {
  return `auto.run:${runId}`;
}

/** The fact index every fact of one run carries: name `auto.run_id`, value the run id. */
export const RUN_ID_INDEX = "auto.run_id";

const SCHEMA: Readonly<Record<Exclude<AutoRecordKind, "stages">, SchemaName>> = {
  run: "auto-run",
  candidate: "candidate",
  snapshot: "evidence-snapshot",
  review: "review-run",
  finding: "finding",
  terminal: "terminal-record",
  ledger: "budget-ledger",
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
 * notifies after this resolves, never before.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_RECORD` when a record or the event does not validate
 *   (nothing is written); `ASP_AUTO_MODE_PERSIST_FAILED` (category `integrity`) when the append did
 *   not commit.
 */
export async function commitTransition(log: FactLog, runId: string, transition: Transition): Promise<FactEntry[]> {
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
    return await log.append(facts);
  } catch (cause) {
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
