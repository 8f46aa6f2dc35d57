import { type RunIdentity, STAGE_FLAGS } from "@asp/contracts";
import { type AutoModeSelection, BUILT_STAGES, type StageFlags } from "@asp/rollout";
import { AutoModeError } from "./errors.js";

/** The rollout flags the Auto Run runtime consumes (Stages 2–9), each on its own. */
export const RUNTIME_STAGE_FLAGS = Object.freeze([
  "stage2_auto_run_storage",
  "stage3_scientific_review_shadow",
  "stage4_review_completion_gate",
  "stage8_loop_circuits",
  "stage5_auto_repair",
  "stage9_safe_repair_checkpoint",
  "stage6_guardian_shadow",
  "stage7_guardian_enforcement",
] as const);

/**
 * The runtime flags runs froze before later stages were built: the first three (before Stage 8),
 * the first four (before Stages 5 and 9), the first six (before Stages 6 and 7). A record with one
 * of these key sets is still valid; the flags it lacks were off.
 */
const EARLIER_FLAG_SETS: ReadonlyArray<ReadonlyArray<string>> = [
  RUNTIME_STAGE_FLAGS.slice(0, 3),
  RUNTIME_STAGE_FLAGS.slice(0, 4),
  RUNTIME_STAGE_FLAGS.slice(0, 6),
];

/** A frozen runtime flag, false when the run froze its stages before the flag existed. Pure. */
export function frozenFlag(stages: Pick<RunStages, "flags">, flag: RuntimeStageFlag): boolean {
  return (stages.flags as Partial<Record<RuntimeStageFlag, boolean>>)[flag] === true;
}

/**
 * Refuse flags that turn on a stage this runtime does not implement (`@asp/rollout`
 * `BUILT_STAGES`), for a caller that built its flags by hand: a flag for something not built is
 * never accepted silently. Pure.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_STAGE_NOT_BUILT` naming the first such stage.
 */
export function assertBuiltStages(flags: Pick<StageFlags, "isEnabled">): void {
  const unbuilt = STAGE_FLAGS.filter((f) => flags.isEnabled(f) && !BUILT_STAGES.includes(f));
  if (unbuilt.length > 0) {
    throw new AutoModeError(
      "ASP_AUTO_MODE_STAGE_NOT_BUILT",
      `${unbuilt.join(", ")} ${unbuilt.length === 1 ? "is" : "are"} on but not built in this release: turn ${unbuilt.length === 1 ? "it" : "them"} off (built: ${BUILT_STAGES.join(", ")})`,
      { data: { stages: unbuilt, built: [...BUILT_STAGES] } },
    );
  }
}

/**
 * Who resolves a deterministic `ask` in a run (ADR 0010):
 * - `off`: nobody: the ask is refused headless, attributed to policy;
 * - `shadow`: Stage 6 (without Stage 7 enforcing): the Guardian's advice is recorded and the ask
 *   is still refused headless, exactly as without it;
 * - `enforce`: Stage 7 with `approvals_reviewer=auto_review`: the Guardian resolves the ask (a
 *   one-shot allow, or a deny).
 */
export type GuardianMode = "off" | "shadow" | "enforce";

/** The {@link GuardianMode} of a run's frozen stages and selection. Pure. */
export function guardianMode(
  stages: Pick<RunStages, "flags">,
  selection: Pick<AutoModeSelection, "approvals_reviewer">,
): GuardianMode {
  if (frozenFlag(stages, "stage7_guardian_enforcement") && selection.approvals_reviewer === "auto_review")
    return "enforce";
  return frozenFlag(stages, "stage6_guardian_shadow") ? "shadow" : "off";
}

/** One of {@link RUNTIME_STAGE_FLAGS}. */
export type RuntimeStageFlag = (typeof RUNTIME_STAGE_FLAGS)[number];

/**
 * How a run treats result review, derived from its selection and its stage flags:
 * - `off`: no Reviewer runs (result review off, or neither Stage 3 nor Stage 4 on; a selection
 *   alone enables nothing, and a stage alone reviews nothing while result review is off);
 * - `shadow`: Stage 3 without Stage 4: the Reviewer runs and its judgment is recorded, but it
 *   gates nothing (no verified / completed_with_issues / review_unavailable, no promotion);
 * - `gate`: Stage 4 on: provisional streaming, the candidate committed before the verdict, and
 *   a terminal from the verdict; Verified only by compare-and-swap promotion. With Stage 3 also
 *   on there is still exactly one (gating) review ([ADR 0007](../../../docs/adr/0007-stages-at-runtime.md)).
 */
export type ResultReviewStage = "off" | "shadow" | "gate";

/**
 * The stages one Auto Run runs under, frozen and committed with `auto_run_started` (fact kind
 * `auto.stages`): the runtime flags as they were, and the result-review stage they give with the
 * run's selection. The projection re-derives `result_review` and judges every later row by it.
 */
export interface RunStages {
  readonly run: RunIdentity;
  readonly flags: Readonly<Record<RuntimeStageFlag, boolean>>;
  readonly result_review: ResultReviewStage;
}

/** The runtime flags of a {@link StageFlags}, as a plain record (what {@link RunStages} freezes). */
export function runtimeStageFlags(flags: Pick<StageFlags, "isEnabled">): Record<RuntimeStageFlag, boolean> {
  return Object.fromEntries(RUNTIME_STAGE_FLAGS.map((f) => [f, flags.isEnabled(f)])) as Record<
    RuntimeStageFlag,
    boolean
  >;
}

/**
 * The {@link ResultReviewStage} of a selection under the runtime flags. Pure. Stage 2 is not
 * consulted here: without it there is no Auto Run at all (`createAutoRunner` refuses).
 *
 * @example
 * ```ts
 * resultReviewStage({ result_review_mode: "review_only" }, { stage2_auto_run_storage: true, stage3_scientific_review_shadow: true, stage4_review_completion_gate: false }); // "shadow"
 * ```
 */
export function resultReviewStage(
  selection: Pick<AutoModeSelection, "result_review_mode">,
  flags: Readonly<Record<RuntimeStageFlag, boolean>>,
): ResultReviewStage {
  if (selection.result_review_mode === "off") return "off";
  if (flags.stage4_review_completion_gate) return "gate";
  if (flags.stage3_scientific_review_shadow) return "shadow";
  return "off";
}

/** Validate a {@link RunStages} record's shape (closed; every runtime flag a boolean). Pure. */
export function checkRunStages(record: unknown): string | null {
  const r = record as Partial<RunStages> | null;
  if (typeof r !== "object" || r === null) return "stages: not an object";
  const keys = Object.keys(r).sort();
  if (keys.join(",") !== "flags,result_review,run") return `stages: fields ${keys.join(",")}`;
  if (typeof r.run !== "object" || r.run === null) return "stages: run is not an identity";
  const flags = r.flags as Record<string, unknown> | undefined;
  // Runs recorded before Stages 8, 5, 9, 6 and 7 were built froze fewer flags (EARLIER_FLAG_SETS).
  const flagKeys = typeof flags === "object" && flags !== null ? Object.keys(flags).sort().join(",") : "";
  if (
    typeof flags !== "object" ||
    flags === null ||
    ![RUNTIME_STAGE_FLAGS, ...EARLIER_FLAG_SETS].some((set) => [...set].sort().join(",") === flagKeys) ||
    !Object.values(flags).every((v) => typeof v === "boolean")
  ) {
    return "stages: flags are not the runtime stage flags";
  }
  if (!["off", "shadow", "gate"].includes(r.result_review as string)) return "stages: unknown result_review";
  return null;
}
