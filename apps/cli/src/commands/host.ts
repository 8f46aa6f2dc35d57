import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { CallSite, DecisionEnvelope } from "@asp/contracts";
import { createMemoryStore, type FactLog, type FactLogHead, formatHead, parseHead, type Store } from "@asp/evidence";
import { type ActivePolicy, loadPolicy } from "@asp/policy";
import { createGitPolicySource } from "@asp/policy/node";
import { redactStoreLocation } from "@asp/store-postgres";
import {
  assertTrustedLocations,
  type ComposedHost,
  type ComposeHostOptions,
  candidatePolicyPaths,
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
import { requireHostConfig } from "../host-config.js";
import { inert } from "../terminal.js";
import { enqueueCommand, QUEUE_OPTION_HELP } from "./queue.js";
import { openForReading, openForWriting, parseWait, WAIT_OPTION_HELP } from "./store.js";

/** The help text of every `--config` option. */
export const CONFIG_OPTION_HELP =
  "trusted host configuration (default: $ASP_HOST_CONFIG, $XDG_CONFIG_HOME/asp/host.json, /etc/asp/host.json; never the current directory)";

/**
 * Find and load the trusted host configuration (see {@link requireHostConfig} for where `asp`
 * looks). With `repo`, refuse a configuration whose file or any trusted input it names lies
 * inside that repository: the file's own location is checked before it is parsed.
 * @throws UsageError `ASP_CLI_NO_HOST_CONFIG`; ThsError `ASP_THS_UNTRUSTED_LOCATION`,
 *   `ASP_THS_BAD_CONFIG`, `ASP_THS_BAD_MANIFEST`.
 */
export function readHostConfig(ctx: CliContext, flag: string | undefined, repo?: string): HostConfig {
  const { path } = requireHostConfig(ctx, flag);
  if (repo !== undefined) assertTrustedLocations(repo, { file: path });
  const config = loadHostConfig(path);
  if (repo !== undefined) assertTrustedLocations(repo, { file: path, ...config });
  return config;
}

/**
 * The trusted policy a configuration names: its file path as is, or the policy committed at a base
 * revision of `repo`, read through git (`git rev-parse` pins the commit, `git show` reads the blob;
 * the working tree is never read).
 * @throws UsageError `ASP_CLI_BAD_INPUT` for a base-revision policy without a repository;
 *   PolicyError `ASP_POLICY_SOURCE_UNREADABLE` when the revision or the file in it is missing, or any
 *   parse code of the policy.
 */
export async function trustedPolicy(config: HostConfig, repo: string | undefined): Promise<string | ActivePolicy> {
  const policy = config.policy;
  if (typeof policy === "string") return policy;
  if (repo === undefined) {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `the host configuration reads its policy from revision ${policy.git} of the repository under evaluation; this command has none`,
      { data: { git: policy.git, path: policy.path } },
    );
  }
  return loadPolicy(createGitPolicySource({ repository: resolve(repo), revision: policy.git, path: policy.path }));
}

/**
 * Compose the host a configuration describes; fail-opens are logged on stderr as they happen.
 * `overrides` replace composition options (e.g. `asp status` composes with `warm: false`).
 */
export async function hostFromConfig(
  ctx: CliContext,
  config: HostConfig,
  overrides: Partial<ComposeHostOptions> = {},
  repo?: string,
): Promise<ComposedHost> {
  return composeHost({
    store: config.store,
    policy: await trustedPolicy(config, repo),
    trustRoots: config.trustRoots,
    plugins: config.plugins,
    pluginOptions: config.pluginOptions,
    providers: config.providers,
    excludes: config.excludes,
    environment: config.environment,
    env: ctx.io.env,
    failOpenSink: {
      log: (e) =>
        ctx.io.stderr(
          `asp: fail-open: provider ${inert(e.provider)} failClass ${inert(e.failClass)} call-site ${inert(e.callSite)}\n`,
        ),
    },
    ...overrides,
  });
}

/** `sha256:` and the first 12 hex digits: enough to tell two environments apart on a terminal. */
function shortDigest(digest: string): string {
  return digest.slice(0, "sha256:".length + 12);
}

