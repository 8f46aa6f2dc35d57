import {
  type ActionResult,
  type BudgetLedger,
  type Candidate,
  DECISIONS,
  type Finding,
  type RepairOutcome,
  type RepairRun,
  type ReviewRun,
  type TerminalRecord,
} from "@asp/contracts";
import { type Digest, digestBytes, type EvidenceRef, freezeSnapshot } from "@asp/evidence";
import { type ActionWorkspace, canonicalizeAction, HOST_TOOLS } from "../actions.js";
import type { AutoEvent } from "../durable.js";
import type { Engine, EngineStep } from "../engine.js";
import { AutoModeError } from "../errors.js";
import { checkpointIdOf, repairRunIdOf } from "../identity.js";
import type { MachineTransition } from "../machine.js";
import { ABORTED, type RunContext, type TerminalOutcome } from "../run/context.js";
import { frozenFlag } from "../stages.js";
import { mediateAction } from "./actions.js";
import { type CandidateSet, CHANGES_REF, type Completion, commitCandidate, type Produced } from "./candidate.js";
import { type Problems, type Rec, type RunFacts, same } from "./facts.js";
import type { ReviewSet } from "./review.js";
import type { RunBase } from "./storage.js";

// Stage 5's module, under Stage 9's safe checkpoint: a bounded Repair Run from an issues verdict.
// Its activity commits the pre-repair checkpoint and a declared mutation set with
// `repair_started`, asks the Repair Agent (a session distinct from the producer's) for an edit
// plan (its writes proposed through the host's mediated tools, or whole files in its completion),
// checks every proposed path against the mutation set before a byte is written, applies it
// through the host's workspace (rolled back to the checkpoint when the Repair fails), commits the repaired candidate (a new generation whose parent is
// the repaired one) and `repair_completed`. The repaired candidate is then reviewed again by an
// independent Reviewer; nothing here ever makes it Verified. Its proof checks each Repair Run
// against its checkpoint, its mutation set, the candidates and the frozen exclusions.

/** The rows the repair module adds to the run machine. */
export const REPAIR_ROWS: ReadonlyArray<MachineTransition> = [
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "candidate",
    on: "repair_started",
    to: "repairing",
    entry:
      "auto_fix under stages 5 and 9; the latest candidate has a durable issues verdict with unresolved findings; the round admitted by the ledger; the checkpoint frozen and the mutation set declared in the same transition",
    test: "repair.test.ts: issues, repair, an independent pass: Verified on the new candidate only",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repairing",
    on: "step:turn",
    to: "repairing",
    entry: "a Repair Agent turn ended; admitted against the round's turn budget and the extra-token budget",
    test: "repair.test.ts: turns are bounded per round",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repairing",
    on: "step:admitted",
    to: "repair_acting",
    entry:
      "the Repair Agent proposed a read, or a whole-file write of a path inside the mutation set (through write_file or as a file of its completion); the ledger and deterministic policy allowed it, or (Stage 7 with auto_review) policy asked and this append consumes the Guardian's one-shot allow; nothing has run",
    test: "repair.test.ts: the Repair Agent edits through the host's mediated tools",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repair_acting",
    on: "step:executed",
    to: "repairing",
    entry: "the result of exactly the admitted action, run by the host's adapters in the workspace",
    test: "repair.test.ts: the Repair Agent edits through the host's mediated tools",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repairing",
    on: "step:refused",
    to: "repairing",
    entry:
      "a proposed write outside the mutation set (a tool write or a completion's file), a tool not offered (a command: its writes cannot be bounded), an escaping path, a deny or an ask refused the unexecuted action; its audit committed, the Repair Run completes rejected next",
    test: "repair.test.ts: a write outside the mutation set through the tools",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repair_acting",
    on: "step:refused",
    to: "repairing",
    entry: "the host's adapter found a path escape while running the admitted action (nothing escaped)",
    test: "repair.test.ts: a link planted in the workspace during a repair",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repair_acting",
    on: "auto_run_terminal",
    to: "terminal",
    entry: "safety_boundary only: an action's result could not commit (the workspace rolled back to the checkpoint)",
    test: "repair.test.ts: a Repair action whose result cannot commit",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repairing",
    on: "candidate_ready",
    to: "repaired",
    entry:
      "every edit of the plan inside the mutation set and applied by the host; the new candidate names the repaired one as its parent and the Repair actor as its producer",
    test: "repair.test.ts: issues, repair, an independent pass: Verified on the new candidate only",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repaired",
    on: "repair_completed",
    to: "candidate",
    entry: "outcome applied, naming the candidate just committed",
    test: "repair.test.ts: issues, repair, an independent pass: Verified on the new candidate only",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repairing",
    on: "repair_completed",
    to: "candidate",
    entry:
      "outcome rejected (an edit outside the mutation set or escaping it, or a plan the host's checks did not allow), no_change or failed: no new candidate",
    test: "repair.test.ts: an edit outside the mutation set",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repairing",
    on: "auto_run_terminal",
    to: "terminal",
    entry: "safety_boundary only: the Repair Run's own records could not commit",
    test: "repair.test.ts: a Repair Run whose completion cannot commit",
  },
  {
    module: "repair",
    stage: "stage5_auto_repair",
    from: "repaired",
    on: "auto_run_terminal",
    to: "terminal",
    entry: "safety_boundary only: the Repair Run's completion could not commit",
    test: "repair.test.ts: a Repair Run whose completion cannot commit",
  },
];

/** The Repair Agent and what it may touch (`AutoRunnerOptions.repair`). */
export interface RepairOptions {
  /**
   * The Repair Agent: an Engine whose actor is a session distinct from the producer's (frozen in
   * the run's exclusions, so it can never review or promote). With a workspace it is offered
   * the host's `read_file` and `write_file` (reads, and whole-file writes the host checks against the mutation set,
   * then mediates like the producer's); without one, none. It ends with a completion whose payload
   * is the repaired answer and whose Artifacts, if any, are further whole files by path; the host
   * checks and applies them, and rolls the workspace back to the checkpoint when the Repair fails.
   */
  readonly engine: Engine;
  /**
   * Paths the Repair may write besides the candidate's own Artifacts (the declared mutation set
   * is their union). Relative, `/`-separated, no `.` or `..` segment.
   */
  readonly mutationSet?: ReadonlyArray<string>;
  /**
   * The host's hypothetical check of a repaired after-state (ADR 0012), e.g. `@asp/ths`
   * `createHostChecks(...).evaluate`: the repaired candidate's whole files, by digest in the
   * run's object store, judged by the host's required checks before they become a candidate.
   * Only `allow` applies; `deny`, `indeterminate`, a throw or an answer that is not a decision
   * roll the workspace back to the checkpoint, complete the Repair Run `rejected` with the
   * check's receipt, and spend the round. Absent: the plan is not checked by the host.
   */
  readonly check?: RepairCheck;
}

/** The host's check of a repaired after-state: `files` over the trusted base, by blob digest. */
export type RepairCheck = (request: {
  readonly files: ReadonlyArray<{ readonly path: string; readonly digest: Digest }>;
  /** The files the candidate removes (the producer's removals the workspace holds), never also in `files`. */
  readonly deleted: ReadonlyArray<string>;
}) => Promise<{ readonly decision: string; readonly receipt_id?: string | null }>;

