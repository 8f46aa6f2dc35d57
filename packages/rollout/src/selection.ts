import type {
  ApprovalsReviewer,
  AutoModePreset,
  AutoRun,
  ResultReviewMode,
  SelectionSource,
  StoredAutoModePreset,
} from "@asp/contracts";
import { type ConfigScope, hasExplicitSelection, type ParsedAutoModeConfig, type SelectionKey } from "./config.js";
import { rolloutError } from "./errors.js";
import { parseBoolean } from "./parse.js";
import { BUILT_IN, sourceOf, type ValueSource } from "./sources.js";

/** The resolved selection as an Auto Run stores it: `{ preset, result_review_mode, approvals_reviewer, source, normalized }`. */
export type AutoModeSelection = AutoRun["selection"];

/** The built-in selection: preset off, result review off, user approval. */
export const BUILT_IN_SELECTION: Readonly<{
  preset: StoredAutoModePreset;
  result_review_mode: ResultReviewMode;
  approvals_reviewer: ApprovalsReviewer;
}> = Object.freeze({ preset: "off", result_review_mode: "off", approvals_reviewer: "user" });

/** One sub-mode the preset overrode, reported so the change is never silent. */
export interface Normalization {
  readonly key: "result_review_mode" | "approvals_reviewer";
  /** The explicitly configured value. */
  readonly from: string;
  /** The value the preset forces. */
  readonly to: string;
}

/** Where the session stands: an imported session is quarantined until a fresh continuation. */
export interface SessionState {
  readonly imported: boolean;
  /** True once an explicit fresh continuation of the imported session has been created. */
  readonly freshContinuation?: boolean;
}

/** The legacy `review:auto:<root_frame_id>` boolean, as stored (boolean or a boolean spelling). */
export interface LegacyReviewAuto {
  readonly rootFrameId: string;
  readonly value: boolean | string;
}

/** Inputs of {@link resolveSelection}: every candidate source, already parsed. */
export interface SelectionInputs {
  readonly session?: SessionState;
  readonly frame?: ParsedAutoModeConfig;
  readonly project?: ParsedAutoModeConfig;
  readonly deployment?: ParsedAutoModeConfig;
  readonly legacyReviewAuto?: LegacyReviewAuto;
}

/** The selection with the provenance of each value and any normalization applied. */
export interface ResolvedSelection {
  readonly selection: AutoModeSelection;
  readonly sources: Readonly<Record<SelectionKey, ValueSource>>;
  readonly normalizations: ReadonlyArray<Normalization>;
}

/** The settings key of the legacy boolean for a root frame: `review:auto:<root_frame_id>`. */
export function legacyReviewAutoKey(rootFrameId: string): string {
  return `review:auto:${rootFrameId}`;
}

/** Stated values of one source, before normalization. */
export interface Stated {
  readonly preset?: AutoModePreset | undefined;
  readonly result_review_mode?: ResultReviewMode | undefined;
  readonly approvals_reviewer?: ApprovalsReviewer | undefined;
}

/**
 * The preset as a run stores it: `autonomous` is the same preset as `on` ("Product modes":
 * "off, on/autonomous"), so it is stored as `on`. Pure.
 */
export function normalizePreset(preset: AutoModePreset): StoredAutoModePreset {
  return preset === "off" ? "off" : "on";
}

/**
 * Apply the preset rule to one source's stated values. Preset `on`/`autonomous` (stored as `on`) forces
 * `auto_fix` + `auto_review`; a contradictory explicit sub-mode is overridden and reported. Preset
 * `off` (or none) leaves the sub-modes independent; unstated values take the built-in values.
 * Pure.
 *
 * @example
 * ```ts
 * normalizeSelection({ preset: "on", result_review_mode: "review_only" });
 * // { preset: "on", result_review_mode: "auto_fix", approvals_reviewer: "auto_review",
 * //   normalizations: [{ key: "result_review_mode", from: "review_only", to: "auto_fix" }] }
 * ```
 */
export function normalizeSelection(stated: Stated): {
  preset: StoredAutoModePreset;
  result_review_mode: ResultReviewMode;
  approvals_reviewer: ApprovalsReviewer;
  normalizations: Normalization[];
} {
  const preset = normalizePreset(stated.preset ?? BUILT_IN_SELECTION.preset);
  if (preset === "off") {
    return {
      preset,
      result_review_mode: stated.result_review_mode ?? BUILT_IN_SELECTION.result_review_mode,
      approvals_reviewer: stated.approvals_reviewer ?? BUILT_IN_SELECTION.approvals_reviewer,
      normalizations: [],
    };
  }
  const normalizations: Normalization[] = [];
  if (stated.result_review_mode !== undefined && stated.result_review_mode !== "auto_fix") {
    normalizations.push({ key: "result_review_mode", from: stated.result_review_mode, to: "auto_fix" });
  }
  if (stated.approvals_reviewer !== undefined && stated.approvals_reviewer !== "auto_review") {
    normalizations.push({ key: "approvals_reviewer", from: stated.approvals_reviewer, to: "auto_review" });
  }
  return { preset, result_review_mode: "auto_fix", approvals_reviewer: "auto_review", normalizations };
}

