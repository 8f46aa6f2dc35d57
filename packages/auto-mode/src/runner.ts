import type { CANDIDATE_USER_TRUTH, Candidate, IndependencePolicy, RunIdentity } from "@asp/contracts";
import type { Store } from "@asp/evidence";
import { type AutoModeSelection, type BudgetSet, isBudgetActive, type StageFlags } from "@asp/rollout";
import type { ActionWorkspace, PermissionClassifier } from "./actions.js";
import { type AutoEvent, readRunFacts, type StepRecord } from "./durable.js";
import type { ActorIdentity, Engine } from "./engine.js";
import { AutoModeError } from "./errors.js";
import type { Guardian } from "./guardian.js";
import { checkRun, runIdOf } from "./identity.js";
import { commitCandidate, type Produced } from "./modules/candidate.js";
import { driveEngine } from "./modules/engine.js";
import { isSafeRelPath, type RepairOptions, repairCandidate } from "./modules/repair.js";
import { reviewCandidate } from "./modules/review.js";
import { deliver, promote } from "./modules/terminal.js";
import { type AutoRunProjection, loadAutoRunProjection } from "./projection.js";
import type { ReviewerPort } from "./review.js";
import type { TerminalOutcome } from "./run/context.js";
import { RunDriver } from "./run/driver.js";
import { assertBuiltStages, guardianMode, runtimeStageFlags } from "./stages.js";