/** What a check decided, as a Repair Run records it. */
type CheckVerdict = NonNullable<RepairRun["check"]>;

/** What a Repair Run gives: the repaired candidate to review, or how the run ends. */
export type RepairResult =
  | { readonly kind: "repaired"; readonly produced: Produced }
  /** The plan changed nothing: the round is spent, there is no new candidate. */
  | { readonly kind: "no_change" }
  | TerminalOutcome;

const utf8 = new TextEncoder();
const text = new TextDecoder();
/** A completion file the host writes through write_file must be text (UTF-8). */
const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The name of the checkpoint manifest ref: every mutation-set path's pre-repair digest (or null). */
export const CHECKPOINT_REF = "checkpoint";

/** A relative path a repair may name: the contracts' RelPath rule (no `..`, no absolute, no `\`). */
export function isSafeRelPath(path: unknown): path is string {
  return (
    typeof path === "string" &&
    path.length > 0 &&
    path.length <= 4096 &&
    !path.startsWith("/") &&
    !path.endsWith("/") &&
    !path.includes("//") &&
    !path.includes("\\") &&
    !path.includes("\u0000") &&
    !path.split("/").some((seg) => seg === "." || seg === "..")
  );
}

/** The declared mutation set: the candidate's Artifacts and the configured paths, sorted. */
export function mutationSetOf(candidate: Candidate, configured: ReadonlyArray<string>): string[] {
  return [...new Set([...candidate.artifact_versions.map((v) => v.artifact_id), ...configured])].sort();
}

/**
 * The task the Repair Agent is given: JSON with the round, the answer, its Artifacts as text, the
 * unresolved findings and the mutation set. Pure.
 */
export function repairTask(input: {
  readonly round: number;
  readonly payload: Uint8Array;
  readonly artifacts: ReadonlyArray<{ readonly path: string; readonly bytes: Uint8Array }>;
  readonly findings: ReadonlyArray<Finding>;
  readonly mutationSet: ReadonlyArray<string>;
}): string {
  return JSON.stringify({
    kind: "repair",
    round: input.round,
    instructions:
      "Repair the answer so that every finding below is addressed. Reply with the whole repaired answer; change only files in mutation_set, each as its whole new content.",
    answer: text.decode(input.payload),
    artifacts: input.artifacts.map((a) => ({ path: a.path, content: text.decode(a.bytes) })),
    findings: input.findings.map((f) => ({
      finding_id: f.finding_id,
      severity: f.severity,
      category: f.category,
      claim: f.claim,
    })),
    mutation_set: input.mutationSet,
  });
}

/** The candidate's Artifacts as the store holds them (from its snapshot's `artifact:` refs). */
async function artifactsOf(ctx: RunContext, from: Produced): Promise<Array<{ path: string; bytes: Uint8Array }>> {
  const out: Array<{ path: string; bytes: Uint8Array }> = [];
  for (const v of from.candidate.artifact_versions) {
    out.push({ path: v.artifact_id, bytes: await ctx.options.store.objects.readBlob(v.checksum as Digest) });
  }
  return out;
}

/**
 * Freeze the pre-repair checkpoint: the candidate's payload, change manifest and Artifacts, and a
 * manifest naming every mutation-set path's digest before the repair (null: absent). With a
 * workspace the manifest is read from it, so a rollback restores exactly what was there.
 */
async function freezeCheckpoint(
  ctx: RunContext,
  from: Produced,
  mutationSet: ReadonlyArray<string>,
): Promise<{ digest: Digest; files: ReadonlyMap<string, Uint8Array | null> }> {
  const { objects } = ctx.options.store;
  const files = new Map<string, Uint8Array | null>();
  const workspace = ctx.options.workspace;
  const stored = new Map((await artifactsOf(ctx, from)).map((a) => [a.path, a.bytes]));
  for (const path of mutationSet) {
    const bytes = workspace === undefined ? (stored.get(path) ?? null) : await workspace.read(path);
    // A branch conflict: the workspace no longer holds the reviewed candidate's file (another
    // writer moved it). A Repair from there would not repair what was reviewed: it never starts.
    const reviewed = stored.get(path);
    if (reviewed !== undefined && (bytes === null || digestBytes(bytes) !== digestBytes(reviewed))) {
      throw new Error(`the workspace's ${path} is not the reviewed candidate's: another writer changed it`);
    }
    files.set(path, bytes);
  }
  const manifest: Array<{ path: string; digest: string | null }> = [];
  const refs: EvidenceRef[] = from.snapshot.refs
    .filter((r) => r.name === "payload" || r.name === CHANGES_REF || r.name.startsWith("artifact:"))
    .map((r) => ({ name: r.name, kind: r.kind, digest: r.digest as Digest }));
  for (const [path, bytes] of files) {
    manifest.push({ path, digest: bytes === null ? null : await objects.putBlob(bytes) });
  }
  refs.push({
    name: CHECKPOINT_REF,
    kind: "blob",
    digest: await objects.putBlob(utf8.encode(JSON.stringify(manifest))),
  });
  const frozen = await freezeSnapshot(ctx.options.store, {
    refs,
    labels: { run_id: ctx.runId, checkpoint_of: from.candidate.candidate_id },
  });
  return { digest: frozen.digest, files };
}

type RepairLimit = "max_repair_rounds" | "repair_turns_per_round";

/** `completed_with_issues(budget_exhausted)` naming the repair limit that was spent. Pure. */
function budgetStop(candidateId: string, unresolved: string[], limit: RepairLimit): TerminalOutcome {
  return { kind: "issues", candidateId, stop: "budget_exhausted", unresolved, limit };
}

/**
 * Activity: one Repair Run of `round` from the latest candidate and its unresolved findings.
 * Without Stage 9, or when the checkpoint cannot be frozen, no Repair starts
 * (`safe_rollback_unavailable`); a spent round budget stops `completed_with_issues(budget_exhausted)`.
 * A proposed edit outside the mutation set is never applied (`safe_rollback_unavailable`); one
 * escaping it (an absolute path, a `..` segment) is the safety boundary. A failed apply is rolled
 * back to the checkpoint. Returns the repaired candidate (committed, unverified) or the outcome.
 */