function checkScope(config: ParsedAutoModeConfig | undefined, scope: ConfigScope): void {
  if (config !== undefined && config.scope !== scope) {
    throw rolloutError(
      "ASP_ROLLOUT_INVALID_OPTION",
      `a ${config.scope} configuration was passed as the ${scope} selection`,
      { key: scope, source: "options" },
    );
  }
}

function fromConfig(config: ParsedAutoModeConfig, source: SelectionSource): ResolvedSelection {
  const n = normalizeSelection(config);
  const at = (key: SelectionKey): ValueSource =>
    config[key] === undefined ? BUILT_IN : sourceOf(config.scope, key, config.origin);
  const forced = n.preset !== "off";
  return {
    selection: {
      preset: n.preset,
      result_review_mode: n.result_review_mode,
      approvals_reviewer: n.approvals_reviewer,
      source,
      normalized: n.normalizations.length > 0,
    },
    sources: {
      preset: at("preset"),
      result_review_mode: forced ? at("preset") : at("result_review_mode"),
      approvals_reviewer: forced ? at("preset") : at("approvals_reviewer"),
    },
    normalizations: n.normalizations,
  };
}

/**
 * The Stage 2 resolver: apply exactly one selection source, in the contract's order
 * ("Scope and precedence"):
 *
 * 1. imported session not yet freshly continued: preset off, review off, user approval;
 * 2. explicit frame selection; 3. explicit project selection; 4. explicitly configured
 *    deployment value (an unset deployment value is not an explicit off);
 * 5. legacy `review:auto:<root_frame_id>`: true maps only to `review_only` (never `auto_fix`,
 *    `auto_review` or the preset), false to review off;
 * 6. built-in values.
 *
 * The winning source supplies the whole selection: values it does not state take the built-in
 * values, never a lower source's. Pure.
 *
 * @throws RolloutError `ASP_ROLLOUT_EMPTY_VALUE` / `ASP_ROLLOUT_BAD_BOOLEAN` for a bad legacy
 *   value (always parsed, so a bad one rejects the configuration even when unused);
 *   `ASP_ROLLOUT_INVALID_OPTION` for an empty root frame id or a configuration of the wrong scope.
 */
export function resolveSelection(inputs: SelectionInputs = {}): ResolvedSelection {
  checkScope(inputs.frame, "frame");
  checkScope(inputs.project, "project");
  checkScope(inputs.deployment, "deployment");
  let legacy: { value: boolean; key: string } | undefined;
  if (inputs.legacyReviewAuto !== undefined) {
    const { rootFrameId, value } = inputs.legacyReviewAuto;
    if (rootFrameId.trim() === "") {
      throw rolloutError("ASP_ROLLOUT_INVALID_OPTION", "legacy review:auto needs a root frame id", {
        key: "legacyReviewAuto.rootFrameId",
        source: "options",
      });
    }
    const key = legacyReviewAutoKey(rootFrameId);
    legacy = { value: parseBoolean(value, { key, source: "legacy_review_auto" }), key };
  }

  if (inputs.session?.imported === true && inputs.session.freshContinuation !== true) {
    const quarantine = sourceOf("imported_quarantine");
    return {
      selection: { ...BUILT_IN_SELECTION, source: "imported_quarantine", normalized: false },
      sources: { preset: quarantine, result_review_mode: quarantine, approvals_reviewer: quarantine },
      normalizations: [],
    };
  }
  if (inputs.frame !== undefined && hasExplicitSelection(inputs.frame)) return fromConfig(inputs.frame, "frame");
  if (inputs.project !== undefined && hasExplicitSelection(inputs.project))
    return fromConfig(inputs.project, "project");
  if (inputs.deployment !== undefined && hasExplicitSelection(inputs.deployment)) {
    return fromConfig(inputs.deployment, "deployment");
  }
  if (legacy !== undefined) {
    return {
      selection: {
        ...BUILT_IN_SELECTION,
        result_review_mode: legacy.value ? "review_only" : "off",
        source: "legacy_review_auto",
        normalized: false,
      },
      sources: {
        preset: BUILT_IN,
        result_review_mode: sourceOf("legacy_review_auto", legacy.key),
        approvals_reviewer: BUILT_IN,
      },
      normalizations: [],
    };
  }
  return {
    selection: { ...BUILT_IN_SELECTION, source: "built_in", normalized: false },
    sources: { preset: BUILT_IN, result_review_mode: BUILT_IN, approvals_reviewer: BUILT_IN },
    normalizations: [],
  };
}
