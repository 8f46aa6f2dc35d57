import type { GuardianAssessment, VerifierBoundary, VerifierLaunch } from "@asp/contracts";
import { auditCompletedEvent, auditStartedEvent } from "../audit.js";
import { type AutoEvent, type StepAudit, type StepGuardian, type StepRecord, stepIdOf } from "../durable.js";
import {
  checkGuardianAssessment,
  checkGuardianFailure,
  type GuardianAnswer,
  type GuardianFailure,
  type GuardianFailureOutcome,
  guardianAssessment,
  guardianFailure,
  guardianRequestOf,
  parseGuardianAnswer,
  permissionAssessmentOf,
  permissionAuditRequest,
} from "../guardian.js";
import type { MachineTransition } from "../machine.js";
import { boundaryMark, boundarySince } from "../review.js";
import type { RunContext, TerminalOutcome } from "../run/context.js";
import { type Problems, type Rec, type RunFacts, same } from "./facts.js";
import type { RunBase } from "./storage.js";

// The Guardian module (Stages 6 and 7, ADR 0010): only an `ask` of deterministic policy reaches
// the Guardian. Its activity asks under the decision timeout and builds the permission-review
// audit (the assessment or failure record and its two audit events) that the step recording the
// ask commits in the same append; its proof (in `guardian-proof.ts`) checks every Guardian fact
// against the step it is bound to.

/** The rows the Guardian module adds to the run machine. */
export const GUARDIAN_ROWS: ReadonlyArray<MachineTransition> = [
  {
    module: "guardian",
    stage: "stage7_guardian_enforcement",
    from: "started",
    on: "step:denied",
    to: "started",
    entry:
      "Stage 7 with auto_review: the Guardian denied an ask recoverably below both denial thresholds; its assessment and permission audit committed in the step's append; nothing ran and the rationale goes back to the Agent",
    test: "guardian-run.test.ts: a recoverable deny returns its rationale to the Agent, nothing runs",
  },
  {
    module: "guardian",
    stage: "stage7_guardian_enforcement",
    from: "repairing",
    on: "step:denied",
    to: "repairing",
    entry:
      "Stage 7 with auto_review: the Guardian denied a Repair Agent's ask recoverably below both denial thresholds; its assessment and permission audit committed in the step's append; nothing ran and the rationale goes back to the Repair Agent",
    test: "repair.test.ts: a recoverable deny of a Repair write runs nothing and returns its rationale",
  },
];

/** What asking the Guardian about one ask gave, ready to commit with the step that records it. */
export interface GuardianReview {
  readonly audit: StepAudit;
  readonly guardian: StepGuardian;
  /** The answer, or null when the Guardian gave none ({@link GuardianReview.failure}). */
  readonly answer: GuardianAnswer | null;
  readonly failure: GuardianFailureOutcome | null;
  /** Stage 7: the denial circuit opened on this decision. */
  readonly circuit: boolean;
}

/** The `permission_resolved` notification (the host's existing event type), sent after commit. */
export interface PermissionResolvedEvent {
  readonly event_id: string;
  readonly type: "permission_resolved";
  readonly run: StepRecord["run"];
  readonly committed_at: string;
  readonly audit_id: string;
  readonly resolution_actor: "guardian";
  readonly decision: "allow" | "deny" | null;
  readonly action_digest: string;
  readonly [field: string]: unknown;
}

type Admitted = NonNullable<StepRecord["action"]>;

/**
 * Activity: ask the run's Guardian about one `ask` (mode `shadow` or `enforce`). It is shown only
 * the host's canonical action, policy's reason and version (never the Engine's prose or a tool's
 * output). Under `enforce` the ledger starts the decision deadline and counts the decision (the
 * denial circuit). A Guardian that does not answer within `guardian_timeout_s` (armed with the
 * run's injected timers, and checked again against the clock), answers outside the answer shape,
 * or throws gives a failure record, never a guess. Returns what to commit, or the run's outcome
 * when its own signal aborted first (wall time, the user's cancel): then nothing was decided.
 */
