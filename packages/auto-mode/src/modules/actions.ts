import type { ActionResult, ExhaustedLimit, ProposedAction } from "@asp/contracts";
import { type ActionWorkspace, type CanonicalAction, canonicalizeAction } from "../actions.js";
import type { StepRecord } from "../durable.js";
import type { MachineTransition } from "../machine.js";
import type { RunContext, TerminalOutcome } from "../run/context.js";
import { guardianMode } from "../stages.js";
import { type Problems, type RunFacts, same } from "./facts.js";
import { type GuardianReview, permissionResolved, reviewAsk } from "./guardian.js";
import type { RunBase } from "./storage.js";

// The actions module (Auto Mode I): the host mediates every action the Engine proposes. Its
// activity canonicalizes, admits, classifies and runs an action through the host's adapters,
// committing the admission before and the result after; its proof checks a result exists only
// for an admitted action.

/** The rows the actions module adds to the run machine. */
export const ACTION_ROWS: ReadonlyArray<MachineTransition> = [
  {
    module: "actions",
    stage: "stage2_auto_run_storage",
    from: "started",
    on: "step:admitted",
    to: "acting",
    entry:
      "the canonical action passed the ledger (wall time, tokens, circuits, cells) and deterministic policy allowed it, or (Stage 7 with auto_review) policy asked and this append consumes the Guardian's one-shot allow for this exact action; nothing has run",
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
      "an unknown tool, an uncanonicalizable target, a deny, an ask without a channel (Stage 6: with the Guardian's advice), a spent budget, an open circuit or (Stage 7) the Guardian's stop refused the unexecuted action; its audit committed",
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

const utf8 = new TextEncoder();
/** What a tool result may carry back to the model (64 KiB). */
const clip = (text: string): string => (text.length > 65_536 ? `${text.slice(0, 65_536)}\n[clipped]` : text);

type Refusal = "policy_requires_explicit_setup" | "safety_boundary" | "loop_detected" | "budget_exhausted";

/**
 * Activity: mediate one proposed action: canonicalize and digest it, admit it through the ledger,
 * classify it under deterministic policy, commit its admission, run it through the host's adapters
 * and commit the result. A refusal commits its audit, then ends the run with its terminal reason.
 */
export async function mediateAction(
  ctx: RunContext,
  proposal: unknown,
  options: {
    readonly guardian?: boolean;
    /** The adapters' workspace, when not the run's own (a Repair's staged view of it). */
    readonly workspace?: ActionWorkspace;
  } = {},
): Promise<{ result: ActionResult; delta: boolean } | TerminalOutcome> {
  const actionOrdinal = ctx.nextActionOrdinal();
  const canonical = canonicalizeAction(proposal as ProposedAction);
  const toolName = String((proposal as { tool?: unknown } | null)?.tool ?? "").slice(0, 128);
  const refuse = async (
    terminal: Refusal,
    code: string,
    detail: string,
    action: StepRecord["action"],
    limit?: ExhaustedLimit,
  ): Promise<TerminalOutcome> => {
    await ctx.step({ phase: "refused", action, refusal: { code, detail: detail.slice(0, 500), terminal } });
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
  const repeat = ctx.meter.admitAction(a.digest);
  if (!repeat.admitted) {
    // The wall time or an open circuit may refuse here too: the refusal names what refused.
    return repeat.reason === "loop_detected"
      ? refuse("loop_detected", "same_action_no_delta", "this action without a durable delta reached its circuit", base)
      : refuse("budget_exhausted", "budget_exhausted", `${repeat.limit} is spent`, base, repeat.limit);
  }
  const cells = ctx.meter.admitCells(1);
  if (!cells.admitted) return refuse("budget_exhausted", "budget_exhausted", "no Cell budget left", base, cells.limit);
  const { permissions, flags } = ctx.options;
  const workspace = options.workspace ?? ctx.options.workspace;
  // The credential-shaped file fence is Stage 7's deterministic control.
  const fence = flags.isEnabled("stage7_guardian_enforcement");
  const classification = permissions?.classify(a.permission, { fence }) ?? {
    outcome: "ask" as const,
    reason: "no permission policy: the built-in default is ask",
    fenced: false,
  };
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
  let resolved: GuardianReview | null = null;
  if (classification.outcome !== "allow") {
    const mode = options.guardian === true ? guardianMode(ctx.stages, ctx.record.selection) : "off";
    // The credential-shaped file fence's ask is policy's: no Guardian reviews it (only a human
    // channel could), and headless it is refused as policy's, never as a Guardian verdict.
    if (
      mode === "off" ||
      classified.classification.fenced ||
      ctx.options.guardian === undefined ||
      workspace === undefined
    ) {
      // No channel resolves this ask: refused headless, attributed to policy.
      return refuse(
        "policy_requires_explicit_setup",
        "ask_without_channel",
        `${classified.classification.reason}; no approval channel is attached`,
        classified,
      );
    }
    const prior = mode === "enforce" ? ctx.guardianDenials.get(a.digest) : undefined;
    if (prior !== undefined) {
      // The same exact action (a retry, a renamed spelling of one effect) the Guardian already
      // denied: never asked again, counted as another denial toward the circuit.
      ctx.meter.askGuardian(a.digest);
      const counted = ctx.meter.recordGuardianDecision("deny");
      const guardian = {
        mode,
        record_id: prior.record_id,
        audit_id: prior.audit_id,
        decision: "deny" as const,
        capability_id: null,
        repeat: true,
      };
      if (!counted.admitted) {
        await ctx.step({
          phase: "refused",
          action: classified,
          refusal: {
            code: "guardian_denial_circuit",
            detail: "the Agent proposed an action the Guardian already denied, and the denial circuit is open",
            terminal: null,
          },
          guardian,
        });
        return { kind: "guardian", recordId: prior.record_id, loop: true, candidateId: null };
      }
      const reason = `the Guardian already denied this exact action: ${prior.rationale}`.slice(0, 500);
      await ctx.step({
        phase: "denied",
        action: classified,
        refusal: { code: "guardian_denied_repeat", detail: reason, terminal: null },
        guardian,
      });
      return {
        result: { status: "refused", action_digest: a.digest, code: "guardian_denied_repeat", reason },
        delta: false,
      };
    }
    const review = await reviewAsk(ctx, classified, mode);
    if ("outcome" in review) return review.outcome;
    const { audit, guardian } = review;
    if (mode === "shadow") {
      // Stage 6: the advice is recorded beside the refusal and resolves nothing.
      await ctx.step(
        {
          phase: "refused",
          action: classified,
          refusal: {
            code: "ask_without_channel",
            detail:
              `${classified.classification.reason}; no approval channel is attached (the Guardian's Stage 6 advice is recorded and resolves nothing)`.slice(
                0,
                500,
              ),
            terminal: "policy_requires_explicit_setup",
          },
          guardian,
        },
        audit,
      );
      return { kind: "reason", reason: "policy_requires_explicit_setup", candidateId: null };
    }
    const stop = async (code: string, detail: string, loop: boolean): Promise<TerminalOutcome> => {
      await ctx.step(
        {
          phase: "refused",
          action: classified,
          refusal: { code, detail: detail.slice(0, 500), terminal: null },
          guardian,
        },
        audit,
      );
      permissionResolved(ctx, review, a.digest);
      return { kind: "guardian", recordId: guardian.record_id, loop, candidateId: null };
    };
    const answer = review.answer;
    if (answer === null) {
      const failure = (audit.record.record as { detail?: string }).detail ?? "the Guardian gave no answer";
      const code = review.failure === "guardian_failed" ? "guardian_failed" : `guardian_${review.failure}`;
      return stop(code, failure, false);
    }
    if (review.circuit) {
      return stop(
        "guardian_denial_circuit",
        `the Guardian's denial circuit is open (${ctx.meter.toJSON().consumed.guardian_consecutive_denials} consecutive denials)`,
        true,
      );
    }
    if (answer.decision === "deny") {
      if (!answer.recoverable) return stop("guardian_denied", answer.rationale, false);
      // A recoverable deny: nothing ran, the rationale goes back to the Agent for a safer plan.
      await ctx.step(
        {
          phase: "denied",
          action: classified,
          refusal: { code: "guardian_denied", detail: answer.rationale.slice(0, 500), terminal: null },
          guardian,
        },
        audit,
      );
      permissionResolved(ctx, review, a.digest);
      ctx.guardianDenials.set(a.digest, {
        record_id: guardian.record_id,
        audit_id: guardian.audit_id,
        rationale: answer.rationale,
      });
      return {
        result: { status: "refused", action_digest: a.digest, code: "guardian_denied", reason: answer.rationale },
        delta: false,
      };
    }
    // A one-shot allow: the admitted step below consumes its capability, in the same append.
    resolved = review;
  }
  if (workspace === undefined) {
    return refuse(
      "policy_requires_explicit_setup",
      "no_workspace",
      "the host offers no tool adapters to this run",
      classified,
    );
  }
  // The admission commits before anything runs: a result is accepted only for an admitted action.
  // An admission on the Guardian's allow consumes its one-shot capability (a compare-and-swap).
  if (resolved === null) await ctx.step({ phase: "admitted", action: classified });
  else {
    await ctx.step({ phase: "admitted", action: classified, guardian: resolved.guardian }, resolved.audit);
    permissionResolved(ctx, resolved, a.digest);
  }
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
      const ran = await workspace.run(a.argv as string[], ctx.signal);
      exitCode = ran.exitCode;
      // What the command changed is a write: each path must be one policy lets the agent write,
      // and a changed file is a durable delta.
      for (const path of ran.changedPaths) {
        if (permissions?.classify({ tool: "write_file", path }, { fence }).outcome !== "allow") {
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
  ctx.meter.recordAction(a.digest, { durableDelta: delta });
  const outputDigest = await ctx.options.store.objects.putBlob(utf8.encode(output));
  await ctx.step({
    phase: "executed",
    action: classified,
    result: { output_digest: outputDigest, delta, exit_code: exitCode },
  });
  return { result: { status: "executed", action_digest: a.digest, output }, delta };
}

/**
 * Prove the mediated steps: this run's, numbered in commit order, each ledger under the run's
 * frozen limits, none after the terminal; an action ran only after its allowed admission committed,
 * and no action ordinal is reused.
 */
export function proveSteps(facts: RunFacts, base: RunBase, terminalSeq: number | undefined, bad: Problems): void {
  const admitted = new Map<number, StepRecord["action"]>();
  const ordinals = new Set<number>();
  let lastAdmitted: number | null = null;
  facts.steps.forEach((st, i) => {
    const b = st.body;
    if (!same(b.run, base.run)) bad(`step ${b.ordinal} of another run`);
    if (b.ordinal !== i + 1) bad(`step ${b.ordinal} out of order`);
    if (!same(b.ledger.limits, base.first.budgets)) bad(`step ${b.ordinal}: ledger under other limits`);
    if (terminalSeq !== undefined && st.seq > terminalSeq) bad(`step ${b.ordinal} committed after the terminal`);
    const a = b.action;
    if (b.phase === "admitted" && a !== null) {
      // Policy allowed it, or (Stage 7) it asked and the Guardian's one-shot allow admitted it
      // (proved by the Guardian module).
      const byGuardian = a.classification?.outcome === "ask" && b.guardian?.decision === "allow";
      if (a.classification?.outcome !== "allow" && !byGuardian)
        bad(`step ${b.ordinal}: admitted an action policy did not allow`);
      admitted.set(a.action_ordinal, a);
    }
    if (b.phase === "executed" && a !== null) {
      if (!same(admitted.get(a.action_ordinal), a)) bad(`step ${b.ordinal}: a result for an action never admitted`);
      admitted.delete(a.action_ordinal);
    }
    if (b.phase === "refused" && a !== null && admitted.has(a.action_ordinal)) {
      if (!same(admitted.get(a.action_ordinal), a))
        bad(`step ${b.ordinal}: refuses another action than the admitted one`);
      admitted.delete(a.action_ordinal);
    }
    if (a !== null && b.phase !== "executed" && !(b.phase === "refused" && a.action_ordinal === lastAdmitted)) {
      // (A recoverable `denied` action is never retried under its ordinal: a new proposal is a new ordinal.)
      if (ordinals.has(a.action_ordinal)) bad(`step ${b.ordinal}: action ordinal ${a.action_ordinal} reused`);
      ordinals.add(a.action_ordinal);
    }
    if (b.phase === "admitted" && a !== null) lastAdmitted = a.action_ordinal;
  });
}