export async function repairCandidate(
  ctx: RunContext,
  from: Produced,
  findings: ReadonlyArray<Finding>,
  options: RepairOptions,
): Promise<RepairResult> {
  const candidateId = from.candidate.candidate_id;
  const unresolved = findings.map((f) => f.finding_id);
  const issues = (limit: RepairLimit): TerminalOutcome => budgetStop(candidateId, unresolved, limit);
  const gate = ctx.admitNext(candidateId);
  if (gate !== null) return gate;
  // ADR 0006: without Stage 9 nothing commits a safe checkpoint, so no Repair starts.
  if (!frozenFlag(ctx.stages, "stage9_safe_repair_checkpoint")) {
    return { kind: "reason", reason: "safe_rollback_unavailable", candidateId };
  }
  const admitted = ctx.meter.admitRepairRound();
  if (!admitted.admitted) return issues("max_repair_rounds");
  const round = ctx.meter.toJSON().consumed.repair_rounds;
  const mutationSet = mutationSetOf(from.candidate, options.mutationSet ?? []);
  let checkpoint: Awaited<ReturnType<typeof freezeCheckpoint>>;
  try {
    checkpoint = await freezeCheckpoint(ctx, from, mutationSet);
  } catch (error) {
    // A mutation-set path that leaves the workspace (a planted link) is a real path escape: the
    // higher-priority safety boundary. Any other checkpoint that cannot commit: Repair never starts.
    if (error instanceof AutoModeError && error.code === "ASP_AUTO_MODE_PATH_ESCAPE") {
      return { kind: "reason", reason: "safety_boundary", candidateId };
    }
    return { kind: "reason", reason: "safe_rollback_unavailable", candidateId };
  }
  const actor = options.engine.actor;
  let record: RepairRun = {
    repair_run_id: repairRunIdOf(ctx.run, candidateId, round),
    run: ctx.run,
    round,
    from_candidate_id: candidateId,
    checkpoint: { checkpoint_id: checkpointIdOf(checkpoint.digest), digest: checkpoint.digest },
    mutation_set: mutationSet,
    finding_ids: unresolved,
    actor: { actor_id: actor.actor_id, session_id: actor.session_id, fingerprint: actor.fingerprint },
    before_versions: from.candidate.artifact_versions.map((v) => ({ ...v })),
    after_versions: [],
    turns_used: 0,
    outcome: null,
    to_candidate_id: null,
  };
  await ctx.commit(
    {
      event_id: ctx.nextEventId(),
      type: "repair_started",
      run: ctx.run,
      committed_at: ctx.now(),
      repair_run_id: record.repair_run_id,
      round,
      from_candidate_id: candidateId,
    } as AutoEvent,
    [{ kind: "repair", record }],
  );
  const complete = async (
    outcome: RepairOutcome,
    to: Candidate | null,
    turns: number,
    check?: CheckVerdict,
  ): Promise<void> => {
    record = {
      ...record,
      turns_used: turns,
      outcome,
      to_candidate_id: to?.candidate_id ?? null,
      after_versions: to === null ? [] : to.artifact_versions.map((v) => ({ ...v })),
      ...(check === undefined ? {} : { check }),
    };
    await ctx.commit(
      {
        event_id: ctx.nextEventId(),
        type: "repair_completed",
        run: ctx.run,
        committed_at: ctx.now(),
        repair_run_id: record.repair_run_id,
        outcome,
        to_candidate_id: record.to_candidate_id,
      } as AutoEvent,
      [{ kind: "repair", record }],
    );
  };

  const artifacts = await artifactsOf(ctx, from);
  try {
    return await planAndCommit(ctx, from, options, {
      round,
      repairRunId: record.repair_run_id,
      findings,
      mutationSet,
      checkpoint,
      artifacts,
      complete,
    });
  } catch (error) {
    // A record that cannot commit ends the run at the safety boundary (the runner's last resort):
    // nothing the Repair wrote outlives it unrecorded.
    await rollBack(ctx, checkpoint.files);
    throw error;
  }
}

/** What one Repair Run has frozen before its Agent is asked. */
interface RepairRound {
  readonly round: number;
  readonly repairRunId: string;
  readonly findings: ReadonlyArray<Finding>;
  readonly mutationSet: ReadonlyArray<string>;
  readonly checkpoint: Awaited<ReturnType<typeof freezeCheckpoint>>;
  readonly artifacts: ReadonlyArray<{ path: string; bytes: Uint8Array }>;
  readonly complete: (
    outcome: RepairOutcome,
    to: Candidate | null,
    turns: number,
    check?: CheckVerdict,
  ) => Promise<void>;
}

/**
 * Ask the Repair Agent for its plan, check it and commit what it gives. With a workspace every
 * write, the completion's own files included, went through the host's mediation (the mutation
 * set, the ledger, policy, the adapters, the audit), so the plan is what the workspace holds;
 * without one the completion's files are checked against the mutation set here. Every way that
 * gives no new candidate rolls the workspace back to the checkpoint first.
 */
