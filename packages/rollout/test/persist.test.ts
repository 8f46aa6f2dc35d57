import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunIdentity } from "@asp/contracts";
import { createMemoryStore, openStore, type Store } from "@asp/evidence";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  createSelectionStore,
  createStageFlags,
  isPersistedSelection,
  RUN_INDEX_NAME,
  resolveConfiguration,
  runKey,
  SELECTION_FACT_KIND,
} from "../src/index.js";

const RUN: RunIdentity = { root_frame_id: "f1", branch_id: "b1", turn_id: "t1", execution_id: "e1" };
const STAGE2 = { OPENAI4S_STAGE2_AUTO_RUN_STORAGE: "1" };
const stores: Store[] = [];
const dirs: string[] = [];

async function memory(): Promise<Store> {
  const s = await createMemoryStore();
  stores.push(s);
  return s;
}

afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("SelectionStore", () => {
  describe("when stage 2 is off", () => {
    // contract: Stage 2 consumes only stage2_auto_run_storage; flag-off behaviour is unchanged.
    it("AM.modes.4 AM.stage2.1 refuses to persist", async () => {
      const store = await memory();
      const config = resolveConfiguration();
      const selections = createSelectionStore({ log: store.log, flags: config.flags });
      await expect(selections.persist(RUN, config)).rejects.toThrowWithCode("ASP_ROLLOUT_STAGE_DISABLED");
      expect(await store.log.head()).toBeNull();
    });

    it("resolves every time and writes nothing from resolveOnce", async () => {
      const store = await memory();
      const config = resolveConfiguration({ deployment: { result_review_mode: "review_only" } });
      const selections = createSelectionStore({ log: store.log, flags: config.flags });
      const resolve = vi.fn(() => config);
      const a = await selections.resolveOnce(RUN, resolve);
      const b = await selections.resolveOnce(RUN, resolve);
      expect(resolve).toHaveBeenCalledTimes(2);
      expect(a).toMatchObject({ reopened: false, stored: null, selection: { result_review_mode: "review_only" } });
      expect(b.reopened).toBe(false);
      expect(await store.log.head()).toBeNull();
    });
  });

  describe("when stage 2 is on", () => {
    it("AM.select.5 AM.stage2.1 persists the selection and budget set as one fact keyed by the run", async () => {
      const store = await memory();
      const config = resolveConfiguration({
        env: { ...STAGE2, OPENAI4S_AUTO_WALL_TIME_S: "300" },
        frame: { preset: "on" },
      });
      const selections = createSelectionStore({ log: store.log, flags: config.flags });
      const stored = await selections.persist(RUN, config);
      expect(stored.seq).toBe(1);
      expect(isPersistedSelection(stored.record)).toBe(true);
      expect(stored.record.selection).toEqual(config.selection.selection);
      expect(stored.record.budgets.wall_time_s).toBe(300);
      expect(stored.record.provenance.budgets.wall_time_s).toEqual({
        kind: "env",
        key: "OPENAI4S_AUTO_WALL_TIME_S",
        origin: null,
      });
      const [entry] = await store.log.list({ kind: SELECTION_FACT_KIND });
      expect(entry?.index).toEqual([{ name: RUN_INDEX_NAME, value: runKey(RUN) }]);
      expect(await selections.load(RUN)).toEqual(stored);
    });

    it("is idempotent for the same selection and budgets", async () => {
      const store = await memory();
      const config = resolveConfiguration({ env: STAGE2 });
      const selections = createSelectionStore({ log: store.log, flags: config.flags });
      const first = await selections.persist(RUN, config);
      // Same values from a different source: still the same configuration for the run.
      const again = await selections.persist(
        RUN,
        resolveConfiguration({ env: { OPENAI4S_STAGE2_AUTO_RUN_STORAGE: "yes" } }),
      );
      expect(again).toEqual(first);
      expect((await store.log.head())?.seq).toBe(1);
    });

    it("refuses a second, different selection for the same run", async () => {
      const store = await memory();
      const config = resolveConfiguration({ env: STAGE2 });
      const selections = createSelectionStore({ log: store.log, flags: config.flags });
      await selections.persist(RUN, config);
      const other = resolveConfiguration({ env: STAGE2, project: { result_review_mode: "auto_fix" } });
      await expect(selections.persist(RUN, other)).rejects.toThrowWithCode("ASP_ROLLOUT_SELECTION_CONFLICT");
      const tighter = resolveConfiguration({ env: { ...STAGE2, OPENAI4S_AUTO_MAX_EXTRA_CELLS: "3" } });
      await expect(selections.persist(RUN, tighter)).rejects.toThrowWithCode("ASP_ROLLOUT_SELECTION_CONFLICT");
      expect((await store.log.head())?.seq).toBe(1);
    });

    it("AM.states.1 keeps runs apart", async () => {
      const store = await memory();
      const config = resolveConfiguration({ env: STAGE2 });
      const selections = createSelectionStore({ log: store.log, flags: config.flags });
      await selections.persist(RUN, config);
      const other = resolveConfiguration({ env: STAGE2, frame: { preset: "on" } });
      const second = await selections.persist({ ...RUN, execution_id: "e2" }, other);
      expect(second.record.selection.preset).toBe("on");
      expect((await selections.load(RUN))?.record.selection.preset).toBe("off");
    });

    it("lets exactly one of two concurrent, different persists win", async () => {
      const store = await memory();
      const a = resolveConfiguration({ env: STAGE2 });
      const b = resolveConfiguration({ env: STAGE2, frame: { preset: "on" } });
      const selections = createSelectionStore({ log: store.log, flags: a.flags });
      const results = await Promise.allSettled([selections.persist(RUN, a), selections.persist(RUN, b)]);
      expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    });

    it("takes the first fact when a racing writer appended a second one", async () => {
      const store = await memory();
      const config = resolveConfiguration({ env: STAGE2 });
      const one = createSelectionStore({ log: store.log, flags: config.flags });
      const first = await one.persist(RUN, config);
      const forged = { ...first.record, selection: { ...first.record.selection, result_review_mode: "auto_fix" } };
      await store.log.append([
        { kind: SELECTION_FACT_KIND, record: forged, index: [{ name: RUN_INDEX_NAME, value: runKey(RUN) }] },
      ]);
      expect((await one.load(RUN))?.record.selection.result_review_mode).toBe("off");
    });
  });

  describe("when the run is reopened", () => {
    // issue 8.5 / contract "Reopen": a reopen never re-resolves differently; no budget replenishes on reopen.
    it("AM.select.5 reads the persisted selection back from a level store without calling resolve, even if config changed", async () => {
      const dir = mkdtempSync(join(tmpdir(), "asp-rollout-"));
      dirs.push(dir);
      const before = resolveConfiguration({
        env: { ...STAGE2, OPENAI4S_AUTO_MAX_REPAIR_ROUNDS: "1" },
        frame: { preset: "on" },
      });
      const s1 = await openStore(dir);
      const first = await createSelectionStore({ log: s1.log, flags: before.flags }).resolveOnce(RUN, () => before);
      expect(first.reopened).toBe(false);
      await s1.close();

      const after = resolveConfiguration({ env: STAGE2 }); // the frame preset and the tightening are gone now
      const s2 = await openStore(dir);
      stores.push(s2);
      const resolve = vi.fn(() => after);
      const reopened = await createSelectionStore({ log: s2.log, flags: after.flags }).resolveOnce(RUN, resolve);
      expect(resolve).not.toHaveBeenCalled();
      expect(reopened).toMatchObject({ reopened: true, selection: first.selection, budgets: first.budgets });
      expect(reopened.budgets.max_repair_rounds).toBe(1);
      expect(reopened.selection.preset).toBe("on");
    });
  });

  describe("when the stored record does not validate", () => {
    it("fails closed with ASP_ROLLOUT_CORRUPT_RECORD", async () => {
      const store = await memory();
      await store.log.append([
        {
          kind: SELECTION_FACT_KIND,
          record: {
            $$type: "@asp/PersistedSelection",
            version: 1,
            run: RUN,
            selection: { preset: "max" },
            budgets: {},
          },
          index: [{ name: RUN_INDEX_NAME, value: runKey(RUN) }],
        },
      ]);
      const selections = createSelectionStore({ log: store.log, flags: createStageFlags(["stage2_auto_run_storage"]) });
      await expect(selections.load(RUN)).rejects.toThrowWithCode("ASP_ROLLOUT_CORRUPT_RECORD");
      await expect(selections.resolveOnce(RUN, () => resolveConfiguration())).rejects.toThrowWithCode(
        "ASP_ROLLOUT_CORRUPT_RECORD",
      );
    });
  });

  describe("when the run identity is malformed", () => {
    it.each([
      [{ ...RUN, turn_id: "" }],
      [{ root_frame_id: "f1", branch_id: "b1", turn_id: "t1" }],
      [{ ...RUN, extra: "x" }],
      [null],
    ])("refuses %j", async (run) => {
      const store = await memory();
      const config = resolveConfiguration({ env: STAGE2 });
      const selections = createSelectionStore({ log: store.log, flags: config.flags });
      await expect(selections.persist(run as RunIdentity, config)).rejects.toThrowWithCode(
        "ASP_ROLLOUT_INVALID_OPTION",
      );
      await expect(selections.load(run as RunIdentity)).rejects.toThrowWithCode("ASP_ROLLOUT_INVALID_OPTION");
    });
  });
});
