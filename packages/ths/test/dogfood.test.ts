import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ASSURANCE_MODES, type DogfoodReport, validate } from "@asp/contracts";
import { createMemoryStore, digest, openStore } from "@asp/evidence";
import { beforeAll, describe, expect, it } from "vitest";
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

// issue 32 (clause audit, host §9): a report that names a reference engine must carry parity,
// old-tool compatibility and release evidence; an empty section is said to be `not_measured`,
// never left as an empty list that reads like "no differences".
describe("dogfood report sections and families (issue 32 audit, host §9)", () => {
  let dir: string;
  beforeAll(async () => {
    ({ dir } = await dogfoodStore());
  });
  const withStore = async <T>(run: (log: Awaited<ReturnType<typeof openStore>>["log"]) => Promise<T>): Promise<T> => {
    const store = await openStore(dir);
    try {
      return await run(store.log);
    } finally {
      await store.close();
    }
  };
  const NOW = new Date("2026-01-02T03:04:05.000Z");

  it("H9.2 H9.11 H9.12 without baselines each section is not_measured and names the input it needs", async () => {
    const report = await withStore((log) => dogfoodReport(log, { now: NOW }));
    expect(validate("dogfood-report", report).ok).toBe(true);
    for (const name of ["parity", "compatibility", "releaseEvidence"] as const) {
      expect(report.sections[name].status).toBe("not_measured");
      expect(report.sections[name].needs).toMatch(/baseline/);
      expect(report.sections[name].baselines).toBeUndefined();
    }
    expect(report.sections.parity.needs).toContain("--parity-baseline");
    expect(report.sections.compatibility.needs).toContain("--compat-baseline");
    expect(report.sections.releaseEvidence.needs).toContain("--release-baseline");
    expect(report.compatibility).toEqual([]);
    expect(report.releaseEvidence).toEqual([]);
    for (const c of report.capabilities) expect(c.parityDeltas).toEqual([]);
    expect(report.referenceEngine).toBeUndefined();
  });

  it("H9.2 a reference-engine label without the baselines is refused (ASP_THS_DOGFOOD_BASELINE_MISSING)", async () => {
    const lattice = { name: "lattice", version: "1.0.0" };
    const err = await withStore((log) => dogfoodReport(log, { referenceEngine: lattice }).catch((e: unknown) => e));
    expect(err).toMatchObject({
      code: "ASP_THS_DOGFOOD_BASELINE_MISSING",
      data: { missing: ["parity", "compatibility", "releaseEvidence"] },
    });
    // One missing baseline is enough to refuse.
    const ours = await withStore((log) => dogfoodReport(log, { now: NOW }));
    const partial = await withStore((log) =>
      dogfoodReport(log, {
        referenceEngine: lattice,
        baselines: { parity: [ours], compatibility: { surfaces: [] } },
      }).catch((e: unknown) => e),
    );
    expect(partial).toMatchObject({ code: "ASP_THS_DOGFOOD_BASELINE_MISSING", data: { missing: ["releaseEvidence"] } });
  });

  it("H9.2 H9.11 H9.12 with every baseline: parity deltas per family, declared surfaces, measured release evidence", async () => {
    const ours = await withStore((log) => dogfoodReport(log, { now: NOW }));
    const oursCheck = ours.capabilities.find((c) => c.family === "check");
    // The predecessor's results over the same runs: two more false positives, a slower gate p95.
    const rox: DogfoodReport = {
      ...ours,
      engine: { name: "rox", version: "3.1.0" },
      capabilities: ours.capabilities.map((c) =>
        c.family !== "check"
          ? c
          : {
              ...c,
              falsePositives: [...c.falsePositives, { ref: "rox-1", detail: "x" }, { ref: "rox-2", detail: "y" }],
              latency: c.latency.map((l) => (l.callSite === "gate" ? { ...l, p95Ms: l.p95Ms + 100 } : l)),
            },
      ),
    };
    const surfaces = { surfaces: [{ surface: "check.typescript", status: "native_provider" }] };
    const release = [{ kind: "secret-scan-report", digest: `sha256:${"e".repeat(64)}` }];
    const report = await withStore((log) =>
      dogfoodReport(log, {
        now: NOW,
        referenceEngine: { name: "lattice", version: "1.0.0" },
        baselines: { parity: [rox], compatibility: surfaces, releaseEvidence: release },
      }),
    );
    expect(validate("dogfood-report", report).ok).toBe(true);
    expect(report.referenceEngine).toEqual({ name: "lattice", version: "1.0.0" });
    expect(report.sections.parity).toEqual({
      status: "measured",
      baselines: [{ name: "rox", version: "3.1.0", digest: digest(rox) }],
    });
    const check = report.capabilities.find((c) => c.family === "check");
    const delta = Object.fromEntries((check?.parityDeltas ?? []).map((d) => [d.metric, d]));
    expect(delta.false_positives).toEqual({ baseline: "rox@3.1.0", metric: "false_positives", delta: -2 });
    expect(delta["latency.gate.p95_ms"]?.delta).toBe(-100);
    expect(delta.false_negatives?.delta).toBe(0);
    expect(oursCheck?.latency.length).toBeGreaterThan(0);
    // The inspect family is not served: no parity row pretends it was compared.
    expect(report.capabilities.find((c) => c.family === "inspect")?.parityDeltas).toEqual([]);
    expect(report.sections.compatibility).toEqual({ status: "declared", baselines: [{ digest: digest(surfaces) }] });
    expect(report.compatibility).toEqual(surfaces.surfaces);
    expect(report.sections.releaseEvidence).toEqual({ status: "measured", baselines: [{ digest: digest(release) }] });
    expect(report.releaseEvidence).toEqual(release);
  });

  it("a baseline that is not of its shape is refused with ASP_THS_BAD_BASELINE", async () => {
    const { log } = await createMemoryStore();
    for (const baselines of [
      { parity: [{ engine: "rox" }] },
      { compatibility: { surfaces: [{ surface: "x", status: "fine" }] } },
      { releaseEvidence: [{ kind: "scan", digest: "md5:1" }] },
    ]) {
      await expect(dogfoodReport(log, { baselines })).rejects.toThrowWithCode("ASP_THS_BAD_BASELINE");
    }
  });

  it("H9.4 H9.13 latency per family: check measured, edit not recorded, inspect not served (said, never empty)", async () => {
    const report = await withStore((log) => dogfoodReport(log, { now: NOW }));
    const fam = Object.fromEntries(report.capabilities.map((c) => [c.family, c]));
    expect(fam.check).toMatchObject({ routing: "served", latencyStatus: "measured" });
    expect(fam.edit).toMatchObject({ routing: "served", latencyStatus: "not_recorded", latency: [] });
    expect(fam.edit?.latencyNote).toMatch(/no duration/);
    expect(fam.inspect).toMatchObject({ routing: "not_served", latencyStatus: "not_served", latency: [] });
    expect(fam.inspect?.latencyNote).toMatch(/routes no inspect/);
    // An empty window: no runs, still per family.
    const empty = await dogfoodReport((await createMemoryStore()).log, { now: NOW });
    expect(empty.capabilities.map((c) => [c.family, c.latencyStatus])).toEqual([
      ["inspect", "not_served"],
      ["check", "no_runs"],
      ["edit", "no_runs"],
    ]);
  });
});