export async function reviewAsk(
  ctx: RunContext,
  action: Admitted,
  mode: "shadow" | "enforce",
): Promise<GuardianReview | { readonly outcome: TerminalOutcome }> {
  const guardian = ctx.options.guardian;
  if (guardian === undefined) throw new Error("reviewAsk without a Guardian");
  const askId = ctx.nextStepId();
  const request = guardianRequestOf({
    run: ctx.run,
    askDecisionId: askId,
    action,
    policyReason: action.classification?.reason ?? "",
    policyVersion: ctx.options.permissions?.version ?? "unversioned",
  });
  const identity = {
    prompt_version: String(guardian.identity?.prompt_version ?? "unknown").slice(0, 256) || "unknown",
    model_version: String(guardian.identity?.model_version ?? "unknown").slice(0, 256) || "unknown",
  };
  const audit = permissionAuditRequest(`audit:${askId}`, request, identity);
  const timeoutS = ctx.record.budgets.guardian_timeout_s;
  const enforce = mode === "enforce";
  if (enforce) ctx.meter.askGuardian(action.action_digest);
  const controller = new AbortController();
  let timer: unknown;
  const timedOut = new Promise<{ readonly timeout: true }>((resolve) => {
    timer = ctx.timers.setTimeout(() => resolve({ timeout: true }), timeoutS * 1000);
  });
  // The run's own stop (wall time, the user's cancel) ends the wait and aborts the Guardian's call.
  let onAbort = (): void => undefined;
  const stopped = new Promise<{ readonly stopped: true }>((resolve) => {
    onAbort = () => {
      controller.abort(new Error("the run stopped"));
      resolve({ stopped: true });
    };
    if (ctx.signal.aborted) onAbort();
    else ctx.signal.addEventListener("abort", onAbort, { once: true });
  });
  const mark = boundaryMark(guardian.boundary);
  let raced: { readonly raw: unknown } | { readonly thrown: unknown } | { readonly timeout: true } | { stopped: true };
  try {
    raced = await Promise.race([
      Promise.resolve()
        .then(() => guardian.assess(request, controller.signal))
        .then(
          (raw) => ({ raw }),
          (thrown) => ({ thrown }),
        ),
      timedOut,
      stopped,
    ]);
  } finally {
    ctx.timers.clearTimeout(timer);
    ctx.signal.removeEventListener("abort", onAbort);
    controller.abort(new Error("the Guardian's answer is no longer awaited"));
  }
  if ("stopped" in raced) {
    const outcome = ctx.admitNext(null) ?? {
      kind: "reason" as const,
      reason: "agent_failed" as const,
      candidateId: null,
    };
    return { outcome };
  }
  const decidedAt = ctx.now();
  let answer: GuardianAnswer | null = null;
  let failure: { outcome: GuardianFailureOutcome; detail: string } | null = null;
  if ("timeout" in raced) {
    failure = { outcome: "timeout", detail: `the Guardian did not answer within ${timeoutS} s` };
  } else if ("thrown" in raced) {
    const code = (raced.thrown as { code?: unknown } | null)?.code;
    failure = {
      outcome: "guardian_failed",
      detail: `the Guardian's call failed${typeof code === "string" ? ` (${code.slice(0, 64)})` : ""}`,
    };
  } else {
    const parsed = parseGuardianAnswer(raced.raw);
    if ("invalid" in parsed)
      failure = { outcome: "invalid_output", detail: `invalid Guardian output: ${parsed.invalid}` };
    else answer = parsed;
  }
  let circuit = false;
  if (enforce) {
    if (answer !== null) {
      // The ledger judges the deadline by the clock too, and counts the decision.
      const counted = ctx.meter.recordGuardianDecision(answer.decision);
      if (!counted.admitted && counted.reason === "guardian_timeout") {
        answer = null;
        failure = { outcome: "timeout", detail: `the Guardian answered after ${timeoutS} s` };
      } else if (!counted.admitted && counted.reason === "guardian_denial_circuit") circuit = true;
    }
  }
  // What the Guardian tried past its boundary while it was asked: frozen with this ask's record.
  const fenced = boundarySince(guardian.boundary, mark);
  const evidence = {
    ...(guardian.launch === undefined ? {} : { launch: guardian.launch }),
    ...(fenced === undefined ? {} : { boundary: fenced }),
  };
  let record: StepAudit["record"];
  let capabilityId: string | null = null;
  if (answer !== null) {
    const assessment: GuardianAssessment = guardianAssessment({
      assessmentId: `guardian:${askId}`,
      audit,
      answer,
      // A capability is created only when the Guardian resolves the ask (Stage 7 with auto_review).
      enforce: enforce && !circuit,
      generation: ctx.record.generation,
      decidedAt,
      capabilityExpiresAt: new Date(Date.parse(decidedAt) + timeoutS * 1000).toISOString(),
      ...evidence,
    });
    capabilityId = assessment.capability?.capability_id ?? null;
    record = { kind: "guardian", record: assessment };
  } else {
    const f = failure as { outcome: GuardianFailureOutcome; detail: string };
    const failed: GuardianFailure = guardianFailure({
      failureId: `guardian-failure:${askId}`,
      audit,
      outcome: f.outcome,
      detail: f.detail,
      decidedAt,
      ...evidence,
    });
    record = { kind: "guardian_failure", record: failed };
  }
  const started = auditStartedEvent(ctx.nextEventId(), decidedAt, audit, 1) as unknown as AutoEvent;
  const completed = auditCompletedEvent(
    ctx.nextEventId(),
    decidedAt,
    audit,
    permissionAssessmentOf(record.record),
  ) as unknown as AutoEvent;
  return {
    audit: { record, started, completed },
    guardian: {
      mode,
      record_id: record.kind === "guardian" ? record.record.assessment_id : record.record.failure_id,
      audit_id: audit.audit_id,
      decision: answer?.decision ?? null,
      capability_id: capabilityId,
      repeat: false,
    },
    answer,
    failure: failure?.outcome ?? null,
    circuit,
  };
}

