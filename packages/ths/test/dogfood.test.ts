import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ASSURANCE_MODES, validate } from "@asp/contracts";
import { openStore } from "@asp/evidence";
import { describe, expect, it } from "vitest";
import { HEALTH_FACT_KIND, type ProviderHealthRecord } from "../src/health.js";
import { composeHost, dogfoodReport, FACT_KINDS, listReceipts, parseDogfoodLabels } from "../src/index.js";
import { applyRepo, editManifest, replaceIntent } from "./apply-helpers.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

const timings = { initializeTimeoutMs: 3000, shutdownTimeoutMs: 500, restartBackoffMs: 20, restartBackoffMaxMs: 200 };

/**
 * A real level store with real decisions (an honest provider, one that hangs, one that answers
 * stale, one that crashes) at the gate and the sweep, then real applies: one applied, one refused.
 */
async function dogfoodStore() {
  const dir = join(mkdtempSync(join(tmpdir(), "asp-dogfood-")), "store");
  const checks = [
    manifest("fake-honest-ts", { source: "ts" }),
    manifest("fake-hang", { source: "hang" }),
    manifest("fake-stale", { source: "stale" }),
    manifest("fake-crash-start", { source: "crash" }),
  ];
  const repo = tempRepo({
    "src/bad.ts": "export const x = 1; // ASP-TS-ERROR\n",
    "src/noise.ts": "// a comment that quotes ASP-TS-ERROR\n",
    "src/ok.ts": "export const ok = 1;\n",
  });
  const host = await composeHost({
    store: dir,
    policy: policyFor(checks, { timeoutMs: 400 }),
    providers: checks,
    clock: fakeClock,
    timings,
  });
  let gate: string;
  let sweep: string;
  let applied = "none";
  try {
    gate = (await host.gate({ repo })).receipt.receiptId;
    sweep = (await host.evaluate("sweep", { repo })).receipt.receiptId;
  } finally {
    await host.close();
  }
  // The edits: a host of its own on the same store, no required checks (the validation allows).
  const editors = ["edit-one", "edit-two"].map((id) => editManifest("fake-edit-honest", { id }));
  const editHost = await composeHost({
    store: dir,
    policy: policyFor([]),
    providers: editors,
    clock: fakeClock,
    timings,
  });
  try {
    const target = applyRepo();
    const intent = (to: string) => replaceIntent("src/a.ts", "a = 1", `a = ${to}`);
    const p1 = await editHost.propose({ repo: target, provider: "edit-one", intent: intent("2") });
    const p2 = await editHost.propose({ repo: target, provider: "edit-two", intent: intent("3") });
    const [r1, r2] = await editHost.applyMany([p1.proposalId, p2.proposalId], { repo: target });
    expect(r1?.receipt.applied).toBe(true);
    applied = r1?.receipt.transactionGuarantee ?? "none";
    expect(r2?.receipt.rejection?.code).toBe("ASP_APPLY_CONFLICT");
  } finally {
    await editHost.close();
  }
  return { dir, gate, sweep, applied };
}

