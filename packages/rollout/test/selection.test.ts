import {
  APPROVALS_REVIEWERS,
  AUTO_MODE_PRESETS,
  RESULT_REVIEW_MODES,
  type SelectionSource,
  validate,
} from "@asp/contracts";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type AutoModeSelection,
  legacyReviewAutoKey,
  normalizeSelection,
  type ParsedAutoModeConfig,
  parseAutoModeConfig,
  resolveSelection,
  type SelectionInputs,
} from "../src/index.js";
import { runStartedEvent } from "./helpers.js";

type Triple = Pick<AutoModeSelection, "preset" | "result_review_mode" | "approvals_reviewer">;

// Each source states a distinguishable selection, so the result shows which one won.
const FRAME = parseAutoModeConfig({ approvals_reviewer: "auto_review" }, "frame");
const PROJECT = parseAutoModeConfig({ result_review_mode: "auto_fix" }, "project");
const DEPLOYMENT_OFF = parseAutoModeConfig({ result_review_mode: "off" }, "deployment");
const DEPLOYMENT_ON = parseAutoModeConfig({ preset: "on" }, "deployment");
// States budgets and stages but no selection value: an unset deployment selection.
const DEPLOYMENT_UNSET = parseAutoModeConfig(
  { stages: { stage2_auto_run_storage: true }, budgets: { wall_time_s: 60 } },
  "deployment",
);
const FRAME_UNSET = parseAutoModeConfig({ budgets: { wall_time_s: 30 } }, "frame");
const PROJECT_UNSET = parseAutoModeConfig({ budgets: { wall_time_s: 45 } }, "project");

const SESSIONS = [
  ["no session flag", undefined],
  ["imported", { imported: true }],
  ["imported, freshly continued", { imported: true, freshContinuation: true }],
] as const;
const FRAMES = [
  ["no frame", undefined],
  ["frame unset", FRAME_UNSET],
  ["frame explicit", FRAME],
] as const;
const PROJECTS = [
  ["no project", undefined],
  ["project unset", PROJECT_UNSET],
  ["project explicit", PROJECT],
] as const;
const DEPLOYMENTS = [
  ["no deployment", undefined],
  ["deployment unset", DEPLOYMENT_UNSET],
  ["deployment explicit off", DEPLOYMENT_OFF],
  ["deployment explicit on", DEPLOYMENT_ON],
] as const;
const LEGACIES = [
  ["no legacy", undefined],
  ["legacy true", { rootFrameId: "f1", value: "true" }],
  ["legacy false", { rootFrameId: "f1", value: false }],
] as const;

/** The contract's order, written as the test's oracle: the first present source wins. */
function expected(
  session: (typeof SESSIONS)[number][1],
  frame: ParsedAutoModeConfig | undefined,
  project: ParsedAutoModeConfig | undefined,
  deployment: ParsedAutoModeConfig | undefined,
  legacy: (typeof LEGACIES)[number][1],
): [SelectionSource, Triple] {
  const builtIn: Triple = { preset: "off", result_review_mode: "off", approvals_reviewer: "user" };
  if (session?.imported === true && !("freshContinuation" in session)) return ["imported_quarantine", builtIn];
  if (frame === FRAME) return ["frame", { ...builtIn, approvals_reviewer: "auto_review" }];
  if (project === PROJECT) return ["project", { ...builtIn, result_review_mode: "auto_fix" }];
  if (deployment === DEPLOYMENT_OFF) return ["deployment", builtIn];
  if (deployment === DEPLOYMENT_ON) {
    return ["deployment", { preset: "on", result_review_mode: "auto_fix", approvals_reviewer: "auto_review" }];
  }
  if (legacy !== undefined) {
    return ["legacy_review_auto", { ...builtIn, result_review_mode: legacy.value === "true" ? "review_only" : "off" }];
  }
  return ["built_in", builtIn];
}

const COMBINATIONS = SESSIONS.flatMap((s) =>
  FRAMES.flatMap((f) =>
    PROJECTS.flatMap((p) =>
      DEPLOYMENTS.flatMap((d) =>
        LEGACIES.map((l) => [`${s[0]} / ${f[0]} / ${p[0]} / ${d[0]} / ${l[0]}`, s, f, p, d, l] as const),
      ),
    ),
  ),
);