export type { RepairOptions } from "./modules/repair.js";
export { buildTerminalRecord } from "./modules/terminal.js";
export type { TerminalOutcome } from "./run/context.js";

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
   * Stage 5: the Repair Agent and the paths it may write beyond the candidate's own Artifacts.
   * Required for `auto_fix` under Stages 5 and 9; its actor is frozen in the run's exclusions (it
   * never reviews or promotes) and must be a session other than the producer's.
   */
  readonly repair?: RepairOptions;
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
   * The Guardian (Stages 6 and 7, ADR 0010): only an `ask` of deterministic policy reaches it.
   * Stage 6 records its advice and resolves nothing; Stage 7 with `approvals_reviewer=auto_review`
   * lets it resolve the ask (a one-shot, exact-action allow, or a deny). Required when either
   * applies to a run; {@link createRulesGuardian} is the deterministic one.
   */
  readonly guardian?: Guardian;
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
  /**
   * Notified with each event after its transition committed (never before, never on failure), and
   * under Stage 7 with the host's `permission_resolved` (`resolution_actor`, `audit_id`) once the
   * Guardian's decision and its permission audit committed.
   */
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
  /**
   * The user's Stop/Cancel, through the host (e.g. the CLI's SIGINT): once it aborts, nothing more
   * is admitted, the Engine's signal aborts, and the run ends `user_cancelled`. Only this ends a
   * run `user_cancelled`: an Engine's own `cancelled` step is an Agent failure (ADR 0009 §9).
   */
  readonly cancel?: AbortSignal;
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
      checkRepairOptions(options, params);
      const mode = guardianMode({ flags: runtimeStageFlags(options.flags) }, params.selection);
      if (mode !== "off" && typeof options.guardian?.assess !== "function") {
        throw new AutoModeError(
          "ASP_AUTO_MODE_INVALID_OPTION",
          `${mode === "shadow" ? "stage6_guardian_shadow" : "stage7_guardian_enforcement with approvals_reviewer=auto_review"} needs a Guardian (options.guardian, e.g. createRulesGuardian): attach one or turn the stage off`,
          { data: { key: "guardian" } },
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
      driver.arm();
      try {
        await drive(driver);
      } catch (error) {
        // A required record did not commit, or anything else failed after the run started: the
        // safety boundary, if even that can commit; a run never stays without its terminal.
        try {
          // Unconditional: when another writer moved the run's head, this is how the run still ends.
          await driver.terminal({ kind: "reason", reason: "safety_boundary", candidateId: null }, [], "unconditional");
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

/**
 * The run's course, composed from the stage modules' activities: the Engine module drives to a
 * completion, the candidate module commits it, and the run's frozen stages decide what follows:
 * `off` stops at the provisional candidate; `shadow` (Stage 3) records the review and gates
 * nothing; `gate` (Stage 4) streams provisional, reviews, delivers and promotes.
 */
async function drive(driver: RunDriver): Promise<void> {
  const driven = await driveEngine(driver);
  const produced: Produced | TerminalOutcome =
    driven.kind === "completion" ? await commitCandidate(driver, driven) : driven;
  if ("kind" in produced) {
    await driver.terminal(produced);
    return;
  }
  if (driver.stages.result_review === "shadow") {
    // Stage 3: the judgment is recorded, completion is not gated. Only an integrity failure
    // (a pass beside a material finding, a drifted Reviewer) ends the run: the safety boundary.
    const outcome = await reviewCandidate(driver, produced);
    if (outcome?.kind === "reason") await driver.terminal(outcome);
    return;
  }
  if (driver.stages.result_review !== "gate") return;
  // Stage 4: the candidate committed (review_status=candidate) before any verdict; it streams
  // provisional; only the compare-and-swap promotion makes it Verified.
  let current = produced;
  for (;;) {
    driver.provisional("candidate", new TextDecoder().decode(current.payload), current.candidate.candidate_id);
    const outcome = await reviewCandidate(driver, current);
    if (outcome === null) return;
    if (outcome.kind === "issues" && driver.record.selection.result_review_mode === "auto_fix") {
      // Stage 5: findings start a bounded Repair Run; its candidate is reviewed again, independently.
      const next = await repairRound(driver, current, outcome);
      if (next !== null && "payload" in next) {
        current = next;
        continue;
      }
      if (next !== null) await driver.terminal(next);
      return;
    }
    const final = outcome.kind === "verified" ? await deliver(driver, outcome.candidate) : outcome;
    if (final.kind === "verified") await promote(driver, final.candidate);
    else await driver.terminal(final);
    return;
  }
}

/**
 * Stage 5 after an issues verdict under auto_fix: the repeated-finding circuit first (Stage 8),
 * then Repair Runs until one gives a new candidate (returned, to review) or the run must end (the
 * outcome). A round that changes nothing spends its budget and the next round is tried.
 */
async function repairRound(
  driver: RunDriver,
  current: Produced,
  outcome: Extract<TerminalOutcome, { kind: "issues" }>,
): Promise<Produced | TerminalOutcome | null> {
  const findings = outcome.findings ?? [];
  const issues = (stop: "loop_detected" | "budget_exhausted"): TerminalOutcome => ({ ...outcome, stop });
  const loop = driver.meter.recordFindings(findings.map((f) => f.fingerprint));
  if (!loop.admitted) return issues("loop_detected");
  const repair = driver.options.repair;
  for (;;) {
    const result =
      repair === undefined
        ? ({
            kind: "reason",
            reason: "safe_rollback_unavailable",
            candidateId: current.candidate.candidate_id,
          } as const)
        : await repairCandidate(driver, current, findings, repair);
    if (result.kind === "repaired") return result.produced;
    if (result.kind === "no_change") continue;
    if (result.kind === "issues") return { ...result, unresolved: outcome.unresolved };
    return result;
  }
}

/**
 * The Repair options a run needs, checked before anything commits: under auto_fix with Stages 5
 * and 9 a Repair Agent is required, and it is never the producer's actor or session.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION`.
 */
function checkRepairOptions(options: AutoRunnerOptions, params: AutoRunParams): void {
  const repair = options.repair;
  const repairs =
    params.selection.result_review_mode === "auto_fix" &&
    options.flags.isEnabled("stage5_auto_repair") &&
    options.flags.isEnabled("stage9_safe_repair_checkpoint");
  if (repairs && repair === undefined) {
    throw new AutoModeError(
      "ASP_AUTO_MODE_INVALID_OPTION",
      "auto_fix under stages 5 and 9 needs a Repair Agent (options.repair): configure one, or select review_only",
      { data: { key: "repair" } },
    );
  }
  if (repair === undefined) return;
  const a = repair.engine?.actor;
  if (typeof a?.actor_id !== "string" || typeof a.session_id !== "string" || typeof a.fingerprint !== "string") {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", "the Repair Agent needs an actor identity", {
      data: { key: "repair.engine.actor" },
    });
  }
  const p = options.engine.actor;
  if (a.actor_id === p.actor_id || a.session_id === p.session_id) {
    throw new AutoModeError(
      "ASP_AUTO_MODE_INVALID_OPTION",
      "the Repair Agent must be a distinct actor and session from the producer's",
      { data: { key: "repair.engine.actor" } },
    );
  }
  for (const path of repair.mutationSet ?? []) {
    if (!isSafeRelPath(path)) {
      throw new AutoModeError(
        "ASP_AUTO_MODE_INVALID_OPTION",
        `mutation set path ${JSON.stringify(path)} is not a safe relative path`,
        {
          data: { key: "repair.mutationSet" },
        },
      );
    }
  }
}