async function planAndCommit(
  ctx: RunContext,
  from: Produced,
  options: RepairOptions,
  r: RepairRound,
): Promise<RepairResult> {
  const candidateId = from.candidate.candidate_id;
  const unresolved = r.findings.map((f) => f.finding_id);
  const { checkpoint } = r;
  let turns = 0;
  const complete = (outcome: RepairOutcome, to: Candidate | null, check?: CheckVerdict) =>
    r.complete(outcome, to, turns, check);
  /** Roll back, complete the Repair Run without a candidate, and end as `reason` (or the boundary). */
  const stop = async (
    outcome: RepairOutcome,
    reason: TerminalOutcome | "safe_rollback_unavailable" | "safety_boundary" | "agent_failed",
  ): Promise<TerminalOutcome> => {
    const rolledBack = await rollBack(ctx, checkpoint.files);
    await complete(outcome, null);
    if (rolledBack !== null) return { kind: "reason", reason: rolledBack, candidateId };
    return typeof reason === "string" ? { kind: "reason", reason, candidateId } : reason;
  };
  // H6: the Repair Agent's writes are staged, never published into the workspace before the
  // host's check allowed the whole plan (a denied plan leaves every byte of it untouched).
  const base = ctx.options.workspace;
  const staged = base === undefined ? undefined : stagedView(base);
  const planned = await askRepairAgent(
    ctx,
    options.engine,
    {
      round: r.round,
      payload: from.payload,
      artifacts: r.artifacts,
      findings: r.findings,
      mutationSet: r.mutationSet,
    },
    staged,
  );
  turns = planned.turns;
  if (planned.kind === "stop") {
    const outcome: TerminalOutcome =
      planned.outcome === "repair_turns"
        ? budgetStop(candidateId, unresolved, "repair_turns_per_round")
        : planned.outcome;
    return stop(planned.refused ? "rejected" : "failed", outcome);
  }
  const payloadUnchanged = digestBytes(utf8.encode(planned.completion.payload)) === from.candidate.payload_digest;
  let plan: Completion["artifacts"];
  if (staged !== undefined) {
    // The plan is what the staged view holds now against the checkpoint (each write already
    // checked against the mutation set and mediated by the host).
    let written: Completion["artifacts"] | null;
    try {
      written = await writtenSince(staged, checkpoint.files);
    } catch {
      return stop("failed", "safety_boundary");
    }
    if (written === null) return stop("failed", "agent_failed");
    plan = written;
  } else {
    plan = planned.completion.artifacts;
    // The hypothetical check, before anything is taken: every path a safe relative path inside the
    // declared mutation set. An escape is the higher-priority safety boundary.
    if (!plan.every((a) => isSafeRelPath(a.artifact_id))) return stop("rejected", "safety_boundary");
    const allowed = new Set(r.mutationSet);
    if (!plan.every((a) => allowed.has(a.artifact_id))) return stop("rejected", "safe_rollback_unavailable");
    plan = plan.filter((a) => {
      const before = checkpoint.files.get(a.artifact_id);
      return before === null || before === undefined || digestBytes(before) !== digestBytes(a.bytes);
    });
  }
  if (payloadUnchanged && plan.length === 0) {
    // A round spent on nothing: no new candidate; the next round, or its budget, decides.
    const rolledBack = await rollBack(ctx, checkpoint.files);
    await complete("no_change", null);
    return rolledBack === null ? { kind: "no_change" } : { kind: "reason", reason: rolledBack, candidateId };
  }
  // Without a workspace the repaired candidate's Artifacts are the old ones with the plan's over
  // them; with one, commitCandidate takes them from the workspace itself.
  const byPath = new Map(r.artifacts.map((a) => [a.path, a.bytes]));
  for (const a of plan) byPath.set(a.artifact_id, a.bytes);
  // ADR 0012: the host's own required checks judge the repaired after-state before it can become
  // a candidate. Only allow applies; anything else leaves nothing behind and spends the round.
  let check: CheckVerdict | undefined;
  if (options.check !== undefined) {
    let deleted: string[];
    try {
      deleted = await removedFiles(ctx, byPath);
    } catch {
      return stop("failed", "safety_boundary");
    }
    const planDigest = planDigestOf(byPath, deleted);
    // Decision 4: a plan the host already denied is not checked again. Its repeat is rejected with
    // that denial, and the second denial of one plan opens the no-progress circuit.
    const prior = ctx.repairDenials.get(planDigest);
    check =
      prior === undefined
        ? { ...(await hypotheticalCheck(ctx, options.check, byPath, deleted)), plan_digest: planDigest }
        : { decision: "deny", receipt_id: prior.receipt_id, plan_digest: planDigest, repeat_of: prior.repair_run_id };
    if (check.decision !== "allow") {
      const loop = check.decision === "deny" ? ctx.meter.recordDeniedPlan(planDigest) : undefined;
      if (check.decision === "deny" && prior === undefined) {
        ctx.repairDenials.set(planDigest, { repair_run_id: r.repairRunId, receipt_id: check.receipt_id });
      }
      const rolledBack = await rollBack(ctx, checkpoint.files);
      await complete("rejected", null, check);
      if (rolledBack !== null) return { kind: "reason", reason: rolledBack, candidateId };
      return loop?.admitted === false
        ? { kind: "issues", candidateId, stop: "loop_detected", unresolved }
        : { kind: "no_change" };
    }
  }
  if (staged !== undefined) {
    // Allowed: publish the staged files through the host's link-safe writer. A path that became
    // a link since it was staged is refused there (the safety boundary), and whatever was already
    // published rolls back to the checkpoint.
    try {
      await staged.publish();
    } catch {
      return stop("failed", "safety_boundary");
    }
  }
  const completion: Completion = {
    kind: "completion",
    payload: planned.completion.payload,
    artifacts: [...byPath].map(([path, bytes]) => ({
      artifact_id: path,
      version_id: digestBytes(bytes).slice(7, 23),
      bytes,
    })),
    evidence: planned.completion.evidence,
  };
  const produced = await commitCandidate(ctx, completion, { producer: options.engine.actor, parent: candidateId });
  if ("kind" in produced) {
    // A plan whose bytes cannot become a candidate (an unfreezable snapshot, the host's own ref
    // names taken): nothing new to review, and nothing it wrote stays.
    return stop(
      "failed",
      produced.kind === "reason" && produced.reason !== "safety_boundary" ? { ...produced, candidateId } : produced,
    );
  }
  await complete("applied", produced.candidate, check);
  return { kind: "repaired", produced };
}

/**
 * The digest of a plan's exact after-state: every file of the repaired candidate, by path and
 * content digest, and every file it removes, in path order. Two rounds that would give the same
 * candidate have the same plan digest, whatever order or spelling their writes took.
 */
function planDigestOf(files: ReadonlyMap<string, Uint8Array>, deleted: ReadonlyArray<string>): Digest {
  const entries: Array<readonly [string, Digest | null]> = [...files].map(([path, bytes]) => [
    path,
    digestBytes(bytes),
  ]);
  for (const path of deleted) entries.push([path, null]);
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return digestBytes(utf8.encode(JSON.stringify({ kind: "asp.repair_plan.v1", files: entries })));
}

/**
 * The files the repaired candidate removes: with a workspace, every removal it holds against its
 * start (the producer's; a Repair Agent is offered no tool that removes), so the host's check
 * judges the candidate's whole change and not the base with a deleted file still in it.
 */
async function removedFiles(ctx: RunContext, files: ReadonlyMap<string, Uint8Array>): Promise<string[]> {
  const workspace = ctx.options.workspace;
  if (workspace === undefined) return [];
  return (await workspace.changes()).filter((c) => c.bytes === null && !files.has(c.path)).map((c) => c.path);
}

/**
 * Run the host's check over the repaired candidate's whole files (put in the object store first),
 * under the run's stop. Fails closed: a throw, the run's stop, or an answer that is not one of the
 * three decisions is `indeterminate`; a receipt id that is not a bounded string is dropped.
 */
async function hypotheticalCheck(
  ctx: RunContext,
  check: RepairCheck,
  files: ReadonlyMap<string, Uint8Array>,
  deleted: ReadonlyArray<string>,
): Promise<CheckVerdict> {
  try {
    const refs: Array<{ path: string; digest: Digest }> = [];
    for (const [path, bytes] of files) refs.push({ path, digest: await ctx.options.store.objects.putBlob(bytes) });
    const answer = await ctx.orAbort(Promise.resolve().then(() => check({ files: refs, deleted: [...deleted] })));
    if (answer === ABORTED) return { decision: "indeterminate", receipt_id: null };
    const decision = (DECISIONS as ReadonlyArray<unknown>).includes(answer?.decision)
      ? (answer.decision as CheckVerdict["decision"])
      : "indeterminate";
    const receipt = answer?.receipt_id;
    return {
      decision,
      receipt_id: typeof receipt === "string" && receipt.length > 0 && receipt.length <= 256 ? receipt : null,
    };
  } catch {
    return { decision: "indeterminate", receipt_id: null };
  }
}

type Planned =
  | { readonly kind: "plan"; readonly completion: Completion; readonly turns: number }
  | {
      readonly kind: "stop";
      readonly outcome: TerminalOutcome | "repair_turns";
      readonly turns: number;
      /** The host refused one of the Agent's actions (the Repair Run completes `rejected`). */
      readonly refused?: boolean;
    };

/**
 * The tools a Repair Agent is offered over the host's workspace: reads and whole-file writes, each
 * mediated like the producer's (canonicalized, admitted by the ledger, classified by policy, run by
 * the host's adapters, audited). No command: its writes could not be bounded to the mutation set.
 */
export const REPAIR_TOOLS = Object.freeze(HOST_TOOLS.filter((t) => t.name === "read_file" || t.name === "write_file"));

/**
 * The proposal as plain data, read once: what the mutation-set check sees is exactly what the
 * mediation canonicalizes (an object whose getters answer differently on a second read cannot
 * slip a second path past the check). Null when it is not plain JSON data.
 */
