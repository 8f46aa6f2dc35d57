import type { ActionResult, BudgetLedger } from "@asp/contracts";
import { HOST_TOOLS } from "../actions.js";
import type { EngineStep } from "../engine.js";
import type { MachineTransition } from "../machine.js";
import { ABORTED, type RunContext, type TerminalOutcome } from "../run/context.js";
import { mediateAction } from "./actions.js";
import type { Completion } from "./candidate.js";
import type { Problems, RunFacts } from "./facts.js";
import type { RunBase } from "./storage.js";

// The Engine module (Auto Mode I): the Engine's turns, admitted one by one through the budget
// ledger. Its activity reads the Engine's steps up to a completion; its proof checks the ledger
// only ever moves forward.

/** The rows the Engine module adds to the run machine. */
export const ENGINE_ROWS: ReadonlyArray<MachineTransition> = [
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
];

/**
 * Activity: read the Engine's steps up to its first completion, or the outcome that ends the run
 * without one. Every step is admitted first (wall time, tokens, the open circuit); the Engine gets
 * the run's abort signal, and an Engine that ignores it never holds the run. An Engine that throws
 * is an ordinary Agent failure; any other failure (a step audit that did not commit) reaches the
 * caller: the safety boundary.
 */
export async function driveEngine(ctx: RunContext): Promise<Completion | TerminalOutcome> {
  const failed: TerminalOutcome = { kind: "reason", reason: "agent_failed", candidateId: null };
  let it: AsyncIterator<EngineStep, void, ActionResult | undefined>;
  try {
    const steps = ctx.options.engine.run({
      run: ctx.run,
      task: ctx.task,
      tools: ctx.options.workspace === undefined ? [] : HOST_TOOLS,
      signal: ctx.signal,
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
      const gate = ctx.admitNext(null);
      if (gate !== null) return gate;
      let next: IteratorResult<EngineStep, void> | typeof ABORTED;
      try {
        next = await ctx.orAbort(Promise.resolve().then(() => it.next(reply as ActionResult)));
      } catch {
        return failed;
      }
      if (next === ABORTED) return ctx.admitNext(null) ?? failed;
      reply = undefined;
      if (next.done === true) return failed;
      const step = next.value as EngineStep | { kind?: unknown };
      switch (step.kind) {
        case "prose":
          // Prose never makes a candidate; under Stage 4 it streams provisional.
          ctx.provisional("prose", String((step as { text?: unknown }).text ?? ""));
          break;
        case "turn": {
          const usage = (step as { usage?: { input_tokens?: unknown; output_tokens?: unknown } }).usage;
          const input = usage?.input_tokens as number;
          const output = usage?.output_tokens as number;
          if (!Number.isSafeInteger(input) || !Number.isSafeInteger(output) || input < 0 || output < 0) return failed;
          // The producing run is the initial turn (ADR 0009): its tokens are the base of the 1.5x
          // budget, which Auto Mode's own later turns (review, repair) spend.
          const tokens = ctx.meter.recordTurnTokens(input + output, "initial");
          const turn = ctx.meter.recordTurn({ progress });
          await ctx.step({ phase: "turn", usage: { input_tokens: input, output_tokens: output }, progress });
          progress = false;
          if (!tokens.admitted) return ctx.refusal(tokens, null);
          if (!turn.admitted) return ctx.refusal(turn, null);
          break;
        }
        case "action": {
          const acted = await mediateAction(ctx, (step as { action?: unknown }).action, { guardian: true });
          if ("kind" in acted) return acted;
          reply = acted.result;
          if (acted.delta) progress = true;
          break;
        }
        case "cancelled":
          // Only the user cancels, through the host: an Engine's claim that it was cancelled is
          // its own stop, an Agent failure (ADR 0009 §9), unless the host's cancel did abort it.
          return ctx.admitNext(null) ?? failed;
        case "max_turns": {
          // The Engine's own turn limit is a turn budget: budget_exhausted naming it (ADR 0009).
          const turns = (step as { turns?: unknown }).turns as number;
          await ctx.step({ phase: "max_turns", turns: Number.isSafeInteger(turns) && turns >= 0 ? turns : 0 });
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
 * Prove the budget ledger only moves forward: one start (the run's), circuits that never close,
 * spent amounts that never shrink, in commit order across transitions and steps.
 */
export function proveLedger(facts: RunFacts, base: RunBase, bad: Problems): void {
  const ledgers = [
    ...facts.recs.ledger.map((l) => ({ seq: l.seq, body: l.body as BudgetLedger })),
    ...facts.steps.map((st) => ({ seq: st.seq, body: st.body.ledger })),
  ].sort((x, y) => x.seq - y.seq);
  const startedEvent = [...facts.events.values()].find((e) => e.event.type === "auto_run_started")?.event;
  const origin = ledgers[0]?.body.started_at;
  if (
    origin !== undefined &&
    (Date.parse(origin) < Date.parse(base.first.created_at) - 1_000 ||
      (startedEvent !== undefined && Date.parse(origin) > Date.parse(String(startedEvent.committed_at))))
  ) {
    bad("the ledger's start is not the run's");
  }
  for (let i = 1; i < ledgers.length; i++) {
    const prev = (ledgers[i - 1] as { body: BudgetLedger }).body;
    const cur = (ledgers[i] as { body: BudgetLedger }).body;
    const shrank = (["extra_tokens", "extra_cells", "repair_rounds"] as const).some(
      (c) => cur.consumed[c] < prev.consumed[c],
    );
    if (
      cur.started_at !== prev.started_at ||
      (prev.circuits.no_progress === "open" && cur.circuits.no_progress !== "open") ||
      (prev.circuits.guardian_denial === "open" && cur.circuits.guardian_denial !== "open") ||
      (cur.initial_turn_tokens ?? 0) < (prev.initial_turn_tokens ?? 0) ||
      shrank
    ) {
      bad(`seq ${(ledgers[i] as { seq: number }).seq}: the budget ledger moved backwards`);
    }
  }
}
