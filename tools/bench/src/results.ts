import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus } from "node:os";
import { dirname } from "node:path";
import type { Ratio } from "./measure.js";

/** One suite's figures from its last run. */
export interface SuiteResult {
  readonly description: string;
  /** When the suite ran (ISO 8601). */
  readonly date: string;
  /** Cores the machine offered the run. */
  readonly cores: number;
  readonly cpu: string;
  /** `process.version` of the run. */
  readonly node: string;
  /** Every ratio the suite reported, in order. */
  readonly rows: readonly Ratio[];
}

/** `bench/results.json`: one object per suite, by name; running one suite keeps the others. */
export interface BenchResults {
  readonly suites: Readonly<Record<string, SuiteResult>>;
}

/** The result of a suite that just ran on this machine. */
export function suiteResult(description: string, rows: readonly Ratio[], date = new Date()): SuiteResult {
  return {
    description,
    date: date.toISOString(),
    cores: availableParallelism(),
    cpu: cpus()[0]?.model.trim() ?? "unknown",
    node: process.version,
    rows,
  };
}

/** Read `path`; a missing file is an empty result set. Throws on a file that is not one. */
export function readResults(path: string): BenchResults {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { suites: {} };
    throw error;
  }
  const parsed = JSON.parse(text) as BenchResults;
  if (typeof parsed !== "object" || parsed === null || typeof parsed.suites !== "object" || parsed.suites === null) {
    throw new Error(`${path} is not a bench results file (no "suites" object)`);
  }
  return parsed;
}

/**
 * Merge `results` (suite name -> result) into the file at `path`, replacing those suites and
 * keeping every other suite's rows; written atomically (temp file + rename), keys sorted.
 */
export function mergeResults(path: string, results: Readonly<Record<string, SuiteResult>>): BenchResults {
  const merged: Record<string, SuiteResult> = { ...readResults(path).suites, ...results };
  const suites = Object.fromEntries(
    Object.keys(merged)
      .sort()
      .map((k) => [k, merged[k] as SuiteResult]),
  );
  const out: BenchResults = { suites };
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(out, null, 2)}\n`);
  renameSync(tmp, path);
  return out;
}

/** A suite's headline ratio: the row it marks `headline`, else its first row. */
export function headline(result: SuiteResult): Ratio | null {
  return result.rows.find((r) => r.headline === true) ?? result.rows[0] ?? null;
}

const ms = (x: number): string => (x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(x >= 10 ? 0 : 2)} ms`);

/** The README's benchmark table: one line per suite, its headline ratio against its baseline. */
export function resultsTable(results: BenchResults): string {
  const lines = ["| suite | subject | baseline (same run) | ratio | medians | run |", "|---|---|---|---:|---|---|"];
  for (const [name, r] of Object.entries(results.suites)) {
    const h = headline(r);
    if (h === null) continue;
    lines.push(
      `| \`${name}\` | ${h.name} | ${h.baselineName} | ${h.ratio.toFixed(2)}× | ${ms(h.subjectMedianMs)} vs ${ms(h.baselineMedianMs)} | ${r.date.slice(0, 10)}, ${r.cores} cores, Node ${r.node} |`,
    );
  }
  return `${lines.join("\n")}\n`;
}
