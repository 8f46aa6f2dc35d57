import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validate } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { fixtureManifest, hostConfig, runBinary, runInProcess } from "./helpers.js";

/** A store made by real `asp gate` runs: an honest provider, one that goes stale, one that crashes. */
async function gatedStore() {
  const host = hostConfig(
    [
      fixtureManifest("fake-honest-ts", "ts"),
      fixtureManifest("fake-stale", "stale"),
      fixtureManifest("fake-crash-start", "crash"),
    ],
    20_000,
  );
  const repo = mkdtempSync(join(tmpdir(), "asp-cli-dogfood-repo-"));
  writeFileSync(join(repo, "a.ts"), "export const a = 1; // ASP-TS-ERROR\n");
  const receipts: string[] = [];
  for (let i = 0; i < 2; i++) {
    const gate = await runInProcess(["gate", "--json", "--config", host.config, "--repo", repo], { cwd: host.dir });
    expect(gate.code).toBe(EXIT.deny);
    receipts.push((JSON.parse(gate.stdout) as { receipt: { id: string } }).receipt.id);
  }
  return { ...host, receipts };
}

describe("asp dogfood report (host §9)", () => {
  it("H9.1 H9.3 H9.5 H9.6 H9.7 H9.13 host §9: --json gives the schema's report over the gate runs, per family", async () => {
    const { dir, config, receipts } = await gatedStore();
    writeFileSync(join(dir, "labels.json"), JSON.stringify({ [receipts[0] as string]: "fp", "a.ts#ts/marker": "tp" }));
    const r = await runInProcess(["dogfood", "report", "--json", "--config", config, "--labels", "labels.json"], {
      cwd: dir,
    });
    expect(r.code).toBe(EXIT.ok);
    const report = JSON.parse(r.stdout);
    expect(validate("dogfood-report", report).ok).toBe(true);
    const [inspect, check, edit] = report.capabilities;
    expect([inspect.family, check.family, edit.family]).toEqual(["inspect", "check", "edit"]);
    // The crashing provider is quarantined by the second gate (host §8): degraded coverage says so.
    expect(check.typedFailures).toEqual({ stale: 2, crashed: 1, quarantined: 1 });
    expect(check.staleRejections).toBe(2);
    expect(check.degraded).toHaveLength(4);
    expect(check.latency).toHaveLength(1);
    expect(check.latency[0]).toMatchObject({ callSite: "gate", timeouts: 0 });
    expect(check.falsePositives).toEqual([{ ref: receipts[0], detail: "labelled fp, decided deny at gate" }]);
    expect(check.falseNegatives).toEqual([]);
    expect(edit).toMatchObject({ editConflicts: [], applyOutcomes: {}, degraded: [] });
    expect(inspect).toMatchObject({ degraded: [], typedFailures: {}, staleRejections: 0 });

    // --since after the runs: nothing in the window.
    const later = await runInProcess(
      ["dogfood", "report", "--json", "--config", config, "--since", new Date(Date.now() + 3_600_000).toISOString()],
      { cwd: dir },
    );
    expect(JSON.parse(later.stdout).capabilities[1]).toMatchObject({ degraded: [], latency: [] });

    // Human output: one table per family, never one pass/fail label.
    const human = await runInProcess(["dogfood", "report", "--config", config], { cwd: dir });
    expect(human.code).toBe(EXIT.ok);
    expect(human.stdout.match(/^== (\w+)$/gm)).toEqual(["== inspect", "== check", "== edit"]);
  });

  it("refuses a bad --since or --labels with exit 64 (ASP_CLI_USAGE, ASP_THS_BAD_LABELS)", async () => {
    const { dir, config } = hostConfig([]);
    writeFileSync(join(dir, "bad.json"), JSON.stringify({ x: "maybe" }));
    const bad = await runInProcess(["dogfood", "report", "--json", "--config", config, "--labels", "bad.json"], {
      cwd: dir,
    });
    expect(bad.code).toBe(EXIT.usage);
    expect(JSON.parse(bad.stdout || bad.stderr)).toMatchObject({ error: { code: "ASP_THS_BAD_LABELS" } });
    const since = await runInProcess(["dogfood", "report", "--config", config, "--since", "yesterday"], { cwd: dir });
    expect(since.code).toBe(EXIT.usage);
  });
});

