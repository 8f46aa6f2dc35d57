import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startPostgres } from "@asp/test-utils";
import { afterAll, describe, expect, it } from "vitest";
import type { Ratio } from "../src/measure.js";
import { headline, mergeResults, readResults, resultsTable, suiteResult } from "../src/results.js";
import type { Suite } from "../src/suite.js";
import decideSuite from "../src/suites/decide.js";
import environmentSuite, { dependencyRoots } from "../src/suites/environment.js";
import gateTscSuite from "../src/suites/gate-tsc.js";
import secretsSuite from "../src/suites/secrets.js";
import storePgSuite from "../src/suites/store-pg.js";
import sweepQueueSuite, { PG_URL_ENV } from "../src/suites/sweep-queue.js";
import warmGateSuite from "../src/suites/warm-gate.js";

// Each suite on its tiny "smoke" size: every step still runs (the whole-process gate, the host's
// decide path, the environment snapshot, and each baseline), so a suite cannot rot unnoticed.
// Never a timing assertion: only the shape of the figures and that both sides ran.

async function smoke(suite: Suite): Promise<Ratio[]> {
  const rows: Ratio[] = [];
  await suite.run({ size: "smoke", progress: () => {}, report: (r) => rows.push(r) });
  return rows;
}

function expectFigure(r: Ratio): void {
  expect(r.name).toEqual(expect.any(String));
  expect(r.baselineName).toEqual(expect.any(String));
  // Both sides ran: a measured, positive median each, and a finite ratio of them.
  expect(r.baselineMedianMs).toBeGreaterThan(0);
  expect(r.subjectMedianMs).toBeGreaterThan(0);
  expect(Number.isFinite(r.ratio)).toBe(true);
  expect(r.rounds).toBeGreaterThanOrEqual(1);
}

describe("bench suites, smoke size", () => {
  it("secrets: asp gate with the secrets provider alone next to gitleaks and to grep -P over the same files", async () => {
    const rows = await smoke(secretsSuite);
    expect(rows).toHaveLength(2);
    for (const r of rows) expectFigure(r);
    expect(rows[0]?.baselineName).toMatch(/^gitleaks 8\.28\.0 dir/);
    expect(rows[0]?.target).toBe(1);
    expect(rows[0]?.headline).toBe(true);
    expect(rows[1]?.baselineName).toMatch(/^grep -P/);
    expect(rows[1]?.target).toBeNull();
  }, 120_000);

  it("gate-tsc: asp gate (one-file change) and asp sweep (new store) as whole processes next to tsc --noEmit", async () => {
    const rows = await smoke(gateTscSuite);
    expect(rows).toHaveLength(2);
    for (const r of rows) expectFigure(r);
    expect(rows[0]?.headline).toBe(true);
    expect(rows[0]?.target).toBe(0.3);
    expect(rows[1]?.name).toMatch(/^asp sweep/);
    expect(rows[1]?.target).toBe(1.2);
    for (const r of rows) expect(r.baselineName).toContain("tsc --noEmit");
  }, 300_000);

  it("warm-gate: a gate through a running asp serve --http next to tsc cold and tsc --incremental, and 8 gates together next to one", async () => {
    const rows = await smoke(warmGateSuite);
    expect(rows).toHaveLength(3);
    for (const r of rows) expectFigure(r);
    expect(rows[0]?.headline).toBe(true);
    expect(rows.map((r) => r.target)).toEqual([0.05, 1, 2]);
    expect(rows[0]?.baselineName).toContain("tsc --noEmit -p");
    expect(rows[1]?.baselineName).toContain("tsc --incremental");
    expect(rows[2]?.name).toMatch(/^8 warm gates/);
  }, 300_000);

  it("decide: one cell per provider count, each with the host's decision and memory", async () => {
    const rows = await smoke(decideSuite);
    expect(rows.map((r) => r.details?.providers)).toEqual([1, 2]);
    for (const r of rows) {
      expectFigure(r);
      expect(r.details).toMatchObject({
        diagnostics: 100,
        decision: expect.stringMatching(/^(allow|deny|indeterminate)$/),
        subjectHeapMb: expect.any(Number),
        baselineHeapMb: expect.any(Number),
      });
      // The smoke world has errors in it, and a granted provider's error gates: the host really decided.
      expect(r.details?.decision).toBe("deny");
      expect(Number(r.details?.findings)).toBeGreaterThan(0);
    }
  }, 120_000);

  it("environment: cold and warm snapshots of the node_modules roots next to git status", async () => {
    const rows = await smoke(environmentSuite);
    expect(rows).toHaveLength(2);
    for (const r of rows) expectFigure(r);
    expect(rows.map((r) => r.name.split(" ")[1])).toEqual(["cold", "warm"]);
    expect(rows[0]?.details).toMatchObject({ roots: 2, files: expect.any(Number) });
  }, 120_000);

  it("store-pg: appends into one PostgreSQL chain from 1, 2 and 4 writer processes next to raw INSERT; COMMIT", async () => {
    const rows = await smoke(storePgSuite);
    expect(rows.map((r) => r.details?.writers)).toEqual([1, 2, 4]);
    for (const r of rows) expectFigure(r);
    expect(rows.find((r) => r.headline)?.details?.writers).toBe(4);
  }, 120_000);
});