function inputs(
  session: (typeof SESSIONS)[number][1],
  frame: ParsedAutoModeConfig | undefined,
  project: ParsedAutoModeConfig | undefined,
  deployment: ParsedAutoModeConfig | undefined,
  legacy: (typeof LEGACIES)[number][1],
): SelectionInputs {
  return {
    ...(session === undefined ? {} : { session }),
    ...(frame === undefined ? {} : { frame }),
    ...(project === undefined ? {} : { project }),
    ...(deployment === undefined ? {} : { deployment }),
    ...(legacy === undefined ? {} : { legacyReviewAuto: legacy }),
  };
}

describe("resolveSelection", () => {
  describe("AM.select.2 when sources are combined", () => {
    // contract "Scope and precedence": the Stage 2 resolver applies one selection source, in order
    // imported > frame > project > explicit deployment > legacy > built-in.
    it.each(COMBINATIONS)("%s", (_name, [, s], [, f], [, p], [, d], [, l]) => {
      const [source, triple] = expected(s, f, p, d, l);
      const resolved = resolveSelection(inputs(s, f, p, d, l));
      expect(resolved.selection).toEqual({ ...triple, source, normalized: false });
      expect(validate("event-auto-run-started", runStartedEvent(resolved.selection)).ok).toBe(true);
    });

    it("covers every combination of the five sources", () => {
      expect(COMBINATIONS).toHaveLength(3 * 3 * 3 * 4 * 3);
    });
  });

  describe("when the deployment value is unset rather than explicitly off", () => {
    // contract: an unset deployment value is not an explicit off; it must not erase a legacy preference.
    it("AM.select.3 lets the legacy boolean apply when the deployment states no selection", () => {
      const r = resolveSelection({
        deployment: DEPLOYMENT_UNSET,
        legacyReviewAuto: { rootFrameId: "f1", value: true },
      });
      expect(r.selection).toMatchObject({ source: "legacy_review_auto", result_review_mode: "review_only" });
      expect(r.sources.result_review_mode).toEqual({ kind: "legacy_review_auto", key: "review:auto:f1", origin: null });
    });

    it("AM.select.3 lets an explicit deployment off override the legacy boolean", () => {
      const r = resolveSelection({ deployment: DEPLOYMENT_OFF, legacyReviewAuto: { rootFrameId: "f1", value: true } });
      expect(r.selection).toMatchObject({ source: "deployment", result_review_mode: "off" });
    });
  });

  describe("when only the legacy boolean is set", () => {
    // contract: legacy maps to review_only and can never select auto_fix, auto_review or the preset.
    it("AM.select.4 never selects auto_fix, auto_review or the preset, for any accepted spelling (property)", () => {
      fc.assert(
        fc.property(
          fc.constantFrom<boolean | string>(true, false, "1", "0", "true", "false", "on", "off", "yes", "no"),
          (value) => {
            const { selection } = resolveSelection({ legacyReviewAuto: { rootFrameId: "root", value } });
            expect(selection.preset).toBe("off");
            expect(selection.approvals_reviewer).toBe("user");
            expect(["off", "review_only"]).toContain(selection.result_review_mode);
            expect(selection.source).toBe("legacy_review_auto");
          },
        ),
      );
    });

    it.each([
      ["", "ASP_ROLLOUT_EMPTY_VALUE"],
      ["maybe", "ASP_ROLLOUT_BAD_BOOLEAN"],
    ])("rejects the legacy value %j with %s even when a higher source wins", (value, code) => {
      expect(() => resolveSelection({ frame: FRAME, legacyReviewAuto: { rootFrameId: "f1", value } })).toThrowWithCode(
        code,
      );
    });

    it("names the legacy settings key", () => {
      expect(legacyReviewAutoKey("abc")).toBe("review:auto:abc");
      expect(() => resolveSelection({ legacyReviewAuto: { rootFrameId: " ", value: true } })).toThrowWithCode(
        "ASP_ROLLOUT_INVALID_OPTION",
      );
    });
  });

  describe("when the session is imported", () => {
    // contract: an imported/quarantined session forces preset off, review off, user approval.
    it("AM.select.1 forces everything off even over a frame preset on", () => {
      const frameOn = parseAutoModeConfig({ preset: "autonomous" }, "frame");
      const r = resolveSelection({ session: { imported: true }, frame: frameOn });
      expect(r.selection).toEqual({
        preset: "off",
        result_review_mode: "off",
        approvals_reviewer: "user",
        source: "imported_quarantine",
        normalized: false,
      });
      expect(r.sources.preset.kind).toBe("imported_quarantine");
    });

    it("AM.select.1 applies the frame again after a fresh continuation", () => {
      const frameOn = parseAutoModeConfig({ preset: "autonomous" }, "frame");
      const r = resolveSelection({ session: { imported: true, freshContinuation: true }, frame: frameOn });
      // AM.modes.2: autonomous is the same preset as on, and is stored normalized to on.
      expect(r.selection).toMatchObject({ source: "frame", preset: "on", result_review_mode: "auto_fix" });
    });
  });

  describe("when the winning source states only some values", () => {
    it("AM.select.2 takes built-in values for the rest, never a lower source's", () => {
      const r = resolveSelection({ frame: FRAME, project: PROJECT });
      expect(r.selection).toMatchObject({
        source: "frame",
        result_review_mode: "off",
        approvals_reviewer: "auto_review",
      });
      expect(r.sources.result_review_mode.kind).toBe("built_in");
      expect(r.sources.approvals_reviewer).toEqual({ kind: "frame", key: "approvals_reviewer", origin: null });
    });
  });

  describe("when a configuration of the wrong scope is passed", () => {
    it("refuses it", () => {
      expect(() => resolveSelection({ frame: PROJECT })).toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
    });
  });
});