const EXIT_OF = { allow: EXIT.allow, deny: EXIT.deny, indeterminate: EXIT.indeterminate } as const;

/**
 * The human rendering of a decision envelope. Every field a provider, plugin or the candidate
 * repository controls goes through {@link inert}, so none can drive the terminal or forge a line.
 */
export function renderEnvelope(envelope: DecisionEnvelope, storeDir?: string): string {
  const t = inert;
  const lines = [
    `${t(envelope.decision.toUpperCase())} (${t(envelope.callSite)})  decision ${t(envelope.decisionId)}`,
    `baseline ${t(envelope.baseline)}${envelope.changeset === null ? "" : `  changeset ${t(envelope.changeset)}`}`,
    `policy   ${t(envelope.policyDigest)}`,
    ...(envelope.environment === undefined
      ? []
      : [
          // host §9: the dependency environment the providers were given (its full id is in the receipt).
          `environment: ${t(shortDigest(envelope.environment.tree))} (${envelope.environment.roots.length} roots, ${envelope.environment.files} files)`,
        ]),
    ...(envelope.judged === undefined
      ? []
      : [
          // THREAT-MODEL invariant 11: tracked files are always judged; this is what was not.
          `left out: ${envelope.judged.leftOut} untracked files or folders (ignored or excluded: in no commit, not judged)${
            envelope.judged.submodules.length === 0
              ? ""
              : `; ${envelope.judged.submodules.length} submodules not judged (${envelope.judged.submodules.slice(0, 3).map(t).join(", ")}${envelope.judged.submodules.length > 3 ? ", ..." : ""})`
          }`,
        ]),
    `coverage required [${envelope.coverage.required.map(t).join(", ")}]  ran [${envelope.coverage.ran.map(t).join(", ")}]`,
  ];
  for (const d of envelope.coverage.degraded) {
    const who = [d.provider && `provider ${t(d.provider)}`, d.requirement && `requirement ${t(d.requirement)}`]
      .filter(Boolean)
      .join(", ");
    lines.push(
      `  degraded: ${who}: ${t(d.reason)}${d.failOpen ? " (fail-open)" : ""}${d.detail ? `: ${t(d.detail)}` : ""}`,
    );
  }
  for (const f of envelope.findings) {
    const d = f.diagnostic;
    const at =
      d.range === undefined ? "" : ` ${t(d.range.path)}:${d.range.start.line + 1}:${d.range.start.character + 1}`;
    lines.push(
      `${f.disposition === "gating" ? "✖" : "·"} ${t(f.effectiveSeverity)} ${t(d.code)}${at} ${t(d.message)} [${t(f.provider.id)}]`,
    );
    if (f.severityNote !== undefined) lines.push(`    note: ${t(f.severityNote)}`);
    if (f.nextStep !== undefined) lines.push(`    next: ${t(f.nextStep)}`);
  }
  lines.push(
    `assurance ${t(envelope.assurance.mode)}${envelope.assurance.directWriteRisk ? " (direct-write-risk)" : ""}`,
  );
  // host §3: how each provider process was really confined, and why when it was not.
  for (const p of envelope.assurance.providers ?? []) {
    const via = p.sandbox === null ? "" : ` via ${t(p.sandbox.id)}`;
    lines.push(
      `  ${t(p.provider)}: ${t(p.mode)}${p.directWrite ? " (direct-write)" : ""}${via}: ${t(p.mechanism)}${p.reason === undefined ? "" : `; ${t(p.reason)}`}`,
    );
  }
  lines.push(
    envelope.receipt === undefined
      ? "receipt  -"
      : `receipt  ${t(envelope.receipt.id)} stored in ${t(redactStoreLocation(storeDir ?? envelope.receipt.location))} (asp receipts show ${t(envelope.receipt.id)})`,
  );
  return lines.join("\n");
}