/** Tell the host a Guardian resolved an ask (Stage 7), only after the step and its audit committed. */
/**
 * The `permission_resolved` event of a Guardian's resolution: what the runner sends after the
 * step and its audit committed, and what a stream rebuilds from those committed records.
 */
export function permissionResolvedEvent(r: {
  readonly run: PermissionResolvedEvent["run"];
  readonly committed_at: string;
  readonly audit_id: string;
  readonly decision: PermissionResolvedEvent["decision"];
  readonly action_digest: string;
}): PermissionResolvedEvent {
  return {
    event_id: `permission_resolved:${r.audit_id}`,
    type: "permission_resolved",
    run: r.run,
    committed_at: r.committed_at,
    audit_id: r.audit_id,
    resolution_actor: "guardian",
    decision: r.decision,
    action_digest: r.action_digest,
  };
}

export function permissionResolved(ctx: RunContext, review: GuardianReview, actionDigest: string): void {
  const event = permissionResolvedEvent({
    run: ctx.run,
    committed_at: String(review.audit.completed.committed_at),
    audit_id: review.guardian.audit_id,
    decision: review.guardian.decision,
    action_digest: actionDigest,
  });
  try {
    ctx.options.onEvent?.(event);
  } catch {
    // A notification listener never decides anything.
  }
}

/** The refusal codes of the steps the Guardian decided: a recoverable denial (`denied`), or a stop (`blocked_by_guardian`). */
export const GUARDIAN_REFUSAL_CODES = Object.freeze([
  "guardian_denied_repeat",
  "guardian_denied",
  "guardian_denial_circuit",
  "guardian_timeout",
  "guardian_invalid_output",
  "guardian_failed",
] as const);