// issue 32 (clause audit, host §9): parity, compatibility and release evidence are marked
// not_measured unless their baselines are given; a reference-engine label without them is
// refused with a next step that runs as printed; latency is given per family, and the inspect
// family (which this host does not route) says "not served" instead of an empty table.
describe("asp dogfood report sections (issue 32 audit, host §9)", () => {
  it("H9.2 H9.11 H9.12 H9.4 without baselines: each section not_measured (JSON and human), latency per family", async () => {
    const { dir, config } = await gatedStore();
    const r = await runInProcess(["dogfood", "report", "--json", "--config", config], { cwd: dir });
    expect(r.code).toBe(EXIT.ok);
    const report = JSON.parse(r.stdout);
    expect(validate("dogfood-report", report).ok).toBe(true);
    expect(report.sections).toEqual({
      parity: { status: "not_measured", needs: expect.stringContaining("--parity-baseline") },
      compatibility: { status: "not_measured", needs: expect.stringContaining("--compat-baseline") },
      releaseEvidence: { status: "not_measured", needs: expect.stringContaining("--release-baseline") },
    });
    expect(
      report.capabilities.map((c: { family: string; routing: string; latencyStatus: string }) => [
        c.family,
        c.routing,
        c.latencyStatus,
      ]),
    ).toEqual([
      ["inspect", "not_served", "not_served"],
      ["check", "served", "measured"],
      ["edit", "served", "no_runs"],
    ]);

    const human = await runInProcess(["dogfood", "report", "--config", config], { cwd: dir });
    expect(human.code).toBe(EXIT.ok);
    expect(human.stdout).toMatch(/^parity deltas: not_measured \(needs .*--parity-baseline/m);
    expect(human.stdout).toMatch(/^old-tool compatibility: not_measured \(needs .*--compat-baseline/m);
    expect(human.stdout).toMatch(/^release evidence: not_measured \(needs .*--release-baseline/m);
    expect(human.stdout).toMatch(/^== inspect\n {2}not served: this host routes no inspect request/m);
    expect(human.stdout).toMatch(/^== edit\n {2}latency: no runs$/m);
  });

  it("H9.2 --engine without the baselines exits 64 with ASP_THS_DOGFOOD_BASELINE_MISSING; its next step runs as printed", async () => {
    const { dir, config } = await gatedStore();
    const r = await runInProcess(["dogfood", "report", "--json", "--config", config, "--engine", "lattice@1.2.0"], {
      cwd: dir,
    });
    expect(r.code).toBe(EXIT.usage);
    const { error } = JSON.parse(r.stdout);
    expect(error).toMatchObject({
      code: "ASP_THS_DOGFOOD_BASELINE_MISSING",
      data: { missing: ["parity", "compatibility", "releaseEvidence"] },
    });
    const next = String(error.data.nextStep).split(" ");
    expect(next.slice(0, 3)).toEqual(["asp", "dogfood", "report"]);
    // Run as printed, by the built binary: the same report of the host's own runs.
    const ran = runBinary(next.slice(1), dir);
    expect(ran.code, ran.stderr).toBe(EXIT.ok);
    expect(ran.stdout).toContain("parity deltas: not_measured");
    // The human form says the same code and the same step.
    const human = await runInProcess(["dogfood", "report", "--config", config, "--engine", "lattice@1.2.0"], {
      cwd: dir,
    });
    expect(human.code).toBe(EXIT.usage);
    expect(human.stderr).toContain("ASP_THS_DOGFOOD_BASELINE_MISSING");
    expect(human.stderr).toContain(`next: ${error.data.nextStep}`);
  });

  it("H9.2 H9.11 H9.12 with every baseline: parity measured against the reference, surfaces declared, artifacts hashed", async () => {
    const { dir, config } = await gatedStore();
    const ours = JSON.parse(
      (await runInProcess(["dogfood", "report", "--json", "--config", config], { cwd: dir })).stdout,
    );
    // The predecessor's figures over the same runs: one fewer stale rejection in check.
    const rox = {
      ...ours,
      engine: { name: "rox", version: "3.1.0" },
      capabilities: ours.capabilities.map((c: { family: string; staleRejections: number }) =>
        c.family === "check" ? { ...c, staleRejections: c.staleRejections - 1 } : c,
      ),
    };
    writeFileSync(join(dir, "rox.json"), JSON.stringify(rox));
    writeFileSync(
      join(dir, "compat.json"),
      JSON.stringify({ surfaces: [{ surface: "check.typescript", status: "native_provider" }] }),
    );
    writeFileSync(join(dir, "scan.txt"), "no secrets\n");
    writeFileSync(
      join(dir, "release.json"),
      JSON.stringify({ artifacts: [{ kind: "secret-scan-report", path: "scan.txt" }] }),
    );
    const args = ["--engine", "lattice@1.2.0", "--parity-baseline", "rox.json", "--compat-baseline", "compat.json"];
    const r = await runInProcess(
      ["dogfood", "report", "--json", "--config", config, ...args, "--release-baseline", "release.json"],
      { cwd: dir },
    );
    expect(r.code, r.stdout).toBe(EXIT.ok);
    const report = JSON.parse(r.stdout);
    expect(validate("dogfood-report", report).ok).toBe(true);
    expect(report.referenceEngine).toEqual({ name: "lattice", version: "1.2.0" });
    expect(report.sections.parity).toMatchObject({
      status: "measured",
      baselines: [{ name: "rox", version: "3.1.0" }],
    });
    expect(report.sections.compatibility.status).toBe("declared");
    expect(report.sections.releaseEvidence.status).toBe("measured");
    const check = report.capabilities[1];
    expect(check.parityDeltas).toContainEqual({ baseline: "rox@3.1.0", metric: "stale_rejections", delta: 1 });
    expect(report.compatibility).toEqual([{ surface: "check.typescript", status: "native_provider" }]);
    const sha = createHash("sha256").update("no secrets\n").digest("hex");
    expect(report.releaseEvidence).toEqual([{ kind: "secret-scan-report", digest: `sha256:${sha}` }]);

    const human = await runInProcess(
      ["dogfood", "report", "--config", config, ...args, "--release-baseline", "release.json"],
      {
        cwd: dir,
      },
    );
    expect(human.stdout).toMatch(/^parity deltas: measured from rox@3\.1\.0 sha256:/m);
    expect(human.stdout).toContain("parity vs rox@3.1.0: stale_rejections +1");
  });

  it("a baseline that is not of its shape exits 64 (ASP_THS_BAD_BASELINE)", async () => {
    const { dir, config } = hostConfig([]);
    writeFileSync(join(dir, "bad.json"), JSON.stringify({ surfaces: [{ surface: "x", status: "fine" }] }));
    const r = await runInProcess(["dogfood", "report", "--json", "--config", config, "--compat-baseline", "bad.json"], {
      cwd: dir,
    });
    expect(r.code).toBe(EXIT.usage);
    expect(JSON.parse(r.stdout)).toMatchObject({ error: { code: "ASP_THS_BAD_BASELINE" } });
  });
});