function progressLine(ctx: CliContext, verb: string): (e: ProgressEvent) => void {
  if (ctx.json()) return () => {};
  let running = 0;
  return (e) => {
    if (e.phase === "provider-start") {
      running++;
      ctx.io.stderr(`asp ${verb}: running ${inert(e.provider)}…\n`);
    } else if (e.phase === "provider-done") {
      running--;
      ctx.io.stderr(
        `asp ${verb}: ${inert(e.provider)} ${e.ok ? "done" : "degraded"} (${inert(e.detail.slice(0, 120))})${running > 0 ? `, ${running} running` : ""}\n`,
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
  readonly wait?: string;
  readonly queue?: string;
}

async function evaluate(ctx: CliContext, verb: string, callSite: CallSite, flags: EvaluateFlags): Promise<void> {
  const repo = resolve(ctx.io.cwd, flags.repo ?? ".");
  if (!existsSync(repo)) {
    throw new UsageError("ASP_CLI_BAD_INPUT", `no repository folder at ${repo}`, { data: { path: repo } });
  }
  // Threat model invariant 2: the candidate never configures the host that judges it.
  const config = readHostConfig(ctx, flags.config, repo);
  await withComposedHost(ctx, verb, config, repo, flags.wait, async (host, store) => {
    const { envelope } = await host.evaluate(callSite, {
      repo,
      ...(flags.base === undefined ? {} : { base: flags.base }),
      ...(callSite === "sweep" ? { wholeTree: true } : {}),
      candidatePolicyPath: candidatePolicyPaths(config),
      onProgress: progressLine(ctx, verb),
    });
    // store.location: the folder, or a database URL with its password redacted.
    ctx.print(renderEnvelope(envelope, store.location), envelope);
    ctx.setExit(EXIT_OF[envelope.decision]);
  });
}

/**
 * Hold the configuration's store for writing (waiting up to `--wait` for another holder), compose
 * its host over it for `repo`, run `fn`, and close both whatever happens. What the work read (the
 * trusted base, a run's state) is still what it appends after (ADR 0003).
 */
export async function withComposedHost<T>(
  ctx: CliContext,
  verb: string,
  config: HostConfig,
  repo: string,
  wait: string | undefined,
  fn: (host: ComposedHost, store: Store) => Promise<T>,
): Promise<T> {
  // The store is held for the whole work: what the decision read (the trusted base) is still what
  // it appends after (ADR 0003); on a shared PostgreSQL store, the repository is held too.
  const store = await openForWriting(ctx, verb, config.store, parseWait(wait), repo);
  let host: ComposedHost;
  try {
    host = await hostFromConfig(ctx, config, { store }, repo);
  } catch (error) {
    await store.close();
    throw error;
  }
  try {
    return await fn(host, store);
  } finally {
    try {
      await host.close();
    } finally {
      await store.close();
    }
  }
}

function evaluateCommand(program: Command, ctx: CliContext, verb: string, callSite: CallSite, description: string) {
  const cmd = program
    .command(verb)
    .description(description)
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--repo <dir>", "the repository to evaluate", ".")
    .option("--wait <seconds>", WAIT_OPTION_HELP);
  if (callSite !== "sweep")
    cmd.option(
      "--base <rev>",
      "git revision to diff against (default: the trusted base, the after-tree of the last allowed gate for this repository)",
    );
  else cmd.option("--queue <file>", QUEUE_OPTION_HELP);
  cmd.action((flags: EvaluateFlags) =>
    flags.queue === undefined ? evaluate(ctx, verb, callSite, flags) : enqueueCommand(ctx, flags.queue, flags.config),
  );
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

/**
 * Run `fn` over the store's log, opened read-only (a private snapshot: a running gate is never
 * blocked), or `null` when there is no store yet.
 */
export async function withStore<T>(
  ctx: CliContext,
  configPath: string | undefined,
  fn: (log: FactLog | null) => Promise<T>,
): Promise<T> {
  const config = readHostConfig(ctx, configPath);
  const store = await openForReading(config.store);
  try {
    return await fn(store?.log ?? null);
  } finally {
    await store?.close();
  }
}

/** A log that checks `expectHead` on every `verify()` (what `receipts verify --expect-head` walks). */
function expecting(log: FactLog, expectHead: FactLogHead): FactLog {
  return { ...log, verify: (options) => log.verify({ ...options, expectHead }) };
}

/** `asp receipts list|show|verify|head`: the durable audit receipts of past decisions (read-only). */
export function registerReceipts(program: Command, ctx: CliContext): void {
  const receipts = program
    .command("receipts")
    .description("list, show and verify audit receipts, and print the store's head (read-only: never blocks a gate)");
  receipts
    .command("list")
    .description("the latest receipts, newest first")
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--limit <n>", "how many", "20")
    .action(async (flags: { config?: string; limit: string }) => {
      const limit = Number(flags.limit);
      if (!Number.isInteger(limit) || limit < 1)
        throw new UsageError("ASP_CLI_USAGE", "--limit must be a positive integer");
      const rows = await withStore(ctx, flags.config, async (log) => (log === null ? [] : listReceipts(log, limit)));
      ctx.print(
        rows.length === 0
          ? "no receipts yet"
          : rows
              .map((r) =>
                [r.seq, r.at, r.receipt.receiptId, r.receipt.callSite, r.receipt.decision]
                  .map((v) => inert(String(v)))
                  .join("\t"),
              )
              .join("\n"),
        rows.map((r) => ({ seq: r.seq, at: r.at, receipt: r.receipt })),
      );
    });
  receipts
    .command("show <id>")
    .description("one receipt (by receipt or decision id) with its envelope")
    .option("--config <path>", CONFIG_OPTION_HELP)
    .action(async (id: string, flags: { config?: string }) => {
      // No store yet: the lookup fails as for any id not in it (ASP_THS_RECEIPT_NOT_FOUND).
      const r = await withStore(ctx, flags.config, async (log) =>
        showReceipt(log ?? (await createMemoryStore()).log, id),
      );
      ctx.print(
        [
          `receipt ${inert(r.receipt.receiptId)} (seq ${r.seq}, ${inert(r.at)})`,
          r.envelope === null ? "envelope: missing" : renderEnvelope(r.envelope),
        ].join("\n"),
        r,
      );
    });
  receipts
    .command("verify")
    .description(
      "walk the hash chain and check every receipt against its envelope (exit 3 when anything fails, never 1: a broken audit trail is not a deny; 74 when the store is damaged)",
    )
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option(
      "--expect-head <SEQ:DIGEST>",
      "a head recorded earlier (asp receipts head): fail unless the chain still passes through it",
    )
    .action(async (flags: { config?: string; expectHead?: string }) => {
      const expectHead = flags.expectHead === undefined ? undefined : parseHead(flags.expectHead);
      const v = await withStore(ctx, flags.config, async (log) => {
        if (log !== null) return verifyReceipts(expectHead === undefined ? log : expecting(log, expectHead));
        // No store at all: nothing to verify, unless a head was expected (a store deleted).
        return {
          ok: expectHead === undefined,
          entries: 0,
          head: null,
          receipts: 0,
          problems:
            expectHead === undefined
              ? []
              : [
                  {
                    seq: expectHead.seq,
                    receiptId: null,
                    problem: "there is no evidence store: the expected head is not on any chain",
                  },
                ],
        };
      });
      const machine = expectHead === undefined ? v : { ...v, expectHead: formatHead(expectHead) };
      ctx.print(
        v.ok
          ? `ok: ${v.entries} fact log entries, ${v.receipts} receipts verified${v.head === null ? "" : `, head ${formatHead(v.head)}`}${expectHead === undefined ? "" : `; passes through ${formatHead(expectHead)}`}`
          : `FAILED:\n${v.problems.map((p) => `  seq ${p.seq}${p.receiptId === null ? "" : ` ${inert(p.receiptId)}`}: ${inert(p.problem)}`).join("\n")}`,
        machine,
      );
      if (!v.ok) ctx.setExit(EXIT.verificationFailed);
    });
  receipts
    .command("head")
    .description(
      "print the store's head as SEQ:DIGEST: record it elsewhere (a CI log), check it later with verify --expect-head",
    )
    .option("--config <path>", CONFIG_OPTION_HELP)
    .action(async (flags: { config?: string }) => {
      const head = await withStore(ctx, flags.config, async (log) => (log === null ? null : log.head()));
      ctx.print(head === null ? "no head: the store is empty or not created yet" : formatHead(head), {
        head,
        text: head === null ? null : formatHead(head),
      });
    });
}