/** One Guardian decision as `asp auto show` prints it, proved against the step that records it. */
export interface GuardianDecisionView {
  /** The step that records the ask (its ordinal). */
  readonly step_ordinal: number;
  readonly mode: "shadow" | "enforce";
  readonly action_class: string;
  readonly target: string | null;
  readonly action_digest: string;
  /** The Guardian's decision, or null when it gave none ({@link GuardianDecisionView.failure}). */
  readonly decision: "allow" | "deny" | null;
  readonly failure: GuardianFailureOutcome | null;
  readonly risk: GuardianAssessment["risk"] | null;
  readonly recoverable: boolean;
  readonly rationale: string | null;
  /**
   * What it did: `advice` (Stage 6: resolved nothing), `admitted` (an allow: its one-shot
   * capability consumed by the admission), `denied` (recoverable: the Agent may replan), `stopped`
   * (the run ended blocked_by_guardian).
   */
  readonly resolution: "advice" | "admitted" | "denied" | "stopped";
  /** `guardian` when it resolved the ask (Stage 7), null for advice. */
  readonly resolution_actor: "guardian" | null;
  readonly audit_id: string;
  readonly record_id: string;
  readonly capability_id: string | null;
  /** A repeat of an action the Guardian already denied: decided by that denial, not asked again. */
  readonly repeat: boolean;
  readonly policy_version: string;
  readonly prompt_version: string;
  readonly model_version: string;
  /** How the Guardian's process was launched, as its record froze it (absent: one the host runs itself). */
  readonly launch?: VerifierLaunch;
  /** What its boundary refused while it was asked, as its record froze it (absent: nothing). */
  readonly boundary?: VerifierBoundary;
}

/**
 * Prove every Guardian fact against the step that records its ask (ADR 0010): each assessment or
 * failure record re-derives its digests and is committed in that step's append, immediately
 * before it, with its `auto_audit_started` / `auto_audit_completed` (permission_review) carrying
 * exactly its assessment; it is bound to the step's id (the ask decision) and exact action digest;
 * under Stage 6 it carries no capability and the ask stayed refused as policy's; under Stage 7 an
 * allow's capability is consumed once, by that admission, before it expires, a recoverable deny
 * lets the run go on, and every other answer or failure stopped it. No Guardian fact exists
 * outside these, and none when the run's stages let no Guardian act. Pure.
 */
