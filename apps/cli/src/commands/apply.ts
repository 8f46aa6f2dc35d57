import { existsSync, lstatSync, readFileSync, renameSync } from "node:fs";
import { basename, dirname, isAbsolute, resolve } from "node:path";
import { type ComposedHost, candidatePolicyPaths, type HostConfig, serveHost } from "@asp/ths";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";
import { inert } from "../terminal.js";
import { CONFIG_OPTION_HELP, hostFromConfig, readHostConfig, renderEnvelope } from "./host.js";
import { serveHttp } from "./serve-http.js";
import { openForWriting, parseWait, WAIT_OPTION_HELP } from "./store.js";

type ProposeResult = Awaited<ReturnType<ComposedHost["propose"]>>;
type ApplyResult = Awaited<ReturnType<ComposedHost["apply"]>>;

function repoOf(ctx: CliContext, flag: string | undefined): string {
  const repo = resolve(ctx.io.cwd, flag ?? ".");
  if (!existsSync(repo)) {
    throw new UsageError("ASP_CLI_BAD_INPUT", `no repository folder at ${repo}`, { data: { path: repo } });
  }
  return repo;
}

/**
 * Run `fn` with a host composed from the trusted configuration, holding the store as its one
 * writer (ADR 0003) for the whole command: a proposal or an apply is decided and recorded by one
 * process at a time.
 */
async function withHost<T>(
  ctx: CliContext,
  verb: string,
  flags: { config?: string; wait?: string },
  repo: string,
  fn: (host: ComposedHost, config: HostConfig) => Promise<T>,
): Promise<T> {
  // Threat model invariant 2: the candidate never configures the host that judges it.
  const config = readHostConfig(ctx, flags.config, repo);
  const store = await openForWriting(ctx, verb, config.store, parseWait(flags.wait), repo);
  let host: ComposedHost;
  try {
    // Edit providers launch when first used; the check providers only when the apply validates.
    host = await hostFromConfig(ctx, config, { store, warm: false }, repo);
  } catch (error) {
    await store.close();
    throw error;
  }
  try {
    return await fn(host, config);
  } finally {
    try {
      await host.close();
    } finally {
      await store.close();
    }
  }
}

/** `--args` / `--args-file`: the intent's JSON arguments. */
function intentArguments(ctx: CliContext, flags: { args?: string; argsFile?: string }): unknown {
  if (flags.args !== undefined && flags.argsFile !== undefined) {
    throw new UsageError("ASP_CLI_USAGE", "give --args or --args-file, not both");
  }
  const text =
    flags.argsFile !== undefined
      ? (() => {
          const path = resolve(ctx.io.cwd, flags.argsFile);
          try {
            return readFileSync(path, "utf8");
          } catch (error) {
            throw new UsageError("ASP_CLI_BAD_INPUT", `cannot read --args-file ${path}: ${(error as Error).message}`, {
              data: { path },
            });
          }
        })()
      : flags.args;
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError("ASP_CLI_BAD_INPUT", `the intent arguments are not JSON: ${(error as Error).message}`);
  }
}

/** The human rendering of a stored proposal: what it would change, or why it was rejected. */
export function renderProposal(p: ProposeResult): string {
  const t = inert;
  const lines = [
    `proposal ${t(p.proposalId)} from ${p.provider === null ? "no edit provider" : `${t(p.provider.id)}@${t(p.provider.version)}`}`,
    `baseline ${t(p.baseline)}`,
  ];
  if (p.rejection !== undefined && p.rejection !== null) {
    lines.push(`REJECTED ${t(p.rejection.code)}: ${t(p.rejection.detail)}`, "nothing can be applied from it");
    return lines.join("\n");
  }
  const plan = p.plan;
  if (plan !== undefined && plan !== null) {
    if (plan.description !== undefined) lines.push(`  ${t(plan.description)}`);
    for (const op of plan.operations) {
      const where = "path" in op ? t(op.path) : `${t(op.from)} -> ${t(op.to)}`;
      lines.push(`  ${t(op.op)} ${where}`);
    }
    lines.push(`apply it with: asp apply ${t(p.proposalId)}`);
  }
  return lines.join("\n");
}

