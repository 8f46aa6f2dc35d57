import type { FactLog } from "@asp/evidence";
import { parseAutoModeConfig } from "./config.js";
import { rolloutError } from "./errors.js";

/** The fact kind of a frame's Auto Mode settings (`PATCH /api/v1/frames/{fid}/auto-mode`). */
export const FRAME_SETTINGS_FACT_KIND = "rollout.frame-settings";
/** The fact index under which a frame's settings are found (value: the root frame id). */
export const FRAME_INDEX_NAME = "rollout.frame";

const FRAME_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$/;

/**
 * A frame's Auto Mode settings as stored: the frame-scope configuration (`preset`,
 * `result_review_mode`, `approvals_reviewer`, `budgets`; never `stages`, which only trusted
 * deployment configuration may state), validated as `parseAutoModeConfig(…, "frame")` does.
 */
export interface FrameSettings {
  readonly root_frame_id: string;
  readonly settings: Readonly<Record<string, unknown>>;
}

/** Stored frame settings with the fact that holds them. */
export interface StoredFrameSettings extends FrameSettings {
  readonly seq: number;
  readonly at: string;
}

/**
 * Check a root frame id: 1–256 of `[A-Za-z0-9._:-]`, starting with a letter or digit.
 * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION`.
 */
export function checkFrameId(fid: unknown): string {
  if (typeof fid !== "string" || !FRAME_ID.test(fid)) {
    throw rolloutError(
      "ASP_ROLLOUT_INVALID_OPTION",
      "a root frame id is 1–256 of [A-Za-z0-9._:-], starting with a letter or digit",
      { key: "root_frame_id", source: "options" },
    );
  }
  return fid;
}

/**
 * Apply a JSON merge patch (RFC 7396) to a frame's settings: a key set to `null` is removed, an
 * object merges one level into `budgets`, anything else replaces. The result is validated as a
 * frame-scope configuration before it is returned.
 *
 * @throws RolloutError any code of `parseAutoModeConfig` at frame scope (`stages` included:
 *   `ASP_ROLLOUT_KEY_NOT_ALLOWED`), `ASP_ROLLOUT_BAD_SHAPE` for a patch that is not an object.
 */
export function patchFrameSettings(
  current: Readonly<Record<string, unknown>>,
  patch: unknown,
): Readonly<Record<string, unknown>> {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) {
    throw rolloutError("ASP_ROLLOUT_BAD_SHAPE", "a frame settings patch is a JSON object (RFC 7396 merge patch)", {
      key: "patch",
      source: "frame",
    });
  }
  const out: Record<string, unknown> = structuredClone({ ...current });
  for (const [key, value] of Object.entries(patch as Record<string, unknown>)) {
    if (value === null) {
      delete out[key];
    } else if (key === "budgets" && typeof value === "object" && !Array.isArray(value)) {
      const budgets: Record<string, unknown> = { ...((out.budgets as Record<string, unknown> | undefined) ?? {}) };
      for (const [limit, v] of Object.entries(value as Record<string, unknown>)) {
        if (v === null) delete budgets[limit];
        else budgets[limit] = v;
      }
      if (Object.keys(budgets).length === 0) delete out.budgets;
      else out.budgets = budgets;
    } else {
      out[key] = structuredClone(value);
    }
  }
  parseAutoModeConfig(out, "frame", { origin: "frame settings" });
  return out;
}

/**
 * A frame's Auto Mode settings in the evidence fact log: append-only, the newest fact of a frame
 * is its settings. A run of that frame resolves them at frame scope, under the deployment
 * configuration and the environment, each layer only tightening budgets.
 */
export interface FrameSettingsStore {
  /** The frame's settings, or null when none were ever stored. */
  load(fid: string): Promise<StoredFrameSettings | null>;
  /**
   * Store `settings` as the frame's (validated again here) and return what was stored.
   * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` (a bad frame id) and any code of
   *   `parseAutoModeConfig` at frame scope.
   */
  save(fid: string, settings: Readonly<Record<string, unknown>>): Promise<StoredFrameSettings>;
}

/**
 * The {@link FrameSettingsStore} over a fact log.
 * @example
 * ```ts
 * const frames = createFrameSettingsStore(store.log);
 * await frames.save("f1", patchFrameSettings({}, { preset: "on", budgets: { wall_time_s: 600 } }));
 * ```
 */
export function createFrameSettingsStore(log: FactLog): FrameSettingsStore {
  const load = async (fid: string): Promise<StoredFrameSettings | null> => {
    const [entry] = await log.list({
      index: { name: FRAME_INDEX_NAME, value: checkFrameId(fid) },
      reverse: true,
      limit: 1,
    });
    if (entry === undefined) return null;
    const record = entry.record as unknown as FrameSettings;
    return { root_frame_id: record.root_frame_id, settings: record.settings, seq: entry.seq, at: entry.at };
  };
  return {
    load,
    async save(fid, settings) {
      const id = checkFrameId(fid);
      parseAutoModeConfig(settings, "frame", { origin: "frame settings" });
      const record: FrameSettings = { root_frame_id: id, settings: structuredClone({ ...settings }) };
      await log.append([
        {
          kind: FRAME_SETTINGS_FACT_KIND,
          record: record as unknown as Record<string, unknown>,
          index: [{ name: FRAME_INDEX_NAME, value: id }],
        },
      ]);
      const stored = await load(id);
      if (stored === null) throw new Error("unreachable: appended frame settings not found");
      return stored;
    },
  };
}
