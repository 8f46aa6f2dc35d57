import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { type DogfoodReport, isAspError } from "@asp/contracts";
import { createMemoryStore } from "@asp/evidence";
import { type DogfoodBaselines, type DogfoodLabels, dogfoodReport, parseDogfoodLabels, ThsError } from "@asp/ths";
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

/** A JSON file named by a flag (relative to the working directory), parsed. */
function readJson(ctx: CliContext, flag: string, file: string): { path: string; value: unknown } {
  const path = resolve(ctx.io.cwd, file);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (cause) {
    throw new UsageError("ASP_CLI_USAGE", `cannot read ${flag} ${file}: ${(cause as Error).message}`);
  }
  try {
    return { path, value: JSON.parse(text) };
  } catch {
    throw new UsageError("ASP_CLI_USAGE", `${flag} ${file} is not JSON`);
  }
}

/**
 * `--release-baseline FILE`: `{ "artifacts": [{ "kind", "path", "uri"? }] }`. Each `path`
 * (relative to FILE's folder) is hashed here, so the report carries what the host measured.
 */
function releaseEvidence(ctx: CliContext, file: string): DogfoodBaselines["releaseEvidence"] {
  const { path, value } = readJson(ctx, "--release-baseline", file);
  const artifacts = (value as { artifacts?: unknown } | null)?.artifacts;
  if (!Array.isArray(artifacts)) {
    throw new ThsError(
      "ASP_THS_BAD_BASELINE",
      `--release-baseline ${file} must be { "artifacts": [{ "kind", "path", "uri"? }] }`,
    );
  }
  return artifacts.map((a: unknown, i) => {
    const e = a as { kind?: unknown; path?: unknown; uri?: unknown } | null;
    if (typeof e !== "object" || e === null || typeof e.path !== "string" || e.path.length === 0) {
      throw new ThsError("ASP_THS_BAD_BASELINE", `--release-baseline ${file}: artifact #${i + 1} names no path`);
    }
    let bytes: Buffer;
    try {
      bytes = readFileSync(resolve(dirname(path), e.path));
    } catch (cause) {
      throw new UsageError("ASP_CLI_USAGE", `cannot read release artifact ${e.path}: ${(cause as Error).message}`);
    }
    const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
    return { kind: e.kind, digest, ...(e.uri === undefined ? {} : { uri: e.uri }) };
  });
}

/** `--engine NAME@VERSION`. */
function parseEngine(value: string): { name: string; version: string } {
  const at = value.lastIndexOf("@");
  if (at <= 0 || at === value.length - 1) {
    throw new UsageError("ASP_CLI_USAGE", `--engine must be NAME@VERSION (e.g. lattice@1.2.0), got ${value}`);
  }
  return { name: value.slice(0, at), version: value.slice(at + 1) };
}

const SECTION_TITLES: Readonly<Record<keyof DogfoodReport["sections"], string>> = {
  parity: "parity deltas",
  compatibility: "old-tool compatibility",
  releaseEvidence: "release evidence",
};