describe("AM.modes.2 normalizeSelection", () => {
  const absent = undefined;
  const rows = AUTO_MODE_PRESETS.flatMap((preset) =>
    [absent, ...RESULT_REVIEW_MODES].flatMap((mode) =>
      [absent, ...APPROVALS_REVIEWERS].map((reviewer) => [preset, mode, reviewer] as const),
    ),
  );

  // contract "Product modes": preset on normalizes to auto_fix + auto_review (contradictions are
  // normalized and reported); preset off leaves the two sub-modes independently selectable.
  it.each(rows)("preset %s, result_review_mode %s, approvals_reviewer %s", (preset, mode, reviewer) => {
    const n = normalizeSelection({ preset, result_review_mode: mode, approvals_reviewer: reviewer });
    if (preset === "off") {
      expect(n).toEqual({
        preset: "off",
        result_review_mode: mode ?? "off",
        approvals_reviewer: reviewer ?? "user",
        normalizations: [],
      });
      return;
    }
    // autonomous is stored as on (the contract's "on/autonomous" is one preset).
    expect(n.preset).toBe(preset === "autonomous" ? "on" : preset);
    expect(n.result_review_mode).toBe("auto_fix");
    expect(n.approvals_reviewer).toBe("auto_review");
    const reported = [
      ...(mode !== undefined && mode !== "auto_fix" ? [{ key: "result_review_mode", from: mode, to: "auto_fix" }] : []),
      ...(reviewer !== undefined && reviewer !== "auto_review"
        ? [{ key: "approvals_reviewer", from: reviewer, to: "auto_review" }]
        : []),
    ];
    expect(n.normalizations).toEqual(reported);
  });

  it("covers every preset x sub-mode combination", () => {
    expect(rows).toHaveLength(3 * 4 * 3);
  });

  describe("when a contradictory explicit sub-mode is normalized by resolution", () => {
    it("marks the selection normalized and attributes the forced values to the preset", () => {
      const project = parseAutoModeConfig({ preset: "on", result_review_mode: "review_only" }, "project", {
        origin: "project.json",
      });
      const r = resolveSelection({ project });
      expect(r.selection).toEqual({
        preset: "on",
        result_review_mode: "auto_fix",
        approvals_reviewer: "auto_review",
        source: "project",
        normalized: true,
      });
      expect(r.normalizations).toEqual([{ key: "result_review_mode", from: "review_only", to: "auto_fix" }]);
      expect(r.sources.result_review_mode).toEqual({ kind: "project", key: "preset", origin: "project.json" });
    });
  });
});