function frozenProposal(proposal: unknown): unknown {
  try {
    const json = JSON.stringify(proposal);
    return json === undefined ? null : JSON.parse(json);
  } catch {
    return null;
  }
}

/**
 * The propose step's check, before policy and before anything runs: only the offered tools may be
 * proposed, and a write must name a path of the mutation set. Commits the refusal audit and
 * returns the outcome (`safe_rollback_unavailable`), or null to mediate the action. An offered
 * tool's proposal that does not canonicalize is left to the mediation (an escaping path is the
 * safety boundary there).
 */
async function refuseOutsideMutationSet(
  ctx: RunContext,
  proposal: unknown,
  allowed: ReadonlySet<string>,
): Promise<TerminalOutcome | null> {
  const toolName = String((proposal as { tool?: unknown } | null)?.tool ?? "").slice(0, 128);
  const offered = REPAIR_TOOLS.some((t) => t.name === toolName);
  const canonical = canonicalizeAction(proposal as Parameters<typeof canonicalizeAction>[0]);
  if (offered && !canonical.ok) return null;
  const a = canonical.ok ? canonical.action : null;
  if (offered && (a?.tool !== "write_file" || allowed.has(a.target))) return null;
  await ctx.step({
    phase: "refused",
    action: {
      action_ordinal: ctx.nextActionOrdinal(),
      tool: a?.tool ?? toolName,
      target: a?.target ?? null,
      action_digest: canonical.ok ? canonical.action.digest : canonical.digest,
      classification: null,
    },
    refusal: {
      code: "ASP_AUTO_MODE_OUTSIDE_MUTATION_SET",
      detail: offered
        ? `${a?.target} is not in the Repair Run's declared mutation set`
        : `${toolName === "" ? "an unnamed tool" : toolName} is not offered to a Repair Agent: only read_file and write_file are, so its writes stay inside the mutation set`,
      terminal: "safe_rollback_unavailable",
    },
  });
  return { kind: "reason", reason: "safe_rollback_unavailable", candidateId: ctx.record.candidate_id };
}

/**
 * Propose → check → apply one action of the Repair Agent: the mutation set first, then the
 * producer's own mediation (ledger, policy, the host's adapters, the audit before and after).
 */
async function repairAction(
  ctx: RunContext,
  raw: unknown,
  allowed: ReadonlySet<string>,
  staged: ActionWorkspace,
): Promise<{ result: ActionResult } | TerminalOutcome> {
  const proposal = frozenProposal(raw);
  const outside = await refuseOutsideMutationSet(ctx, proposal, allowed);
  if (outside !== null) return outside;
  // A Repair Agent's ask reaches the Guardian exactly as the producer's does (Stages 6 and 7).
  const acted = await mediateAction(ctx, proposal, { guardian: true, workspace: staged });
  if ("kind" in acted) return { ...acted, candidateId: ctx.record.candidate_id } as TerminalOutcome;
  return { result: acted.result };
}

/** A Repair's staged view of the workspace: {@link stagedView}. */
interface StagedWorkspace extends ActionWorkspace {
  /** Write every staged file into the workspace, through its own link-safe writer, in path order. */
  publish(): Promise<void>;
}

/**
 * The workspace as a Repair Agent sees it: reads give what it staged, else the workspace's file;
 * writes are staged in memory only, after the workspace's own path resolution accepted the path
 * (a link or a path through one is the path escape it always is). Nothing reaches the workspace
 * until {@link StagedWorkspace.publish}. A Repair is offered no command and no removal.
 */
function stagedView(base: ActionWorkspace): StagedWorkspace {
  const staged = new Map<string, Uint8Array>();
  return {
    async read(path) {
      const current = await base.read(path);
      return staged.get(path) ?? current;
    },
    async write(path, bytes) {
      // The workspace's own bound (its default), checked here so an oversized write is refused
      // when it is proposed, not when an allowed plan is published.
      if (bytes.length > 8 * 1024 * 1024) throw new Error("the content is over the 8388608-byte limit");
      const current = staged.get(path) ?? (await base.read(path));
      staged.set(path, Uint8Array.from(bytes));
      return { changed: current === null || digestBytes(current) !== digestBytes(bytes) };
    },
    async run() {
      throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", "a Repair is offered no command", {
        data: { key: "run" },
      });
    },
    changes: () => base.changes(),
    async publish() {
      for (const path of [...staged.keys()].sort()) await base.write(path, staged.get(path) as Uint8Array);
    },
  };
}

/**
 * The mutation-set files `workspace` changed since the checkpoint, as whole-file edits; null when
 * a file the checkpoint held is gone.
 */
async function writtenSince(
  workspace: ActionWorkspace,
  checkpoint: ReadonlyMap<string, Uint8Array | null>,
): Promise<Completion["artifacts"] | null> {
  const out: Array<Completion["artifacts"][number]> = [];
  for (const [path, before] of checkpoint) {
    const now = await workspace.read(path);
    // A file of the checkpoint that is gone: no whole-file edit says so (no offered tool removes one).
    if (now === null) {
      if (before !== null) return null;
      continue;
    }
    if (before !== null && digestBytes(before) === digestBytes(now)) continue;
    out.push({ artifact_id: path, version_id: digestBytes(now).slice(7, 23), bytes: now });
  }
  return out;
}

/**
 * Restore every mutation-set path of the workspace to the checkpoint (a file it did not hold is
 * removed). Null when restored; the safety boundary when a path cannot be restored.
 */
async function rollBack(
  ctx: RunContext,
  checkpoint: ReadonlyMap<string, Uint8Array | null>,
): Promise<"safety_boundary" | null> {
  const workspace = ctx.options.workspace;
  if (workspace === undefined) return null;
  try {
    for (const [path, bytes] of checkpoint) {
      if (bytes !== null) await workspace.write(path, bytes);
      else if ((await workspace.read(path)) !== null) {
        if (workspace.remove === undefined) return "safety_boundary";
        await workspace.remove(path);
      }
    }
    return null;
  } catch {
    return "safety_boundary";
  }
}

/**
 * Read the Repair Agent's steps up to its completion (the edit plan). Each turn is admitted against
 * the round's turn budget and spends the extra-token budget; the run's signal bounds it. An Agent
 * that fails, proposes an action (it is offered no tools) or stops without a plan gives no plan.
 */