describe("dogfood report (host §9)", () => {
  it("H9.1 H9.3 H9.4 H9.5 H9.6 H9.7 H9.8 H9.9 H9.10 H9.13 host §9: per-family figures from a real store, exactly", async () => {
    const { dir, gate, sweep, applied } = await dogfoodStore();
    const store = await openStore(dir);
    try {
      const report = await dogfoodReport(store.log, {
        labels: {
          [gate]: "fp",
          "src/bad.ts#ts/marker": "tp",
          "src/noise.ts#ts/marker": "fp",
          "src/missed.ts#ts/marker": "tp",
        },
        now: new Date("2026-01-02T03:04:05.000Z"),
      });
      expect(validate("dogfood-report", report).ok).toBe(true);
      const fam = Object.fromEntries(report.capabilities.map((c) => [c.family, c]));
      expect(Object.keys(fam)).toEqual(["inspect", "check", "edit"]);

      // check: each run had one timeout, one stale answer, one crash.
      const check = fam.check;
      expect(check?.typedFailures).toEqual({ timed_out: 2, stale: 2, crashed: 2 });
      expect(check?.staleRejections).toBe(2);
      expect(check?.degraded.map((d) => `${d.provider}:${d.failClass}`).sort()).toEqual([
        "fake-crash-start:crashed",
        "fake-crash-start:crashed",
        "fake-hang:timed_out",
        "fake-hang:timed_out",
        "fake-stale:stale",
        "fake-stale:stale",
      ]);
      const latency = Object.fromEntries((check?.latency ?? []).map((l) => [l.callSite, l]));
      expect(latency.gate?.timeouts).toBe(1);
      expect(latency.sweep?.timeouts).toBe(1);
      // The honest provider's one complete run per call-site is the only sample: p50 = p95 = it,
      // as its health record (appended with each receipt) measured it: [gate run, sweep run].
      const honest = (await store.log.list({ kind: HEALTH_FACT_KIND }))
        .map((e) => e.record as unknown as ProviderHealthRecord)
        .filter((h) => h.provider.id === "fake-honest-ts")
        .at(-1);
      expect(honest?.latencyMs).toHaveLength(2);
      expect(Object.keys(latency).sort()).toEqual(["gate", "sweep"]);
      expect(latency.gate).toMatchObject({ p50Ms: honest?.latencyMs[0], p95Ms: honest?.latencyMs[0] });
      expect(latency.sweep).toMatchObject({ p50Ms: honest?.latencyMs[1], p95Ms: honest?.latencyMs[1] });
      expect(check?.falsePositives).toEqual([
        { ref: gate, detail: "labelled fp, decided deny at gate" },
        { ref: gate, detail: "src/noise.ts#ts/marker (fake-honest-ts): labelled fp" },
        { ref: sweep, detail: "src/noise.ts#ts/marker (fake-honest-ts): labelled fp" },
      ]);
      const newest = (await listReceipts(store.log, 1))[0]?.receipt.receiptId;
      expect(check?.falseNegatives).toEqual([
        {
          ref: newest,
          detail: "src/missed.ts#ts/marker: labelled tp, reported by no receipt in the window (newest named)",
        },
      ]);

      // edit: one applied, one refused with ASP_APPLY_CONFLICT (nothing written).
      const edit = fam.edit;
      expect(edit?.editConflicts.map((c) => c.kind)).toEqual(["ASP_APPLY_CONFLICT"]);
      expect(edit?.applyOutcomes.no_write).toBe(1);
      // The applied one: its outcome is the guarantee its apply receipt reported.
      expect(edit?.applyOutcomes).toEqual(applied === "none" ? { no_write: 2 } : { no_write: 1, [applied]: 1 });
      expect(edit?.degraded).toEqual([]);
      expect(edit?.latency).toEqual([]);

      // inspect: nothing ran, and nothing of check or edit leaks into it.
      expect(fam.inspect).toMatchObject({ degraded: [], typedFailures: {}, staleRejections: 0, editConflicts: [] });

      // The weakest the host reported: the refused apply guarantees nothing.
      expect(report.assurance.transactionGuarantee).toBe("none");
      // ... and the weakest mode of any decision or apply receipt (a plain-subprocess edit: advisory).
      const decided = (await listReceipts(store.log, 1000)).map((r) => r.receipt.assurance.mode);
      const appliedModes = (await store.log.list({ kind: "ths.apply-receipt" })).map(
        (e) => (e.record as { assuranceMode: (typeof ASSURANCE_MODES)[number] }).assuranceMode,
      );
      expect(appliedModes).toHaveLength(2);
      const weakest = Math.min(...[...decided, ...appliedModes].map((m) => ASSURANCE_MODES.indexOf(m)));
      expect(report.assurance.mode).toBe(ASSURANCE_MODES[weakest]);
    } finally {
      await store.close();
    }
  });

  it("H9.1 host §9: --since leaves older receipts out; an empty window proves no assurance", async () => {
    const { dir } = await dogfoodStore();
    const store = await openStore(dir);
    try {
      const report = await dogfoodReport(store.log, { since: new Date(Date.now() + 3_600_000) });
      for (const c of report.capabilities) {
        expect(c).toMatchObject({
          latency: [],
          degraded: [],
          typedFailures: {},
          staleRejections: 0,
          applyOutcomes: {},
        });
      }
      expect(report.assurance).toEqual({ mode: "advisory", transactionGuarantee: "none" });
    } finally {
      await store.close();
    }
  });

  it("host §9: a stored receipt that does not validate is refused (ASP_THS_BAD_RECEIPT), never skipped", async () => {
    const store = await openStore(join(mkdtempSync(join(tmpdir(), "asp-dogfood-bad-")), "store"));
    try {
      // A record under the receipt kind that claims an allow but is no audit receipt.
      await store.log.append([{ kind: FACT_KINDS.receipt, record: { receiptId: "rcpt-forged", decision: "allow" } }]);
      await expect(dogfoodReport(store.log)).rejects.toThrowWithCode("ASP_THS_BAD_RECEIPT");
      await store.log.append([{ kind: "ths.apply-receipt", record: { applied: true } }]);
      await expect(dogfoodReport(store.log)).rejects.toThrowWithCode("ASP_THS_BAD_RECEIPT");
    } finally {
      await store.close();
    }
  });

  it("a labelled set that is not tp / fp labels is refused with ASP_THS_BAD_LABELS", () => {
    expect(parseDogfoodLabels({ a: "tp", "x.ts#c": "fp" })).toEqual({ a: "tp", "x.ts#c": "fp" });
    for (const bad of [[], null, "tp", { a: "yes" }, { "": "tp" }]) {
      expect(() => parseDogfoodLabels(bad)).toThrowWithCode("ASP_THS_BAD_LABELS");
    }
  });
});
