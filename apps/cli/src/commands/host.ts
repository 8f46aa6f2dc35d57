import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { CallSite, DecisionEnvelope } from "@asp/contracts";
import { openStore } from "@asp/evidence";
import {
  type ComposedHost,
  type ComposeHostOptions,
  composeHost,
  type HostConfig,
  listReceipts,
  loadHostConfig,
  type ProgressEvent,
  showReceipt,
  verifyReceipts,
} from "@asp/ths";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";

/** The trusted host configuration file `asp` reads when `--config` is not given. */
export const DEFAULT_HOST_CONFIG = "asp.host.json";

/** Resolve and load the trusted host configuration (`--config`, default `asp.host.json` in the cwd). */
export function readHostConfig(ctx: CliContext, path: string | undefined): HostConfig {
  const file = resolve(ctx.io.cwd, path ?? DEFAULT_HOST_CONFIG);
  if (!existsSync(file)) {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `no host configuration at ${file}; pass --config PATH (see docs/protocol.md "Host configuration")`,
      { data: { path: file } },
    );
  }
  return loadHostConfig(file);
}

/**
 * Compose the host a configuration describes; fail-opens are logged on stderr as they happen.
 * `overrides` replace composition options (e.g. `asp status` composes with `warm: false`).
 */
export async function hostFromConfig(
  ctx: CliContext,
  config: HostConfig,
  overrides: Partial<ComposeHostOptions> = {},
): Promise<ComposedHost> {
  return composeHost({
    store: config.store,
    policy: config.policy,
    trustRoots: config.trustRoots,
    plugins: config.plugins,
    providers: config.providers,
    excludes: config.excludes,
    env: ctx.io.env,
    failOpenSink: {
      log: (e) =>
        ctx.io.stderr(`asp: fail-open: provider ${e.provider} failClass ${e.failClass} call-site ${e.callSite}\n`),
    },
    ...overrides,
  });
}

const EXIT_OF = { allow: EXIT.allow, deny: EXIT.deny, indeterminate: EXIT.indeterminate } as const;

/** The human rendering of a decision envelope. */
export function renderEnvelope(envelope: DecisionEnvelope, storeDir?: string): string {
  const lines = [
    `${envelope.decision.toUpperCase()} (${envelope.callSite})  decision ${envelope.decisionId}`,
    `baseline ${envelope.baseline}${envelope.changeset === null ? "" : `  changeset ${envelope.changeset}`}`,
    `policy   ${envelope.policyDigest}`,
    `coverage required [${envelope.coverage.required.join(", ")}]  ran [${envelope.coverage.ran.join(", ")}]`,
  ];
  for (const d of envelope.coverage.degraded) {
    const who = [d.provider && `provider ${d.provider}`, d.requirement && `requirement ${d.requirement}`]
      .filter(Boolean)
      .join(", ");
    lines.push(`  degraded: ${who}: ${d.reason}${d.failOpen ? " (fail-open)" : ""}${d.detail ? `: ${d.detail}` : ""}`);
  }
  for (const f of envelope.findings) {
    const d = f.diagnostic;
    const at = d.range === undefined ? "" : ` ${d.range.path}:${d.range.start.line + 1}:${d.range.start.character + 1}`;
    lines.push(
      `${f.disposition === "gating" ? "✖" : "·"} ${f.effectiveSeverity} ${d.code}${at} ${d.message} [${f.provider.id}]`,
    );
    if (f.severityNote !== undefined) lines.push(`    note: ${f.severityNote}`);
    if (f.nextStep !== undefined) lines.push(`    next: ${f.nextStep}`);
  }
  lines.push(
    `assurance ${envelope.assurance.mode}${envelope.assurance.directWriteRisk ? " (direct-write-risk)" : ""}`,
    envelope.receipt === undefined
      ? "receipt  -"
      : `receipt  ${envelope.receipt.id} stored in ${storeDir ?? envelope.receipt.location} (asp receipts show ${envelope.receipt.id})`,
  );
  return lines.join("\n");
}

function progressLine(ctx: CliContext, verb: string): (e: ProgressEvent) => void {
  if (ctx.json()) return () => {};
  let running = 0;
  return (e) => {
    if (e.phase === "provider-start") {
      running++;
      ctx.io.stderr(`asp ${verb}: running ${e.provider}…\n`);
    } else if (e.phase === "provider-done") {
      running--;
      ctx.io.stderr(
        `asp ${verb}: ${e.provider} ${e.ok ? "done" : "degraded"} (${e.detail.slice(0, 120)})${running > 0 ? `, ${running} running` : ""}\n`,
      );
    } else if (e.phase === "deciding") {
      ctx.io.stderr(`asp ${verb}: deciding…\n`);
    }
  };
}

interface EvaluateFlags {
  readonly config?: string;
  readonly repo?: string;
  readonly base?: string;
}