async function askRepairAgent(
  ctx: RunContext,
  engine: Engine,
  input: Parameters<typeof repairTask>[0],
  staged: ActionWorkspace | undefined,
): Promise<Planned> {
  const candidateId = ctx.record.candidate_id;
  const failed: TerminalOutcome = { kind: "reason", reason: "agent_failed", candidateId };
  let turns = 0;
  let it: AsyncIterator<EngineStep, void, ActionResult | undefined>;
  try {
    const tools = staged === undefined ? [] : REPAIR_TOOLS;
    const steps = engine.run({ run: ctx.run, task: repairTask(input), tools, signal: ctx.signal });
    it = (
      Symbol.asyncIterator in steps ? (steps as AsyncIterable<EngineStep>)[Symbol.asyncIterator]() : steps
    ) as AsyncIterator<EngineStep, void, ActionResult | undefined>;
  } catch {
    return { kind: "stop", outcome: failed, turns };
  }
  const allowed = new Set(input.mutationSet);
  let reply: ActionResult | undefined;
  try {
    for (;;) {
      const gate = ctx.admitNext(candidateId);
      if (gate !== null) return { kind: "stop", outcome: gate, turns };
      let next: IteratorResult<EngineStep, void> | typeof ABORTED;
      try {
        next = await ctx.orAbort(Promise.resolve().then(() => it.next(reply as ActionResult)));
      } catch {
        return { kind: "stop", outcome: failed, turns };
      }
      reply = undefined;
      if (next === ABORTED) return { kind: "stop", outcome: ctx.admitNext(candidateId) ?? failed, turns };
      if (next.done === true) return { kind: "stop", outcome: failed, turns };
      const step = next.value as EngineStep | { kind?: unknown };
      if (step.kind === "prose") continue;
      if (step.kind === "action" && staged !== undefined) {
        const acted = await repairAction(ctx, (step as { action?: unknown }).action, allowed, staged);
        if ("kind" in acted) return { kind: "stop", outcome: acted, turns, refused: true };
        reply = acted.result;
        continue;
      }
      if (step.kind === "turn") {
        const usage = (step as { usage?: { input_tokens?: unknown; output_tokens?: unknown } }).usage;
        const i = usage?.input_tokens as number;
        const o = usage?.output_tokens as number;
        if (!Number.isSafeInteger(i) || !Number.isSafeInteger(o) || i < 0 || o < 0) {
          return { kind: "stop", outcome: failed, turns };
        }
        turns += 1;
        const tokens = ctx.meter.recordTurnTokens(i + o, "extra");
        const turn = ctx.meter.admitRepairTurn();
        await ctx.step({ phase: "turn", usage: { input_tokens: i, output_tokens: o }, progress: false });
        if (!turn.admitted) return { kind: "stop", outcome: "repair_turns", turns };
        if (!tokens.admitted) return { kind: "stop", outcome: ctx.refusal(tokens, candidateId), turns };
        continue;
      }
      if (step.kind === "completion") {
        const c = step as Completion;
        if (typeof c.payload !== "string" || c.payload.length === 0 || !Array.isArray(c.artifacts)) {
          return { kind: "stop", outcome: failed, turns };
        }
        if (staged !== undefined) {
          // With a workspace the completion's own files are writes like any other: each proposed
          // as write_file and mediated, never written around the ledger, policy and the audit.
          for (const a of c.artifacts as ReadonlyArray<Partial<Completion["artifacts"][number]>>) {
            let content: string;
            try {
              if (!(a?.bytes instanceof Uint8Array)) throw new TypeError("no bytes");
              content = strict.decode(a.bytes);
            } catch {
              return { kind: "stop", outcome: failed, turns };
            }
            const proposal = { tool: "write_file", arguments: { path: a?.artifact_id, content } };
            const acted = await repairAction(ctx, proposal, allowed, staged);
            if ("kind" in acted) return { kind: "stop", outcome: acted, turns, refused: true };
          }
          return { kind: "plan", completion: { ...c, artifacts: [] }, turns };
        }
        return { kind: "plan", completion: c, turns };
      }
      // An action without a workspace (no tool is offered then), a claimed tool result, a
      // cancellation claim, the Engine's own turn limit or anything unknown: no plan.
      return { kind: "stop", outcome: failed, turns };
    }
  } finally {
    void Promise.resolve()
      .then(() => it.return?.())
      .catch(() => undefined);
  }
}

/** What the repair proof establishes: every Repair Run's latest version, in round order. */
export interface RepairSet {
  readonly repairs: ReadonlyArray<RepairRun>;
  /** The Repair Run that produced a candidate, if one did. */
  producedBy(candidateId: string): RepairRun | undefined;
}

/**
 * Prove the Repair Runs: each started from a committed candidate with a durable issues verdict,
 * under auto_fix with Stages 5 and 9 frozen on, its round the next one and within budget, its
 * checkpoint verifying, its findings that candidate's unresolved ones, its actor an excluded,
 * non-producer session; a completion matching its event, an applied one naming the candidate it
 * committed (parent: the repaired one, producer: the Repair actor, Artifacts inside the mutation
 * set); and every candidate with a parent produced by exactly such a Repair Run.
 */
