import { createMemoryStore } from "@asp/evidence";
import { describe, expect, it } from "vitest";
import { createFrameSettingsStore, patchFrameSettings, resolveConfiguration } from "../src/index.js";

describe("frame settings (GET/PATCH /api/v1/frames/{fid}/auto-mode)", () => {
  it("stores a frame's settings append-only: the newest fact is the frame's, other frames are untouched", async () => {
    const store = await createMemoryStore();
    const frames = createFrameSettingsStore(store.log);
    expect(await frames.load("f1")).toBeNull();
    const first = await frames.save("f1", { preset: "autonomous" });
    const second = await frames.save("f1", { preset: "on", budgets: { wall_time_s: 600 } });
    await frames.save("f2", { preset: "autonomous" });
    expect(second.seq).toBeGreaterThan(first.seq);
    expect(await frames.load("f1")).toMatchObject({
      root_frame_id: "f1",
      settings: { preset: "on", budgets: { wall_time_s: 600 } },
    });
    expect((await frames.load("f2"))?.settings).toEqual({ preset: "autonomous" });
  });

  it("a merge patch sets, replaces and removes (null) keys, one level into budgets, and validates the result", () => {
    const a = patchFrameSettings({}, { preset: "off", budgets: { wall_time_s: 600, max_review_rounds: 2 } });
    expect(a).toEqual({ preset: "off", budgets: { wall_time_s: 600, max_review_rounds: 2 } });
    expect(patchFrameSettings(a, { budgets: { max_review_rounds: null }, preset: null })).toEqual({
      budgets: { wall_time_s: 600 },
    });
    expect(patchFrameSettings(a, { budgets: { wall_time_s: null, max_review_rounds: null } })).toEqual({
      preset: "off",
    });
  });

  it.each<[string, unknown, string]>([
    [
      "a stage flag (only trusted deployment configuration may turn a stage on)",
      { stages: { stage5_auto_repair: true } },
      "ASP_ROLLOUT_KEY_NOT_ALLOWED",
    ],
    ["an unknown key", { reviewer: "me" }, "ASP_ROLLOUT_UNKNOWN_KEY"],
    ["an unknown preset", { preset: "yolo" }, "ASP_ROLLOUT_UNKNOWN_VALUE"],
    ["a budget that is not a number", { budgets: { wall_time_s: "soon" } }, "ASP_ROLLOUT_BAD_NUMBER"],
    ["a patch that is not an object", ["preset"], "ASP_ROLLOUT_BAD_SHAPE"],
  ])("refuses %s and stores nothing", async (_why, patch, code) => {
    const store = await createMemoryStore();
    const frames = createFrameSettingsStore(store.log);
    expect(() => patchFrameSettings({}, patch)).toThrowWithCode(code);
    await expect(frames.save("f1", patch as Record<string, unknown>)).rejects.toThrow();
    expect(await store.log.head()).toBeNull();
  });

  it("refuses a frame id that is not one", async () => {
    const frames = createFrameSettingsStore((await createMemoryStore()).log);
    for (const fid of ["", "../x", "a b", "x".repeat(300)]) {
      await expect(frames.load(fid)).rejects.toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
      await expect(frames.save(fid, {})).rejects.toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
    }
  });

  it("stored settings resolve at frame scope under the deployment: they tighten budgets, never loosen them", () => {
    const deployment = { budgets: { wall_time_s: 900 } };
    const tight = resolveConfiguration({ env: {}, deployment, frame: { budgets: { wall_time_s: 300 } } });
    expect(tight.budgets.values.wall_time_s).toBe(300);
    expect(() =>
      resolveConfiguration({ env: {}, deployment, frame: { budgets: { wall_time_s: 1800 } } }),
    ).toThrowWithCode("ASP_ROLLOUT_BUDGET_LOOSENED");
  });
});