/** One table per capability family: never collapsed into one pass/fail label (host §9). */
function renderReport(r: DogfoodReport): string {
  const out: string[] = [];
  if (r.referenceEngine !== undefined) {
    out.push(`reference engine: ${inert(r.referenceEngine.name)}@${inert(r.referenceEngine.version)}`);
  }
  for (const [name, title] of Object.entries(SECTION_TITLES) as [keyof DogfoodReport["sections"], string][]) {
    const sec = r.sections[name];
    const from = (sec.baselines ?? [])
      .map((b) => `${b.name === undefined ? "" : `${inert(b.name)}@${b.version ?? "?"} `}${b.digest}`)
      .join(", ");
    out.push(
      sec.status === "not_measured"
        ? `${title}: not_measured (needs ${sec.needs ?? "a baseline"})`
        : `${title}: ${sec.status} from ${from}`,
    );
  }
  for (const s of r.compatibility) out.push(`  ${inert(s.surface)}: ${s.status}`);
  for (const e of r.releaseEvidence) out.push(`  ${inert(e.kind)}: ${e.digest}${e.uri ? ` ${inert(e.uri)}` : ""}`);
  for (const c of r.capabilities) {
    out.push(`== ${c.family}`);
    if (c.routing === "not_served") {
      out.push(`  not served: ${c.latencyNote ?? "this host routes no such request"}`);
    }
    out.push(
      c.latency.length === 0
        ? `  latency: ${c.latencyStatus.replaceAll("_", " ")}${c.latencyNote !== undefined && c.routing === "served" ? ` (${c.latencyNote})` : ""}`
        : c.latency
            .map((l) => `  latency ${l.callSite}: p50 ${l.p50Ms} ms, p95 ${l.p95Ms} ms, ${l.timeouts} timeouts`)
            .join("\n"),
    );
    for (const d of c.parityDeltas.slice(0, 40)) {
      out.push(`  parity vs ${inert(d.baseline)}: ${inert(d.metric)} ${d.delta >= 0 ? "+" : ""}${d.delta}`);
    }
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

interface DogfoodFlags {
  config?: string;
  since?: string;
  labels?: string;
  engine?: string;
  parityBaseline?: string[];
  compatBaseline?: string;
  releaseBaseline?: string;
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** A shell word as printed in a next step: quoted when it holds anything but plain characters. */
const word = (w: string): string => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`);

/**
 * The refusal of a reference-engine report without its baselines, with a next step that runs as
 * printed: the same report of the host's own runs, without `--engine`.
 */
function withNextStep(
  error: { message: string; data?: Readonly<Record<string, unknown>> | undefined },
  f: DogfoodFlags,
) {
  const argv = [
    "asp",
    "dogfood",
    "report",
    ...(f.config === undefined ? [] : ["--config", f.config]),
    ...(f.since === undefined ? [] : ["--since", f.since]),
    ...(f.labels === undefined ? [] : ["--labels", f.labels]),
    ...(f.parityBaseline ?? []).flatMap((p) => ["--parity-baseline", p]),
    ...(f.compatBaseline === undefined ? [] : ["--compat-baseline", f.compatBaseline]),
    ...(f.releaseBaseline === undefined ? [] : ["--release-baseline", f.releaseBaseline]),
  ];
  const nextStep = argv.map(word).join(" ");
  return new ThsError("ASP_THS_DOGFOOD_BASELINE_MISSING", `${error.message}; next: ${nextStep}`, {
    data: { ...error.data, nextStep },
  });
}

/** `asp dogfood report`: the host §9 dogfood report over the receipts in the store (read-only). */
export function registerDogfood(program: Command, ctx: CliContext): void {
  const dogfood = program.command("dogfood").description("dogfood reporting over the store's receipts (host §9)");
  dogfood
    .command("report")
    .description(
      "per capability family (inspect, check, edit): latency, timeouts, stale rejections, typed failures, degraded coverage, edit conflicts, apply outcomes, false positives/negatives; parity, compatibility and release evidence only from baselines, else not_measured (read-only: never blocks a gate)",
    )
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--since <iso>", "only receipts appended at or after this ISO 8601 time")
    .option("--labels <file>", 'a labelled set: JSON { "<receiptId>" | "<path>#<code>": "tp" | "fp" }')
    .option(
      "--engine <name@version>",
      "the reference engine these runs dogfood (host §9); needs --parity-baseline, --compat-baseline and --release-baseline",
    )
    .option(
      "--parity-baseline <file>",
      "a reference or predecessor tool's results over the same runs, as a dogfood-report JSON (repeatable)",
      collect,
    )
    .option(
      "--compat-baseline <file>",
      'old-tool compatibility per protected surface: { "surfaces": [{ "surface", "status" }] }',
    )
    .option(
      "--release-baseline <file>",
      'release artifacts used as readiness input, each hashed: { "artifacts": [{ "kind", "path", "uri"? }] }',
    )
    .action(async (flags: DogfoodFlags) => {
      const since = flags.since === undefined ? undefined : new Date(flags.since);
      if (since !== undefined && Number.isNaN(since.getTime())) {
        throw new UsageError("ASP_CLI_USAGE", "--since must be an ISO 8601 time");
      }
      const labels = flags.labels === undefined ? undefined : readLabels(ctx, flags.labels);
      const referenceEngine = flags.engine === undefined ? undefined : parseEngine(flags.engine);
      const baselines: DogfoodBaselines = {
        ...(flags.parityBaseline === undefined
          ? {}
          : { parity: flags.parityBaseline.map((f) => readJson(ctx, "--parity-baseline", f).value) }),
        ...(flags.compatBaseline === undefined
          ? {}
          : { compatibility: readJson(ctx, "--compat-baseline", flags.compatBaseline).value }),
        ...(flags.releaseBaseline === undefined
          ? {}
          : { releaseEvidence: releaseEvidence(ctx, flags.releaseBaseline) }),
      };
      let report: DogfoodReport;
      try {
        report = await withStore(ctx, flags.config, async (log) =>
          dogfoodReport(log ?? (await createMemoryStore()).log, {
            ...(since === undefined ? {} : { since }),
            ...(labels === undefined ? {} : { labels }),
            ...(referenceEngine === undefined ? {} : { referenceEngine }),
            baselines,
            engine: { name: "asp", version: cliVersion() },
          }),
        );
      } catch (error) {
        throw isAspError(error) && error.code === "ASP_THS_DOGFOOD_BASELINE_MISSING"
          ? withNextStep(error, flags)
          : error;
      }
      ctx.print(renderReport(report), report);
    });
}