export function proveRepairs(
  facts: RunFacts,
  base: RunBase,
  cands: CandidateSet,
  reviews: ReviewSet,
  bad: Problems,
): RepairSet {
  const { recs, events } = facts;
  const { first } = base;
  const latest = new Map<string, Rec<RepairRun>>();
  const started = new Map<string, Rec<RepairRun>>();
  for (const r of recs.repair as ReadonlyArray<Rec<RepairRun>>) {
    const prior = latest.get(r.body.repair_run_id);
    const ev = events.get(r.event_id)?.event;
    if (prior === undefined) {
      started.set(r.body.repair_run_id, r);
      if (ev?.type !== "repair_started" || ev.repair_run_id !== r.body.repair_run_id)
        bad(`repair run ${r.body.repair_run_id} did not commit with its repair_started`);
      else if (ev.round !== r.body.round || ev.from_candidate_id !== r.body.from_candidate_id)
        bad(`repair_started names another round or candidate than ${r.body.repair_run_id}`);
      if (r.body.outcome !== null || r.body.to_candidate_id !== null)
        bad(`repair run ${r.body.repair_run_id} started with an outcome`);
    } else {
      const keep = ["round", "from_candidate_id", "checkpoint", "mutation_set", "finding_ids", "actor"] as const;
      if (keep.some((k) => !same(prior.body[k], r.body[k]))) bad(`repair run ${r.body.repair_run_id} drifted`);
      if (prior.body.outcome !== null) bad(`repair run ${r.body.repair_run_id} completed twice`);
      if (
        ev?.type !== "repair_completed" ||
        ev.repair_run_id !== r.body.repair_run_id ||
        ev.outcome !== r.body.outcome ||
        ev.to_candidate_id !== r.body.to_candidate_id
      )
        bad(`repair run ${r.body.repair_run_id} completion does not match its repair_completed`);
    }
    latest.set(r.body.repair_run_id, r);
  }
  const repairs = [...latest.values()].map((r) => r.body).sort((a, b) => a.round - b.round);
  const stages = recs.stages[0]?.body as { flags?: Record<string, boolean> } | undefined;
  const flags = { flags: (stages?.flags ?? {}) as never };
  if (
    repairs.length > 0 &&
    (first.selection.result_review_mode !== "auto_fix" ||
      base.review !== "gate" ||
      !frozenFlag(flags, "stage5_auto_repair") ||
      !frozenFlag(flags, "stage9_safe_repair_checkpoint"))
  ) {
    bad("a Repair Run outside auto_fix under stages 4, 5 and 9");
  }
  if (repairs.length > first.budgets.max_repair_rounds) bad("more Repair Runs than max_repair_rounds");
  const excluded = first.independence.excluded_actors ?? [];
  repairs.forEach((rr, i) => {
    if (rr.round !== i + 1) bad(`repair run ${rr.repair_run_id} is round ${rr.round}, not ${i + 1}`);
    if (repairRunIdOf(base.run, rr.from_candidate_id, rr.round) !== rr.repair_run_id)
      bad(`repair run ${rr.repair_run_id} id does not re-derive`);
    if (
      facts.input.snapshots[rr.checkpoint.digest] === undefined ||
      facts.input.snapshots[rr.checkpoint.digest] === null
    )
      bad(`repair run ${rr.repair_run_id}: checkpoint ${rr.checkpoint.digest} does not verify`);
    if (checkpointIdOf(rr.checkpoint.digest) !== rr.checkpoint.checkpoint_id)
      bad(`repair run ${rr.repair_run_id}: checkpoint id does not re-derive`);
    const from = cands.candidates.get(rr.from_candidate_id)?.body;
    if (from === undefined) {
      bad(`repair run ${rr.repair_run_id} from a candidate that never committed`);
      return;
    }
    const issuesReview: ReviewRun | undefined = reviews
      .reviewsOf(rr.from_candidate_id)
      .find((r) => r.verdict === "issues");
    if (issuesReview === undefined) bad(`repair run ${rr.repair_run_id} without a durable issues verdict`);
    else if (!rr.finding_ids.every((id) => issuesReview.finding_ids.includes(id)))
      bad(`repair run ${rr.repair_run_id} names findings its candidate's review did not`);
    if (!same(rr.before_versions, from.artifact_versions))
      bad(`repair run ${rr.repair_run_id}: before versions are not the candidate's`);
    for (const v of from.artifact_versions) {
      if (!rr.mutation_set.includes(v.artifact_id))
        bad(`repair run ${rr.repair_run_id}: the mutation set leaves out the candidate's ${v.artifact_id}`);
    }
    const producer = cands.candidates.get(rr.from_candidate_id)?.body.producer;
    const sameActor = (a: { actor_id: string; session_id: string }, b: { actor_id: string; session_id: string }) =>
      a.actor_id === b.actor_id || a.session_id === b.session_id;
    if (!excluded.some((e) => e.actor_id === rr.actor.actor_id && e.session_id === rr.actor.session_id))
      bad(`repair run ${rr.repair_run_id}: its actor is not frozen in the run's exclusions`);
    if (producer !== undefined && from.parent_candidate_id === null && sameActor(producer, rr.actor))
      bad(`repair run ${rr.repair_run_id}: the Repair actor is the producer's session`);
    if (rr.outcome === "applied") {
      const to = rr.to_candidate_id === null ? undefined : cands.candidates.get(rr.to_candidate_id)?.body;
      if (to === undefined) bad(`repair run ${rr.repair_run_id} applied without its candidate`);
      else {
        if (to.parent_candidate_id !== rr.from_candidate_id || !same(to.producer, rr.actor))
          bad(`candidate ${to.candidate_id} is not the Repair Run's own`);
        if (!same(rr.after_versions, to.artifact_versions))
          bad(`repair run ${rr.repair_run_id}: after versions are not the new candidate's`);
        const before = new Map(from.artifact_versions.map((v) => [v.artifact_id, v.checksum]));
        for (const v of to.artifact_versions) {
          if (before.get(v.artifact_id) !== v.checksum && !rr.mutation_set.includes(v.artifact_id))
            bad(`repair run ${rr.repair_run_id} changed ${v.artifact_id} outside its mutation set`);
        }
      }
    } else if (rr.to_candidate_id !== null) bad(`repair run ${rr.repair_run_id} ${rr.outcome} names a candidate`);
    // ADR 0012: only a plan the host's check allowed is applied, and an allowed one is never rejected.
    if (rr.check !== undefined) {
      if (rr.outcome === "applied" && rr.check.decision !== "allow")
        bad(`repair run ${rr.repair_run_id} applied a plan the host's check decided ${rr.check.decision}`);
      if (rr.outcome === "rejected" && rr.check.decision === "allow")
        bad(`repair run ${rr.repair_run_id} rejected a plan the host's check allowed`);
      if (rr.outcome !== "applied" && rr.outcome !== "rejected")
        bad(`repair run ${rr.repair_run_id} ${String(rr.outcome)} carries a host check`);
      // Decision 4: a repeat is decided by an earlier round's denial of the same exact plan.
      if (rr.check.repeat_of !== undefined) {
        const prior = repairs.slice(0, i).find((p) => p.repair_run_id === rr.check?.repeat_of)?.check;
        if (
          prior?.decision !== "deny" ||
          prior.repeat_of !== undefined ||
          prior.plan_digest === undefined ||
          prior.plan_digest !== rr.check.plan_digest ||
          prior.receipt_id !== rr.check.receipt_id ||
          rr.check.decision !== "deny"
        )
          bad(`repair run ${rr.repair_run_id} repeats a denial no earlier round of this plan made`);
        // Under the loop circuits the repeat is the run's last round: the circuit opened on it.
        if (frozenFlag(flags, "stage8_loop_circuits") && i !== repairs.length - 1)
          bad(`repair run ${rr.repair_run_id} repeats a denied plan and the run went on past the open circuit`);
      }
      // And the other way: a plan this run's check already denied is never judged again.
      const denied = repairs
        .slice(0, i)
        .find(
          (p) =>
            p.check?.decision === "deny" &&
            p.check.repeat_of === undefined &&
            p.check.plan_digest === rr.check?.plan_digest,
        );
      if (
        denied !== undefined &&
        rr.check.plan_digest !== undefined &&
        (rr.check.repeat_of !== denied.repair_run_id || rr.check.decision !== "deny")
      )
        bad(`repair run ${rr.repair_run_id} judged again a plan ${denied.repair_run_id} denied`);
    }
  });
  proveRepairSteps(facts, started, latest, bad);
  const producedBy = (id: string): RepairRun | undefined =>
    repairs.find((r) => r.outcome === "applied" && r.to_candidate_id === id);
  // A Repair Run still open (a crash, or a completion that could not commit, after its candidate
  // committed) produced the candidate it is the parent and actor of, committed after it started.
  const open = repairs[repairs.length - 1];
  const openStart = open === undefined ? undefined : started.get(open.repair_run_id)?.seq;
  for (const c of cands.candidates.values()) {
    if (c.body.parent_candidate_id === null || producedBy(c.body.candidate_id) !== undefined) continue;
    const byOpen =
      open !== undefined &&
      open.outcome === null &&
      openStart !== undefined &&
      c.seq > openStart &&
      c.body.parent_candidate_id === open.from_candidate_id &&
      same(c.body.producer, open.actor);
    if (!byOpen) bad(`candidate ${c.body.candidate_id} has a parent but no Repair Run produced it`);
  }
  return { repairs, producedBy };
}

/**
 * Prove the Repair Agent's mediated steps: each step committed while a Repair Run was open
 * (`repairing` / `repair_acting`) belongs to that run; an admitted action is an offered tool
 * (read_file, write_file) and every admitted write names a path of the run's mutation set; a
 * refusal for leaving the mutation set names a path outside it or a tool not offered.
 */