/** The human rendering of an apply receipt (and the validation decision when one was made). */
export function renderApply(r: ApplyResult): string {
  const t = inert;
  const rc = r.receipt;
  const lines = [
    `${rc.applied ? "APPLIED" : "NOT APPLIED"} proposal ${t(rc.proposalId)}  validation ${rc.decision === null ? "- (no check ran)" : t(rc.decision)}`,
    `baseline before ${t(rc.baselineBefore)}`,
    `baseline after  ${rc.baselineAfter === null ? "- (nothing written)" : t(rc.baselineAfter)}`,
    `assurance ${t(rc.assuranceMode)}${rc.directWriteRisk ? " (direct-write-risk)" : ""}  transaction ${t(rc.transactionGuarantee)}`,
  ];
  if (rc.sandbox !== undefined && rc.sandbox !== null)
    lines.push(`sandbox  ${t(rc.sandbox.id)} ${t(rc.sandbox.digest)}`);
  if (rc.mergedPaths !== undefined && rc.mergedPaths.length > 0)
    lines.push(`merged   ${rc.mergedPaths.map(t).join(", ")} (3-way, the worktree moved under them)`);
  if (rc.rejection !== undefined) lines.push(`rejected ${t(rc.rejection.code)}: ${t(rc.rejection.detail)}`);
  if (rc.reason !== undefined) lines.push(`reason   ${t(rc.reason)}`);
  for (const f of rc.files ?? []) lines.push(`  ${t(f.outcome)} ${t(f.path)}`);
  if (r.envelope !== null) lines.push("validation decision:", renderEnvelope(r.envelope));
  return lines.join("\n");
}

/** Exit code of an apply: 0 applied, 1 the validation denied it, 2 anything else not applied. */
function exitOfApply(r: ApplyResult): number {
  if (r.receipt.applied) return EXIT.ok;
  return r.receipt.decision === "deny" || r.receipt.rejection?.code === "ASP_APPLY_DENIED"
    ? EXIT.deny
    : EXIT.indeterminate;
}

/**
 * `asp edit propose`: ask an edit provider for a plan, validate it and record it durably (host §6
 * step 1). Nothing is written to the worktree; `asp apply PROPOSAL_ID` applies it on explicit intent.
 */
export function registerEdit(program: Command, ctx: CliContext): void {
  const edit = program.command("edit").description("ask edit providers for plans; nothing is written (see asp apply)");
  edit
    .command("propose")
    .description(
      "ask an edit provider for a plan against the worktree, validate and record it (exit 0 valid plan, 2 rejected)",
    )
    .requiredOption("--intent <kind>", "the intent kind (e.g. replace, create, plan: see the provider's README)")
    .option("--args <json>", "the intent's arguments as JSON")
    .option("--args-file <path>", "read the intent's arguments from a JSON file")
    .option("--description <text>", "what the change is for (recorded with the proposal)")
    .option("--provider <id>", "the edit provider (default: the only one configured)")
    .option("--repo <dir>", "the repository", ".")
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--wait <seconds>", WAIT_OPTION_HELP)
    .action(
      async (flags: {
        intent: string;
        args?: string;
        argsFile?: string;
        description?: string;
        provider?: string;
        repo?: string;
        config?: string;
        wait?: string;
      }) => {
        const repo = repoOf(ctx, flags.repo);
        const args = intentArguments(ctx, flags);
        const result = await withHost(ctx, "edit propose", flags, repo, (host) =>
          host.propose({
            repo,
            ...(flags.provider === undefined ? {} : { provider: flags.provider }),
            intent: {
              kind: flags.intent,
              ...(flags.description === undefined ? {} : { description: flags.description }),
              ...(args === undefined ? {} : { arguments: args }),
            },
          }),
        );
        ctx.print(renderProposal(result), result);
        ctx.setExit(result.rejection === undefined || result.rejection === null ? EXIT.ok : EXIT.indeterminate);
      },
    );
  edit
    .command("discard-journal <dir>")
    .description(
      "put aside a staged-apply journal folder that cannot be recovered (ASP_APPLY_JOURNAL_DAMAGED names it); check the worktree first",
    )
    .action((dir: string) => {
      const moved = discardJournal(dir);
      ctx.print(
        [
          `moved the damaged journal ${inert(dir)} to ${inert(moved)}`,
          "the next gate, check, propose or apply of the repository records any interrupted apply (ASP_APPLY_INTERRUPTED);",
          "a half-published apply stays as it is on disk: compare the worktree with git status",
        ].join("\n"),
        { journalDir: dir, movedTo: moved },
      );
    });
}

