import { performance } from "node:perf_hooks";
import { secretLintProfiler } from "@secretlint/profiler";
import { describe, expect, it } from "vitest";
import { lintCatalogue } from "../src/catalogue.js";
import { scanText } from "../src/scan.js";

// @secretlint/core 12 marked a performance entry per rule per file and its profiler kept every one,
// scanning all of them on each end mark: the cost of a file grew with the files scanned before it
// (a 6,483-file change never got an answer within the gate budget; issue 26). This checks the
// cause, not a time: scanning leaves nothing behind in the profiler or the performance timeline.
describe("the catalogue keeps nothing per scanned file", () => {
  it("1,000 files through the catalogue add no profiler entries and no performance marks", async () => {
    const marks = performance.getEntriesByType("mark").length;
    const kept = (secretLintProfiler as unknown as { entries: unknown[] }).entries.length;
    for (let i = 0; i < 1_000; i++) await lintCatalogue(`export const v${i} = "value ${i}";\n`, `src/f${i}.ts`);
    expect(performance.getEntriesByType("mark").length).toBe(marks);
    expect((secretLintProfiler as unknown as { entries: unknown[] }).entries.length).toBe(kept);
    expect((secretLintProfiler as unknown as { measures: unknown[] }).measures.length).toBe(0);
  });

  it("the catalogue still finds what it found with its profiler on", async () => {
    // A GitLab personal access token shape, assembled at run time (no secret-shaped literal here).
    const token = `glpat-${"Ab3dE".repeat(4)}`;
    const hits = await scanText(`gitlab: ${token}\n`, "config.yml");
    expect(hits.some((d) => String(d.code).includes("gitlab"))).toBe(true);
  });
});
