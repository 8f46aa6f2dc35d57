import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validate } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { fixtureManifest, hostConfig, runInProcess } from "./helpers.js";

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