/**
 * Rename a repository's staged-apply journal folder aside (issue 32 hole 12): only a folder shaped
 * like one the host creates (`<store>.journal/<16 hex>` or a host temp journal root), never a link.
 * @throws UsageError `ASP_CLI_BAD_INPUT` for anything else.
 */
function discardJournal(dir: string): string {
  const parent = basename(dirname(dir));
  const shaped =
    isAbsolute(dir) &&
    /^[0-9a-f]{16}$/.test(basename(dir)) &&
    (parent.endsWith(".journal") || parent.startsWith("asp-apply-journal-"));
  const st = shaped ? lstatSync(dir, { throwIfNoEntry: false }) : undefined;
  if (st === undefined || !st.isDirectory()) {
    throw new UsageError("ASP_CLI_BAD_INPUT", `${dir} is not a staged-apply journal folder the host created`, {
      data: { path: dir },
    });
  }
  const moved = `${dir}.damaged-${new Date().toISOString().replace(/[:.]/g, "-")}`;
  renameSync(dir, moved);
  return moved;
}

/**
 * `asp apply PROPOSAL_ID`: the explicit apply intent (host §6): the host re-validates the recorded
 * plan, runs the gate's required checks on the hypothetical after-state, and writes only on
 * allow, reporting the guarantee it enforced in a durable apply receipt.
 */
export function registerApply(program: Command, ctx: CliContext): void {
  program
    .command("apply <proposalId>")
    .description(
      "apply a recorded proposal after the required checks allow its after-state (exit 0 applied, 1 denied, 2 not applied otherwise)",
    )
    // THREAT-MODEL invariant 15: no --call-site. The gate's required checks validate every apply;
    // the requester never chooses how strictly it is judged (an unknown option is a usage error).
    .option("--repo <dir>", "the repository", ".")
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--wait <seconds>", WAIT_OPTION_HELP)
    .action(async (proposalId: string, flags: { repo?: string; config?: string; wait?: string }) => {
      const repo = repoOf(ctx, flags.repo);
      const result = await withHost(ctx, "apply", flags, repo, (host, config) =>
        host.apply({
          repo,
          proposalId,
          // host §7: an edit of the repository's own policy file never authorizes itself.
          candidatePolicyPath: candidatePolicyPaths(config),
        }),
      );
      ctx.print(renderApply(result), result);
      ctx.setExit(exitOfApply(result));
    });
}

/**
 * `asp serve --stdio`: answer a harness's JSON-RPC requests (`host/status`, `host/capabilities`,
 * `host/applyProposal`) on stdin/stdout until the input ends. The store is held for the session.
 */
export function registerServe(program: Command, ctx: CliContext): void {
  program
    .command("serve")
    .description(
      "serve the host: --http ADDR answers the HTTP API (docs/server.md) until SIGINT / SIGTERM; --stdio serves host/status, host/capabilities and host/applyProposal over JSON-RPC on stdio (LSP framing) until stdin closes",
    )
    .option("--stdio", "JSON-RPC on stdin/stdout, bound to --repo")
    .option(
      "--http <addr>",
      "HTTP on a loopback HOST:PORT (127.0.0.1:7340) or unix:/path, for the repositories and tokens of the configuration's server section",
    )
    .option("--repo <dir>", "with --stdio: the repository applies are bound to", ".")
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--wait <seconds>", WAIT_OPTION_HELP)
    .action(async (flags: { repo?: string; config?: string; wait?: string; stdio?: boolean; http?: string }) => {
      if ((flags.stdio === true) === (flags.http !== undefined)) {
        throw new UsageError("ASP_CLI_USAGE", "asp serve takes exactly one of --stdio or --http <addr>");
      }
      if (flags.http !== undefined) return serveHttp(ctx, { ...flags, http: flags.http });
      const repo = repoOf(ctx, flags.repo);
      await withHost(ctx, "serve", flags, repo, async (host, config) => {
        const connection = serveHost(host, process.stdin, process.stdout, {
          repo,
          candidatePolicyPath: candidatePolicyPaths(config),
        });
        await new Promise<void>((done) => {
          connection.onClose(() => done());
          process.stdin.once("end", () => done());
        });
        connection.dispose();
      });
    });
}
