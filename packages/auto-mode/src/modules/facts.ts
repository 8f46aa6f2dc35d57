import { canonicalize, type FactEntry, type FrozenSnapshot } from "@asp/evidence";
import {
  AUTO_FACT_KINDS,
  AUTO_STEP_KIND,
  type AutoRecordKind,
  checkEvent,
  checkRecord,
  checkStepRecord,
  type RecordFact,
  type StepRecord,
} from "../durable.js";
import type { MachineFact, MachineInput, RunReplay } from "../machine.js";

// The projection's side of the run machine: a run's committed facts, read once, checked record by
// record, and replayed through RUN_MACHINE. Each stage module proves its own facts from this.

/** A committed fact as the projection reads it (a fact log entry's seq, kind and record). */
export type ProjectionFact = Pick<FactEntry, "seq" | "kind" | "record">;

/** What the projection projects from: the run's facts and the store's hash checks. */
export interface ProjectionInput {
  readonly runId: string;
  readonly facts: ReadonlyArray<ProjectionFact>;
  /**
   * For every snapshot digest the facts name: the frozen snapshot as the object store holds it
   * when it and every ref re-hash, or null when it does not verify.
   */
  readonly snapshots: Readonly<Record<string, Pick<FrozenSnapshot, "refs" | "labels"> | null>>;
  /** For every payload digest the facts name: whether the payload blob re-hashes. */
  readonly payloadsVerified: Readonly<Record<string, boolean>>;
}

/** One committed record, with the event it committed with. */
export interface Rec<T> {
  readonly seq: number;
  readonly event_id: string;
  readonly body: T;
}

/** A committed event, by its event id. */
export interface CommittedEvent {
  readonly seq: number;
  readonly event: Record<string, unknown>;
}

/** A run's committed facts, each checked on its own, and their replay through the run machine. */
export interface RunFacts {
  readonly input: ProjectionInput;
  readonly events: ReadonlyMap<string, CommittedEvent>;
  /** The events in commit order. */
  readonly ordered: ReadonlyArray<{ readonly seq: number; readonly ev: Record<string, unknown> }>;
  readonly recs: { readonly [K in AutoRecordKind]: ReadonlyArray<Rec<unknown>> };
  readonly steps: ReadonlyArray<{ readonly seq: number; readonly body: StepRecord }>;
  /** The committed inputs of the run machine (events and steps), in commit order. */
  readonly inputs: ReadonlyArray<MachineFact>;
  /** The inputs replayed through the run machine (`replayRun`). */
  readonly replay: RunReplay;
}

/** Collects why a projection fails closed. */
export type Problems = (problem: string) => void;

/** Canonical equality; anything that cannot canonicalize is never equal. Pure. */
export const same = (a: unknown, b: unknown): boolean => {
  try {
    return canonicalize(a) === canonicalize(b);
  } catch {
    return false;
  }
};

/**
 * Read a run's committed facts: each event, record and step checked on its own (schema, kind,
 * event id), every record's event committed, and the committed inputs replayed through the run
 * machine by `replay` (`replayRun`: the same table the runner wrote by). Pure; problems go to `bad`.
 */
export function readFacts(
  input: ProjectionInput,
  replay: (inputs: ReadonlyArray<MachineFact>) => RunReplay,
  bad: Problems,
): RunFacts {
  const events = new Map<string, CommittedEvent>();
  const recs: { [K in AutoRecordKind]: Rec<unknown>[] } = {
    run: [],
    candidate: [],
    snapshot: [],
    review: [],
    finding: [],
    repair: [],
    terminal: [],
    ledger: [],
    stages: [],
    guardian: [],
    guardian_failure: [],
  };
  const kindOf = new Map<string, AutoRecordKind>(
    Object.entries(AUTO_FACT_KINDS)
      .filter(([k]) => k !== "event")
      .map(([k, v]) => [v, k as AutoRecordKind]),
  );
  const recordEvents = new Map<string, AutoRecordKind[]>();
  const steps: { seq: number; body: StepRecord }[] = [];
  const inputs: MachineFact[] = [];
  for (const fact of [...input.facts].sort((a, b) => a.seq - b.seq)) {
    if (fact.kind === AUTO_STEP_KIND) {
      const body = (fact.record as { body?: unknown } | null)?.body;
      const p = checkStepRecord(body);
      if (p !== null) bad(`seq ${fact.seq}: ${p}`);
      else {
        steps.push({ seq: fact.seq, body: body as StepRecord });
        inputs.push({ seq: fact.seq, input: `step:${(body as StepRecord).phase}` });
      }
      continue;
    }
    if (fact.kind === AUTO_FACT_KINDS.event) {
      const p = checkEvent(fact.record);
      if (p !== null) {
        bad(`seq ${fact.seq}: ${p}`);
        continue;
      }
      // A permission review's audit events are carried by the step that records its ask (ADR 0010
      // §1): not machine inputs of their own; the Guardian proof binds them to that step.
      if ((fact.record as { subject_kind?: unknown }).subject_kind !== "permission_review")
        inputs.push({ seq: fact.seq, input: (fact.record as { type: MachineInput }).type });
      const ev = fact.record as Record<string, unknown> & { event_id: string };
      if (events.has(ev.event_id)) bad(`event ${ev.event_id} committed twice`);
      events.set(ev.event_id, { seq: fact.seq, event: ev });
      continue;
    }
    const kind = kindOf.get(fact.kind);
    if (kind === undefined) {
      bad(`seq ${fact.seq}: unknown fact kind ${fact.kind}`);
      continue;
    }
    const r = fact.record as Partial<RecordFact> | null;
    if (typeof r?.event_id !== "string") {
      bad(`seq ${fact.seq}: ${kind} record without its event id`);
      continue;
    }
    const p = checkRecord(kind, r.body);
    if (p !== null) {
      bad(`seq ${fact.seq}: ${p}`);
      continue;
    }
    recs[kind].push({ seq: fact.seq, event_id: r.event_id, body: r.body });
    recordEvents.set(r.event_id, [...(recordEvents.get(r.event_id) ?? []), kind]);
  }
  const replayed = replay(inputs);
  for (const v of replayed.violations) bad(`run machine: ${v}`);
  // Every record's transition event committed (a record without its audit row is unreconcilable).
  for (const [eventId, kinds] of recordEvents) {
    if (!events.has(eventId)) bad(`records ${kinds.join(",")} have no committed event ${eventId}`);
  }
  const ordered = [...events.values()].sort((a, b) => a.seq - b.seq).map((e) => ({ seq: e.seq, ev: e.event }));
  return { input, events, ordered, recs, steps, inputs, replay: replayed };
}
