import type { ServerResponse } from "node:http";
import {
  AUTO_FACT_KINDS,
  AUTO_STEP_KIND,
  checkEvent,
  permissionResolvedEvent,
  RUN_ID_INDEX,
  type StepRecord,
} from "@asp/auto-mode";
import { AUTO_EVENT_TYPES, validate } from "@asp/contracts";
import type { FactEntry, FactLog } from "@asp/evidence";
import { APPLY_FACT_KINDS, FACT_KINDS } from "@asp/ths";

/** The event types the stream carries: the contract's seven, `permission_resolved`, decisions and applies. */
export const STREAM_EVENT_TYPES = [...AUTO_EVENT_TYPES, "permission_resolved", "decision", "apply"] as const;
/** One of {@link STREAM_EVENT_TYPES}. */
export type StreamEventType = (typeof STREAM_EVENT_TYPES)[number];

/** One event of the stream: a committed fact's seq (its SSE `id`), when it committed, and what it says. */
export interface StreamEvent {
  readonly seq: number;
  readonly at: string;
  readonly type: StreamEventType;
  /** The canonical event as committed, `permission_resolved` as the run sent it, or the receipt. */
  readonly data: unknown;
}

/**
 * The stream event a committed fact stands for, or null when it stands for none (most facts:
 * records, snapshots, health). Only what validates is ever streamed: a canonical event checked
 * against its schema (a completion re-hashed), a receipt against its schema. `prior` looks up the
 * fact just before this one (a step's permission audit commits in the same append, right before
 * the step) when a Guardian's resolution needs its completion.
 */
export async function streamEventOf(
  entry: FactEntry,
  prior: (seq: number) => Promise<FactEntry | undefined>,
): Promise<StreamEvent | null> {
  const at = entry.at;
  switch (entry.kind) {
    case AUTO_FACT_KINDS.event: {
      if (checkEvent(entry.record) !== null) return null;
      const type = (entry.record as { type: StreamEventType }).type;
      return { seq: entry.seq, at, type, data: entry.record };
    }
    case AUTO_STEP_KIND: {
      const step = (entry.record as { body?: StepRecord }).body;
      const g = step?.guardian ?? null;
      // A Guardian resolves an ask only under Stage 7 (`enforce`); a repeat of a denied action
      // commits no audit of its own and resolves nothing new.
      if (step === undefined || g === null || g.mode !== "enforce" || g.repeat || step.action === null) return null;
      const completed = await prior(entry.seq);
      const event = completed?.record as { type?: string; audit_id?: string; committed_at?: string } | undefined;
      if (completed?.kind !== AUTO_FACT_KINDS.event || event?.type !== "auto_audit_completed") return null;
      if (event.audit_id !== g.audit_id || typeof event.committed_at !== "string") return null;
      const resolved = permissionResolvedEvent({
        run: step.run,
        committed_at: event.committed_at,
        audit_id: g.audit_id,
        decision: g.decision,
        action_digest: step.action.action_digest,
      });
      return { seq: entry.seq, at, type: "permission_resolved", data: resolved };
    }
    case FACT_KINDS.receipt:
      return validate("audit-receipt", entry.record).ok
        ? { seq: entry.seq, at, type: "decision", data: entry.record }
        : null;
    case APPLY_FACT_KINDS.receipt:
      return validate("apply-receipt", entry.record).ok
        ? { seq: entry.seq, at, type: "apply", data: entry.record }
        : null;
    default:
      return null;
  }
}

/** How {@link openStream} is set up. */
export interface StreamOptions {
  readonly log: Pick<FactLog, "list" | "read" | "head">;
  /** Stream facts with a larger seq than this (the client's `Last-Event-ID`, or `after`). */
  readonly after: number;
  /** Only the facts of this run (its id), when given. */
  readonly runId?: string;
  /** How long to wait between looks at the log when there is nothing new, in ms. */
  readonly pollMs: number;
  /** A comment line every this many ms keeps proxies from closing an idle stream. */
  readonly keepAliveMs: number;
  /** Timers (injected in tests). */
  readonly timers?: {
    setTimeout(fn: () => void, ms: number): unknown;
    clearTimeout(handle: unknown): void;
  };
}

const PAGE = 256;

/**
 * Write committed facts to `res` as server-sent events, from `after` on, until the client goes
 * or `stop()` is called: `id` is the fact's seq, so a client that reconnects with
 * `Last-Event-ID` gets exactly the facts after the last one it saw (no duplicate, no gap).
 * The log is read in seq order; nothing is sent before it committed.
 */
export function openStream(res: ServerResponse, options: StreamOptions): { stop: () => void; done: Promise<void> } {
  const timers = options.timers ?? {
    setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms),
    clearTimeout: (h: unknown) => clearTimeout(h as NodeJS.Timeout),
  };
  let stopped = false;
  let wake: (() => void) | null = null;
  let timer: unknown = null;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    if (timer !== null) timers.clearTimeout(timer);
    wake?.();
  };
  res.once("close", stop);
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      wake = resolve;
      timer = timers.setTimeout(() => {
        timer = null;
        resolve();
      }, ms);
    });
  const write = (text: string): Promise<void> =>
    new Promise((resolve) => {
      if (stopped || res.writableEnded) return resolve();
      // Backpressure: wait for the socket to drain before reading more of the log.
      if (res.write(text)) resolve();
      else res.once("drain", () => resolve());
    });

  const run = async () => {
    let cursor = options.after;
    let idle = 0;
    const prior = async (seq: number) => (seq > 1 ? options.log.read(seq - 1) : undefined);
    await write(": asp event stream\n\n");
    while (!stopped) {
      const page = await options.log.list({ afterSeq: cursor, limit: PAGE });
      for (const entry of page) {
        if (stopped) break;
        cursor = entry.seq;
        if (
          options.runId !== undefined &&
          !entry.index.some((k) => k.name === RUN_ID_INDEX && k.value === options.runId)
        )
          continue;
        const event = await streamEventOf(entry, prior);
        if (event === null) continue;
        await write(`id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
        idle = 0;
      }
      if (page.length === PAGE) continue;
      await sleep(options.pollMs);
      idle += options.pollMs;
      if (idle >= options.keepAliveMs) {
        idle = 0;
        await write(": keep-alive\n\n");
      }
    }
  };
  const done = run()
    .catch(async () => {
      // A log that stops verifying ends the stream visibly; the client reconnects from its last id.
      await write('event: stream_error\ndata: {"code":"ASP_SERVER_STREAM_FAILED"}\n\n');
    })
    .finally(() => {
      stop();
      if (!res.writableEnded) res.end();
    });
  return { stop, done };
}