async function evaluate(ctx: CliContext, verb: string, callSite: CallSite, flags: EvaluateFlags): Promise<void> {
  const config = readHostConfig(ctx, flags.config);
  const repo = resolve(ctx.io.cwd, flags.repo ?? ".");
  if (!existsSync(repo)) {
    throw new UsageError("ASP_CLI_BAD_INPUT", `no repository folder at ${repo}`, { data: { path: repo } });
  }
  const host = await hostFromConfig(ctx, config);
  try {
    const { envelope } = await host.evaluate(callSite, {
      repo,
      ...(flags.base === undefined ? {} : { base: flags.base }),
      ...(callSite === "sweep" ? { wholeTree: true } : {}),
      ...(config.candidatePolicy === null ? {} : { candidatePolicyPath: config.candidatePolicy }),
      onProgress: progressLine(ctx, verb),
    });
    ctx.print(renderEnvelope(envelope, config.store), envelope);
    ctx.setExit(EXIT_OF[envelope.decision]);
  } finally {
    await host.close();
  }
}

function evaluateCommand(program: Command, ctx: CliContext, verb: string, callSite: CallSite, description: string) {
  const cmd = program
    .command(verb)
    .description(description)
    .option("--config <path>", "trusted host configuration", DEFAULT_HOST_CONFIG)
    .option("--repo <dir>", "the repository to evaluate", ".");
  if (callSite !== "sweep")
    cmd.option("--base <rev>", "git revision to diff against (default: the last recorded baseline)");
  cmd.action((flags: EvaluateFlags) => evaluate(ctx, verb, callSite, flags));
}

/** `asp check`: the interactive call-site (warn-allow under the fail-policy table). */
export function registerCheck(program: Command, ctx: CliContext): void {
  evaluateCommand(
    program,
    ctx,
    "check",
    "interactive",
    "interactive check of the repository (exit 0 allow, 1 deny, 2 indeterminate)",
  );
}

/** `asp gate`: the gate call-site (never allow on any failure). */
export function registerGate(program: Command, ctx: CliContext): void {
  evaluateCommand(program, ctx, "gate", "gate", "gate decision on the change (exit 0 allow, 1 deny, 2 indeterminate)");
}

/** `asp sweep`: the whole tree at the sweep call-site. */
export function registerSweep(program: Command, ctx: CliContext): void {
  evaluateCommand(
    program,
    ctx,
    "sweep",
    "sweep",
    "background sweep of the whole tree (exit 0 allow, 1 deny, 2 indeterminate)",
  );
}

async function withStore<T>(
  ctx: CliContext,
  configPath: string | undefined,
  fn: (log: Awaited<ReturnType<typeof openStore>>["log"]) => Promise<T>,
): Promise<T> {
  const config = readHostConfig(ctx, configPath);
  const store = await openStore(config.store);
  try {
    return await fn(store.log);
  } finally {
    await store.close();
  }
}

/** `asp receipts list|show|verify`: the durable audit receipts of past decisions. */
export function registerReceipts(program: Command, ctx: CliContext): void {
  const receipts = program.command("receipts").description("list, show and verify audit receipts");
  receipts
    .command("list")
    .description("the latest receipts, newest first")
    .option("--config <path>", "trusted host configuration", DEFAULT_HOST_CONFIG)
    .option("--limit <n>", "how many", "20")
    .action(async (flags: { config?: string; limit: string }) => {
      const limit = Number(flags.limit);
      if (!Number.isInteger(limit) || limit < 1)
        throw new UsageError("ASP_CLI_USAGE", "--limit must be a positive integer");
      const rows = await withStore(ctx, flags.config, (log) => listReceipts(log, limit));
      ctx.print(
        rows.length === 0
          ? "no receipts yet"
          : rows
              .map((r) => `${r.seq}\t${r.at}\t${r.receipt.receiptId}\t${r.receipt.callSite}\t${r.receipt.decision}`)
              .join("\n"),
        rows.map((r) => ({ seq: r.seq, at: r.at, receipt: r.receipt })),
      );
    });
  receipts
    .command("show <id>")
    .description("one receipt (by receipt or decision id) with its envelope")
    .option("--config <path>", "trusted host configuration", DEFAULT_HOST_CONFIG)
    .action(async (id: string, flags: { config?: string }) => {
      const r = await withStore(ctx, flags.config, (log) => showReceipt(log, id));
      ctx.print(
        [
          `receipt ${r.receipt.receiptId} (seq ${r.seq}, ${r.at})`,
          r.envelope === null ? "envelope: missing" : renderEnvelope(r.envelope),
        ].join("\n"),
        r,
      );
    });
  receipts
    .command("verify")
    .description("walk the hash chain and check every receipt against its envelope (exit 1 when anything fails)")
    .option("--config <path>", "trusted host configuration", DEFAULT_HOST_CONFIG)
    .action(async (flags: { config?: string }) => {
      const v = await withStore(ctx, flags.config, (log) => verifyReceipts(log));
      ctx.print(
        v.ok
          ? `ok: ${v.entries} fact log entries, ${v.receipts} receipts verified${v.head === null ? "" : `, head ${v.head.digest}`}`
          : `FAILED:\n${v.problems.map((p) => `  seq ${p.seq}${p.receiptId === null ? "" : ` ${p.receiptId}`}: ${p.problem}`).join("\n")}`,
        v,
      );
      if (!v.ok) ctx.setExit(EXIT.deny);
    });
}
