#!/usr/bin/env node
import { readdirSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { formatRatio, type Ratio } from "./measure.js";
import { mergeResults, readResults, resultsTable, type SuiteResult, suiteResult } from "./results.js";
import type { Suite } from "./suite.js";

/**
 * `pnpm bench <suite...|all> [--json] [--smoke] [--results <path>]`: runs suites from
 * `src/suites/` (one file each), prints every ratio and merges each suite's figures into
 * `bench/results.json` at the repository root (the other suites' rows are kept). `--smoke` runs
 * each suite on a tiny input and writes nothing unless `--results` names a file.
 * `pnpm bench table` prints the README's benchmark table from the results file.
 * Exit 0 when all suites ran (a missed target is reported, not failed: shared machines are
 * noisy); 64 for an unknown suite or option; 70 when a suite throws.
 */
const suitesDir = new URL("./suites/", import.meta.url);
const DEFAULT_RESULTS = fileURLToPath(new URL("../../../bench/results.json", import.meta.url));
const available = readdirSync(suitesDir)
  .filter((f) => f.endsWith(".js"))
  .map((f) => f.slice(0, -3))
  .sort();

const args = process.argv.slice(2);
const json = args.includes("--json");
const smoke = args.includes("--smoke");
const at = args.indexOf("--results");
const resultsArg = at === -1 ? undefined : args[at + 1];
if (at !== -1 && (resultsArg === undefined || resultsArg.startsWith("--"))) {
  process.stderr.write("bench: --results needs a path\n");
  process.exit(64);
}
const resultsPath = resultsArg === undefined ? (smoke ? null : DEFAULT_RESULTS) : resolve(resultsArg);
const names = args.filter((a, i) => !a.startsWith("--") && !(at !== -1 && i === at + 1));

if (names.length === 1 && names[0] === "table") {
  process.stdout.write(resultsTable(readResults(resultsPath ?? DEFAULT_RESULTS)));
  process.exit(0);
}

const wanted = names.length === 0 || names.includes("all") ? available : names;
const unknown = wanted.filter((n) => !available.includes(n));
if (unknown.length > 0) {
  process.stderr.write(`bench: unknown suite ${unknown.join(", ")}; available: ${available.join(", ")}\n`);
  process.exit(64);
}

const results: Array<{ suite: string; ratios: Ratio[] }> = [];
try {
  for (const name of wanted) {
    const suite = ((await import(new URL(`${name}.js`, suitesDir).href)) as { default: Suite }).default;
    const ratios: Ratio[] = [];
    process.stderr.write(`== ${suite.name}: ${suite.description}\n`);
    await suite.run({
      size: smoke ? "smoke" : "full",
      progress: (m) => process.stderr.write(`   ${m}\n`),
      report: (r) => {
        ratios.push(r);
        if (!json) process.stdout.write(`${formatRatio(r)}\n`);
      },
    });
    results.push({ suite: suite.name, ratios });
    // Each suite as soon as it ran: a later suite that throws does not lose the earlier figures.
    if (resultsPath !== null) {
      const entry: Record<string, SuiteResult> = { [suite.name]: suiteResult(suite.description, ratios) };
      mergeResults(resultsPath, entry);
    }
  }
} catch (error) {
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(70);
}
if (resultsPath !== null) process.stderr.write(`bench: figures merged into ${resultsPath}\n`);
if (json) process.stdout.write(`${JSON.stringify({ node: process.version, results }, null, 2)}\n`);