describe("sweep-queue on a throwaway PostgreSQL, smoke size", () => {
  it("asp sweep --queue with a worker on the shared PostgreSQL store next to asp sweep once per repository", async () => {
    const cluster = await startPostgres({ prefix: "asp-bench-pg-" });
    const before = process.env[PG_URL_ENV];
    process.env[PG_URL_ENV] = cluster.url;
    try {
      const rows = await smoke(sweepQueueSuite);
      expect(rows).toHaveLength(1);
      for (const r of rows) expectFigure(r);
      expect(rows[0]?.details).toMatchObject({
        repositories: 1,
        workers: 1,
        subjectReposPerMin: expect.any(Number),
        baselineReposPerMin: expect.any(Number),
      });
    } finally {
      if (before === undefined) delete process.env[PG_URL_ENV];
      else process.env[PG_URL_ENV] = before;
      await cluster.stop();
    }
  }, 300_000);
});

describe("dependencyRoots", () => {
  const dir = mkdtempSync(join(tmpdir(), "asp-bench-roots-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("finds every node_modules folder not inside another, and nothing under .git", async () => {
    const { mkdirSync } = await import("node:fs");
    for (const p of ["node_modules/a/node_modules/b", "packages/x/node_modules/c", ".git/node_modules", "src"]) {
      mkdirSync(join(dir, p), { recursive: true });
    }
    expect(dependencyRoots(dir)).toEqual(["node_modules", "packages/x/node_modules"]);
  });
});

describe("bench/results.json", () => {
  const dir = mkdtempSync(join(tmpdir(), "asp-bench-results-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const row = (name: string, ratio: number, extra: Partial<Ratio> = {}): Ratio => ({
    name,
    baselineName: "base",
    subjectMedianMs: ratio * 10,
    baselineMedianMs: 10,
    ratio,
    target: null,
    withinTarget: null,
    rounds: 3,
    iterations: 1,
    ...extra,
  });

  it("merges one suite's figures and keeps every other suite's rows", () => {
    const path = join(dir, "bench", "results.json");
    mergeResults(path, { a: suiteResult("suite a", [row("a1", 1.5)]) });
    mergeResults(path, { b: suiteResult("suite b", [row("b1", 2), row("b2", 3, { headline: true })]) });
    mergeResults(path, { a: suiteResult("suite a again", [row("a2", 1.25)]) });
    const read = readResults(path);
    expect(Object.keys(read.suites)).toEqual(["a", "b"]);
    expect(read.suites.a?.rows.map((r) => r.name)).toEqual(["a2"]);
    expect(read.suites.b?.rows).toHaveLength(2);
    expect(read.suites.a).toMatchObject({
      date: expect.any(String),
      cores: expect.any(Number),
      node: process.version,
    });
    // The headline is the marked row, else the first.
    expect(headline(read.suites.b as never)?.name).toBe("b2");
    expect(headline(read.suites.a as never)?.name).toBe("a2");
    const table = resultsTable(read);
    expect(table.split("\n").filter((l) => l.startsWith("| `"))).toHaveLength(2);
    expect(table).toContain("3.00×");
  });

  it("treats a missing file as empty and refuses a file that is not a results file", () => {
    expect(readResults(join(dir, "missing.json"))).toEqual({ suites: {} });
    const bad = join(dir, "bad.json");
    writeFileSync(bad, "[1, 2]\n");
    expect(() => readResults(bad)).toThrow();
    expect(readFileSync(bad, "utf8")).toBe("[1, 2]\n");
  });
});
