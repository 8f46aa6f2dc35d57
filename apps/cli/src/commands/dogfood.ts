import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { DogfoodReport } from "@asp/contracts";
import { createMemoryStore } from "@asp/evidence";
import { type DogfoodLabels, dogfoodReport, parseDogfoodLabels } from "@asp/ths";
import type { Command } from "commander";
import { type CliContext, cliVersion } from "../context.js";
import { UsageError } from "../errors.js";
import { inert } from "../terminal.js";
import { CONFIG_OPTION_HELP, withStore } from "./host.js";

/** Read and check `--labels FILE` (relative to the working directory). */
function readLabels(ctx: CliContext, file: string): DogfoodLabels {
  let text: string;
  try {
    text = readFileSync(resolve(ctx.io.cwd, file), "utf8");
  } catch (cause) {
    throw new UsageError("ASP_CLI_USAGE", `cannot read --labels ${file}: ${(cause as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError("ASP_CLI_USAGE", `--labels ${file} is not JSON`);
  }
  return parseDogfoodLabels(value);
}

/** One table per capability family: never collapsed into one pass/fail label (host §9). */
function renderReport(r: DogfoodReport): string {
  const out: string[] = [];
  for (const c of r.capabilities) {
    out.push(`== ${c.family}`);
    out.push(
      c.latency.length === 0
        ? "  latency: no runs"
        : c.latency
            .map((l) => `  latency ${l.callSite}: p50 ${l.p50Ms} ms, p95 ${l.p95Ms} ms, ${l.timeouts} timeouts`)
            .join("\n"),
    );
    out.push(`  stale rejections / freshness failures: ${c.staleRejections}`);
    const failures = Object.entries(c.typedFailures);
    out.push(
      `  typed failures: ${failures.length === 0 ? "none" : failures.map(([k, n]) => `${inert(k)} ${n}`).join(", ")}`,
    );
    out.push(`  degraded coverage entries: ${c.degraded.length}`);
    for (const d of c.degraded.slice(0, 20)) {
      out.push(`    ${inert(d.provider ?? d.requirement ?? "?")}: ${inert(d.failClass ?? d.reason)}`);
    }
    if (c.degraded.length > 20) out.push(`    ... ${c.degraded.length - 20} more (--json)`);
    out.push(`  edit conflicts / refused edits: ${c.editConflicts.length}`);
    for (const e of c.editConflicts.slice(0, 20)) out.push(`    ${inert(e.kind)}: ${inert(e.detail.slice(0, 200))}`);
    const outcomes = Object.entries(c.applyOutcomes);
    out.push(`  apply outcomes: ${outcomes.length === 0 ? "none" : outcomes.map(([k, n]) => `${k} ${n}`).join(", ")}`);
    out.push(`  false positives: ${c.falsePositives.length}, false negatives: ${c.falseNegatives.length}`);
    for (const s of [...c.falsePositives, ...c.falseNegatives].slice(0, 20)) {
      out.push(`    ${inert(s.ref)}: ${inert(s.detail.slice(0, 200))}`);
    }
  }
  out.push(
    `achieved assurance (weakest the host reported): ${r.assurance.mode}; transaction guarantee: ${r.assurance.transactionGuarantee}`,
  );
  return out.join("\n");
}

/** `asp dogfood report`: the host §9 dogfood report over the receipts in the store (read-only). */
export function registerDogfood(program: Command, ctx: CliContext): void {
  const dogfood = program.command("dogfood").description("dogfood reporting over the store's receipts (host §9)");
  dogfood
    .command("report")
    .description(
      "per capability family (inspect, check, edit): latency, timeouts, stale rejections, typed failures, degraded coverage, edit conflicts, apply outcomes, false positives/negatives (read-only: never blocks a gate)",
    )
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--since <iso>", "only receipts appended at or after this ISO 8601 time")
    .option("--labels <file>", 'a labelled set: JSON { "<receiptId>" | "<path>#<code>": "tp" | "fp" }')
    .action(async (flags: { config?: string; since?: string; labels?: string }) => {
      const since = flags.since === undefined ? undefined : new Date(flags.since);
      if (since !== undefined && Number.isNaN(since.getTime())) {
        throw new UsageError("ASP_CLI_USAGE", "--since must be an ISO 8601 time");
      }
      const labels = flags.labels === undefined ? undefined : readLabels(ctx, flags.labels);
      const report = await withStore(ctx, flags.config, async (log) =>
        dogfoodReport(log ?? (await createMemoryStore()).log, {
          ...(since === undefined ? {} : { since }),
          ...(labels === undefined ? {} : { labels }),
          engine: { name: "asp", version: cliVersion() },
        }),
      );
      ctx.print(renderReport(report), report);
    });
}
