#!/usr/bin/env node
import { readdirSync } from "node:fs";
import { formatRatio, type Ratio } from "./measure.js";
import type { Suite } from "./suite.js";

/**
 * `pnpm bench <suite...|all> [--json]`: runs suites from `src/suites/` (one file each) and prints
 * every ratio. Exit 0 when all suites ran (a missed target is reported, not failed: shared
 * machines are noisy); 64 for an unknown suite; 70 when a suite throws.
 */
const suitesDir = new URL("./suites/", import.meta.url);
const available = readdirSync(suitesDir)
  .filter((f) => f.endsWith(".js"))
  .map((f) => f.slice(0, -3))
  .sort();

const args = process.argv.slice(2);
const json = args.includes("--json");
const names = args.filter((a) => !a.startsWith("--"));
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
      progress: (m) => process.stderr.write(`   ${m}\n`),
      report: (r) => {
        ratios.push(r);
        if (!json) process.stdout.write(`${formatRatio(r)}\n`);
      },
    });
    results.push({ suite: suite.name, ratios });
  }
} catch (error) {
  process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(70);
}
if (json) process.stdout.write(`${JSON.stringify({ node: process.version, results }, null, 2)}\n`);