function proveRepairSteps(
  facts: RunFacts,
  started: ReadonlyMap<string, Rec<RepairRun>>,
  latest: ReadonlyMap<string, Rec<RepairRun>>,
  bad: Problems,
): void {
  const fromAt = new Map(facts.replay.trace.map((m) => [m.seq, m.from]));
  const starts = [...started.values()].sort((a, b) => a.seq - b.seq);
  const offered = new Set(REPAIR_TOOLS.map((t) => t.name));
  for (const st of facts.steps) {
    const phase = fromAt.get(st.seq);
    if (phase !== "repairing" && phase !== "repair_acting") continue;
    const open = starts.filter((r) => r.seq < st.seq).pop();
    const rr = open === undefined ? undefined : latest.get(open.body.repair_run_id)?.body;
    if (rr === undefined) {
      bad(`step ${st.body.ordinal} committed in ${phase} outside any Repair Run`);
      continue;
    }
    const a = st.body.action;
    if (a === null) continue;
    const inSet = a.target !== null && rr.mutation_set.includes(a.target);
    if (st.body.phase === "admitted") {
      if (!offered.has(a.tool)) bad(`repair run ${rr.repair_run_id} admitted ${a.tool}, a tool it is not offered`);
      else if (a.tool === "write_file" && !inSet)
        bad(`repair run ${rr.repair_run_id} admitted a write of ${a.target} outside its mutation set`);
    }
    if (
      st.body.refusal?.code === "ASP_AUTO_MODE_OUTSIDE_MUTATION_SET" &&
      offered.has(a.tool) &&
      (a.tool !== "write_file" || inSet)
    ) {
      bad(`repair run ${rr.repair_run_id} refused ${a.tool} ${String(a.target)} as outside a mutation set it is in`);
    }
  }
}

/**
 * A finding's status as its durable causes give it (the contract: "each shown only with its
 * durable cause"): a review records every finding `open`; Repair and the independent re-review
 * cause the rest, and the projection derives them, never a row's own claim:
 * - `claimed`: an applied Repair Run names it and its new candidate has no verdict yet;
 * - `resolved`: the new candidate's independent verdict no longer reports its fingerprint;
 * - `unaddressed`: the Repair Run named it and ended without applying, or the new verdict reports
 *   the same fingerprint again.
 */
export interface FindingStatusView {
  readonly finding_id: string;
  readonly status: Finding["status"];
  /** The record that causes the status: the review run, or the Repair Run and the re-review. */
  readonly cause: string;
}

/** Derive every finding's status from the Repair Runs and reviews (see {@link FindingStatusView}). Pure. */
export function findingStatuses(reviews: ReviewSet, repairs: RepairSet): FindingStatusView[] {
  const out: FindingStatusView[] = [];
  for (const f of reviews.findingById.values()) {
    const rr = repairs.repairs.find((r) => r.finding_ids.includes(f.finding_id));
    if (rr === undefined || rr.outcome === null) {
      out.push({ finding_id: f.finding_id, status: "open", cause: `review ${f.review_run_id}` });
      continue;
    }
    if (rr.outcome !== "applied" || rr.to_candidate_id === null) {
      out.push({ finding_id: f.finding_id, status: "unaddressed", cause: `${rr.repair_run_id} (${rr.outcome})` });
      continue;
    }
    const verdict = reviews.reviewsOf(rr.to_candidate_id).find((r) => r.verdict !== null);
    if (verdict === undefined) {
      out.push({ finding_id: f.finding_id, status: "claimed", cause: rr.repair_run_id });
      continue;
    }
    const again = verdict.finding_ids.some((id) => reviews.findingById.get(id)?.fingerprint === f.fingerprint);
    out.push({
      finding_id: f.finding_id,
      status: again ? "unaddressed" : "resolved",
      cause: `${rr.repair_run_id}, then ${verdict.review_run_id}`,
    });
  }
  return out;
}

/**
 * Prove a terminal against the Repair Runs: a terminal that left `repairing`, `repair_acting` or `repaired` is the
 * safety boundary only; `safe_rollback_unavailable` only under auto_fix with Stage 5, for a latest
 * candidate with an issues verdict and no Repair applied from it (Stage 9 off, no checkpoint, or
 * its plan rejected); `completed_with_issues` stops `review_only` only under review_only, and
 * under auto_fix `budget_exhausted` / `loop_detected` only as the committed ledger proves them.
 */
export function proveRepairTerminal(
  facts: RunFacts,
  base: RunBase,
  reviews: ReviewSet,
  repairs: RepairSet,
  terminalRec: Rec<TerminalRecord> | undefined,
  bad: Problems,
): void {
  if (terminalRec === undefined) return;
  const terminal = terminalRec.body;
  const left = facts.replay.trace.find((m) => m.on === "auto_run_terminal")?.from;
  if (
    (left === "repairing" || left === "repair_acting" || left === "repaired") &&
    terminal.terminal_reason !== "safety_boundary"
  )
    bad(`a ${terminal.terminal_reason ?? terminal.state} terminal while ${left}`);
  const ledger = facts.recs.ledger.find((l) => l.event_id === terminalRec.event_id)?.body as BudgetLedger | undefined;
  const mode = base.first.selection.result_review_mode;
  const stages = facts.recs.stages[0]?.body as { flags?: Record<string, boolean> } | undefined;
  const flags = { flags: (stages?.flags ?? {}) as never };
  if (terminal.terminal_reason === "safe_rollback_unavailable") {
    const id = terminal.candidate_id;
    const fromLatest = repairs.repairs.filter((r) => r.from_candidate_id === id);
    const last = fromLatest[fromLatest.length - 1];
    if (
      mode !== "auto_fix" ||
      !frozenFlag(flags, "stage5_auto_repair") ||
      id === null ||
      id !== base.latestRun.candidate_id ||
      !reviews.reviewsOf(id).some((r) => r.verdict === "issues") ||
      // A plan rejected by the host's check (ADR 0012) spends its round; it is not this terminal.
      (last !== undefined && (last.outcome !== "rejected" || last.check !== undefined))
    ) {
      bad("safe_rollback_unavailable is not what the review and Repair records show");
    }
  }
  if (terminal.state !== "completed_with_issues") return;
  if (terminal.stop_reason === "review_only" && mode !== "review_only")
    bad(`completed_with_issues(review_only) under ${mode}`);
  if (terminal.stop_reason === "loop_detected" && ledger?.circuits.no_progress !== "open")
    bad("completed_with_issues(loop_detected) without an open no-progress circuit in the committed ledger");
  if (terminal.stop_reason === "budget_exhausted") {
    const limit = terminal.exhausted_limit;
    const proved =
      ledger !== undefined &&
      (limit === "max_repair_rounds"
        ? ledger.consumed.repair_rounds >= ledger.limits.max_repair_rounds
        : limit === "repair_turns_per_round"
          ? ledger.consumed.repair_turns >= ledger.limits.repair_turns_per_round
          : false);
    if (!proved)
      bad(`completed_with_issues(budget_exhausted: ${String(limit)}) is not what the committed ledger proves`);
  }
}