export function proveGuardian(facts: RunFacts, base: RunBase, bad: Problems): GuardianDecisionView[] {
  const views: GuardianDecisionView[] = [];
  const assessments = new Map(
    (facts.recs.guardian as ReadonlyArray<Rec<GuardianAssessment>>).map((r) => [r.body.assessment_id, r]),
  );
  const failures = new Map(
    (facts.recs.guardian_failure as ReadonlyArray<Rec<GuardianFailure>>).map((r) => [r.body.failure_id, r]),
  );
  if (assessments.size !== facts.recs.guardian.length || failures.size !== facts.recs.guardian_failure.length)
    bad("a Guardian record id committed twice");
  const claimed = new Set<number>();
  const capabilities = new Set<string>();
  const eventAt = new Map(facts.ordered.map((o) => [o.seq, o.ev]));
  const runId = facts.input.runId;
  for (const st of facts.steps) {
    const step = st.body;
    const g = step.guardian ?? null;
    if (step.phase === "refused" && step.refusal?.terminal === null && g?.mode !== "enforce")
      bad(`step ${step.ordinal}: a refusal without its terminal reason that no enforcing Guardian gave`);
    if (g === null) continue;
    const a = step.action;
    if (a === null) continue;
    if (base.guardian === "off" || g.mode !== base.guardian) {
      bad(`step ${step.ordinal}: a ${g.mode} Guardian review while the run's stages give ${base.guardian}`);
      continue;
    }
    const rec = assessments.get(g.record_id) ?? failures.get(g.record_id);
    if (rec === undefined) {
      bad(`step ${step.ordinal}: its Guardian record ${g.record_id} never committed`);
      continue;
    }
    const body = rec.body;
    const isFailure = "failure_id" in body;
    if (g.repeat) {
      // A repeat of an action the Guardian denied earlier: no new question, no audit of its own.
      const earlier = isFailure ? null : (body as GuardianAssessment);
      const original = facts.steps.find(
        (o) => o.seq < st.seq && o.body.guardian?.record_id === g.record_id && o.body.guardian.repeat === false,
      );
      if (
        earlier === null ||
        earlier.decision !== "deny" ||
        !earlier.recoverable ||
        earlier.action_digest !== a.action_digest ||
        original?.body.phase !== "denied" ||
        g.audit_id !== earlier.audit_id
      )
        bad(`step ${step.ordinal}: a repeat that names no earlier recoverable denial of this exact action`);
      const open = step.ledger.circuits.guardian_denial === "open";
      const ok =
        step.phase === "denied"
          ? step.refusal?.code === "guardian_denied_repeat" && !open
          : step.phase === "refused" &&
            step.refusal?.code === "guardian_denial_circuit" &&
            step.refusal.terminal === null &&
            open;
      if (!ok) bad(`step ${step.ordinal}: a repeated denial that is neither denied again nor the open circuit`);
      views.push(
        viewOf(step, g, body, {
          decision: "deny",
          failure: null,
          recoverable: step.phase === "denied",
          resolution: step.phase === "denied" ? "denied" : "stopped",
          resolution_actor: "guardian",
        }),
      );
      continue;
    }
    const problem = isFailure ? checkGuardianFailure(body) : checkGuardianAssessment(body);
    if (problem !== null) bad(`step ${step.ordinal}: the Guardian record: ${problem}`);
    if (body.ask_decision_id !== stepIdOf(runId, step.ordinal) || body.action_digest !== a.action_digest)
      bad(`step ${step.ordinal}: the Guardian record is bound to another ask or action`);
    if (body.audit_id !== g.audit_id) bad(`step ${step.ordinal}: the Guardian record names another audit`);
    if ((isFailure ? null : (body as GuardianAssessment).decision) !== g.decision)
      bad(`step ${step.ordinal}: the step's Guardian decision is not the record's`);
    if (a.classification?.outcome !== "ask" || a.classification.fenced)
      bad(`step ${step.ordinal}: the Guardian reviewed what deterministic policy did not leave to it`);
    // One append: [auto_audit_started, record, auto_audit_completed, step].
    const started = eventAt.get(st.seq - 3);
    const completed = eventAt.get(st.seq - 1);
    if (
      rec.seq !== st.seq - 2 ||
      started?.type !== "auto_audit_started" ||
      completed?.type !== "auto_audit_completed" ||
      completed.event_id !== rec.event_id
    ) {
      bad(`step ${step.ordinal}: its Guardian record and permission audit did not commit in the step's append`);
    } else {
      for (const ev of [started, completed]) {
        if (
          ev.subject_kind !== "permission_review" ||
          ev.audit_id !== body.audit_id ||
          ev.subject_id !== body.ask_decision_id ||
          ev.audit_request_digest !== body.audit_request_digest
        )
          bad(`step ${step.ordinal}: its permission audit names another request`);
      }
      if (
        completed.assessment_digest !== body.assessment_digest ||
        !same(completed.assessment, permissionAssessmentOf(body))
      )
        bad(`step ${step.ordinal}: its permission audit carries another assessment`);
      claimed
        .add(st.seq - 3)
        .add(st.seq - 2)
        .add(st.seq - 1);
    }
    const assessment = isFailure ? null : (body as GuardianAssessment);
    const capability = assessment?.capability ?? null;
    let resolution: GuardianDecisionView["resolution"] = "stopped";
    if (g.mode === "shadow") {
      resolution = "advice";
      if (capability !== null || g.capability_id !== null)
        bad(`step ${step.ordinal}: Stage 6 advice carries a capability`);
      if (step.phase !== "refused" || step.refusal?.terminal !== "policy_requires_explicit_setup")
        bad(`step ${step.ordinal}: Stage 6 advice resolved the ask`);
    } else if (step.phase === "admitted") {
      resolution = "admitted";
      if (
        assessment?.decision !== "allow" ||
        capability === null ||
        g.capability_id !== capability.capability_id ||
        capability.action_digest !== a.action_digest
      )
        bad(`step ${step.ordinal}: admitted on the Guardian without its one-shot allow for this exact action`);
      else {
        if (capabilities.has(capability.capability_id))
          bad(`step ${step.ordinal}: capability ${capability.capability_id} used twice`);
        capabilities.add(capability.capability_id);
        if (Date.parse(step.committed_at) > Date.parse(capability.expires_at))
          bad(`step ${step.ordinal}: consumed an expired capability`);
      }
    } else if (step.phase === "denied") {
      resolution = "denied";
      if (assessment?.decision !== "deny" || !assessment.recoverable)
        bad(`step ${step.ordinal}: the run went on after a Guardian stop`);
      if (step.ledger.circuits.guardian_denial === "open")
        bad(`step ${step.ordinal}: the run went on with the denial circuit open`);
    } else if (step.phase === "refused") {
      const code = step.refusal?.code;
      const expected = isFailure
        ? (body as GuardianFailure).outcome === "guardian_failed"
          ? ["guardian_failed"]
          : [`guardian_${(body as GuardianFailure).outcome}`]
        : assessment?.decision === "deny" && step.ledger.circuits.guardian_denial === "open"
          ? ["guardian_denial_circuit"]
          : assessment?.decision === "deny" && !assessment.recoverable
            ? ["guardian_denied"]
            : [];
      if (step.refusal?.terminal !== null || !expected.includes(code ?? ""))
        bad(`step ${step.ordinal}: the refusal ${String(code)} is not what its Guardian record shows`);
      if (capability !== null) bad(`step ${step.ordinal}: a Guardian stop carries a capability`);
    } else bad(`step ${step.ordinal}: a Guardian review on a ${step.phase} step`);
    views.push(
      viewOf(step, g, body, {
        decision: assessment?.decision ?? null,
        failure: isFailure ? (body as GuardianFailure).outcome : null,
        recoverable: assessment?.recoverable ?? false,
        resolution,
        resolution_actor: g.mode === "enforce" ? "guardian" : null,
      }),
    );
  }
  // No Guardian fact outside a step's append.
  for (const r of [...facts.recs.guardian, ...facts.recs.guardian_failure])
    if (!claimed.has(r.seq)) bad(`seq ${r.seq}: a Guardian record no step records`);
  for (const { seq, ev } of facts.ordered)
    if (ev.subject_kind === "permission_review" && !claimed.has(seq))
      bad(`seq ${seq}: a permission audit no step records`);
  return views;
}

/** A {@link GuardianDecisionView} of one step, its record and what the proof found it did. Pure. */
function viewOf(
  step: StepRecord,
  g: StepGuardian,
  record: GuardianAssessment | GuardianFailure,
  found: Pick<GuardianDecisionView, "decision" | "failure" | "recoverable" | "resolution" | "resolution_actor">,
): GuardianDecisionView {
  const assessment = "failure_id" in record ? null : record;
  return {
    step_ordinal: step.ordinal,
    mode: g.mode,
    action_class: record.action_class,
    target: step.action?.target ?? null,
    action_digest: record.action_digest,
    ...found,
    risk: assessment?.risk ?? null,
    rationale: assessment?.rationale ?? null,
    audit_id: record.audit_id,
    record_id: g.record_id,
    capability_id: g.capability_id,
    repeat: g.repeat,
    policy_version: record.policy_version,
    prompt_version: record.prompt_version,
    model_version: record.model_version,
    ...(record.launch === undefined ? {} : { launch: record.launch }),
    ...(record.boundary === undefined ? {} : { boundary: record.boundary }),
  };
}
