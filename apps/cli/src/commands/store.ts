import { resolve } from "node:path";
import {
  backupStore,
  checkStore,
  DEFAULT_WAIT_MS,
  type EvidenceError,
  type FactLogHead,
  formatHead,
  openStore,
  type SalvageResult,
  type Store,
  type StoreCheck,
  salvageStore,
  type WaitProgress,
} from "@asp/evidence";
import { isPostgresUrl, migrateStore, openPostgresStore, redactStoreLocation } from "@asp/store-postgres";
import { trustedBaseKey } from "@asp/ths";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";
import { inert } from "../terminal.js";
import { CONFIG_OPTION_HELP, readHostConfig } from "./host.js";

/** The help text of every `--wait` option. */
export const WAIT_OPTION_HELP = `how long to wait for the evidence store while another process holds it, in seconds (default ${DEFAULT_WAIT_MS / 1000}; 0 fails at once with exit 75)`;

/**
 * `--wait SECONDS` as milliseconds (default 30 s).
 * @throws UsageError `ASP_CLI_USAGE` for anything but a non-negative number of seconds.
 */
export function parseWait(flag: string | undefined): number {
  if (flag === undefined) return DEFAULT_WAIT_MS;
  const seconds = Number(flag);
  if (flag.trim() === "" || !Number.isFinite(seconds) || seconds < 0 || seconds > 86_400) {
    throw new UsageError(
      "ASP_CLI_USAGE",
      `--wait takes a number of seconds from 0 to 86400, got ${JSON.stringify(flag)}`,
    );
  }
  return Math.round(seconds * 1000);
}

/**
 * Open the store for writing, waiting up to `waitMs` while another process holds it, with one
 * progress line on stderr about every second (its pid, how long so far, the bound). A level
 * store is held whole; a PostgreSQL store (`postgres://…`) is shared by many hosts, and a writer
 * holds only the trusted-base key of `repo` for its whole evaluation (ADR 0003 across hosts).
 * @throws EvidenceError `ASP_EVIDENCE_STORE_LOCKED` (exit 75), `ASP_EVIDENCE_STORE_CORRUPT` (exit 74);
 *   PgStoreError `ASP_PGSTORE_UNAVAILABLE` (exit 75), `ASP_PGSTORE_NOT_MIGRATED` (exit 64).
 */
export function openForWriting(
  ctx: CliContext,
  verb: string,
  dir: string,
  waitMs: number,
  repo?: string,
): Promise<Store> {
  const shown = redactStoreLocation(dir);
  const onWait = (p: WaitProgress): void =>
    ctx.io.stderr(
      `asp ${verb}: waiting for the evidence store at ${inert(shown)}, held by ${p.pid === null ? "another process" : `process ${p.pid}`} (${Math.floor(p.waitedMs / 1000)} s of ${Math.round(p.timeoutMs / 1000)} s)…\n`,
    );
  if (isPostgresUrl(dir)) {
    // Appends from many hosts serialize on the chain's lock; the evaluation holds its repository.
    return openPostgresStore(dir, repo === undefined ? {} : { hold: { keys: [trustedBaseKey(repo)], waitMs, onWait } });
  }
  return openStore(dir, { waitMs, onWait });
}

/**
 * Open the store read-only (a private snapshot: no lock, a writer is never blocked), or `null`
 * when there is no store there yet.
 * @throws EvidenceError `ASP_EVIDENCE_STORE_CORRUPT` (exit 74) and the other open errors.
 */
export async function openForReading(dir: string): Promise<Store | null> {
  if (isPostgresUrl(dir)) return openPostgresStore(dir, { readOnly: true });
  try {
    return await openStore(dir, { readOnly: true });
  } catch (error) {
    const e = error as EvidenceError;
    if (e?.code === "ASP_EVIDENCE_NOT_A_STORE" && e.data?.missing === true) return null;
    throw error;
  }
}

const headText = (head: FactLogHead | null): string => (head === null ? "-" : formatHead(head));
const span = (from: number, to: number): string => (from === to ? `${from}` : `${from}-${to}`);

function renderCheck(c: StoreCheck): string {
  const lines = [
    `store ${inert(c.path)}: ${c.ok ? "ok" : "DAMAGED"}`,
    `  store id ${inert(c.storeId ?? "unknown")}; anchored head ${headText(c.anchored)}; head pointer ${headText(c.head)}`,
    `  entries 1-${c.verified} verify and chain from the start${c.stranded > 0 ? `; ${c.stranded} more verify on their own past a gap` : ""}${c.recovered > 0 ? `; ${c.recovered} read back from damaged write-ahead log records` : ""}`,
    ...c.damage.map(
      (d) =>
        `  ${d.fatal ? "✖" : "·"} ${d.kind}: ${inert(d.message)}${d.from === undefined ? "" : ` [${span(d.from, d.to ?? d.from)}]`}${d.fatal ? "" : " (not fatal)"}`,
    ),
  ];
  if (!c.ok) {
    lines.push(
      "next: asp store salvage --out DIR copies every entry that still verifies into a new store (this one is never modified), or restore a backup (docs/store.md)",
    );
  }
  return lines.join("\n");
}

function renderSalvage(r: SalvageResult): string {
  const lost = r.lost.map((l) => `${span(l.from, l.to)} (${l.reason})`).join(", ");
  return [
    `salvaged ${inert(r.source.path)} into ${inert(r.path)} (new store id ${inert(r.storeId)})`,
    `  kept entries ${r.kept === 0 ? "none" : `1-${r.kept}`} byte for byte; carried ${r.carried} more; lost ${lost === "" ? "nothing" : lost}`,
    `  objects copied ${r.objects.copied}, skipped ${r.objects.skipped} that did not verify`,
    `  head ${formatHead(r.head)} (an evidence.salvage record in the new store names the source and what was lost)`,
  ].join("\n");
}

interface StoreFlags {
  readonly config?: string;
  readonly store?: string;
  readonly out?: string;
}

/** The store a `store` subcommand acts on: `--store DIR|URL`, else the trusted configuration's. */
function storeTarget(ctx: CliContext, flags: StoreFlags): string {
  if (flags.store !== undefined) return isPostgresUrl(flags.store) ? flags.store : resolve(ctx.io.cwd, flags.store);
  return readHostConfig(ctx, flags.config).store;
}

/**
 * The level store folder a file-level subcommand (check, salvage, backup) acts on.
 * @throws UsageError `ASP_CLI_USAGE` for a PostgreSQL store (its database has its own tools).
 */
function storeDir(ctx: CliContext, flags: StoreFlags, verb: string): string {
  const target = storeTarget(ctx, flags);
  if (isPostgresUrl(target)) {
    throw new UsageError(
      "ASP_CLI_USAGE",
      `asp store ${verb} works on a level store folder; ${redactStoreLocation(target)} is a PostgreSQL store: use asp receipts verify to walk its chain and pg_dump to back it up (docs/scale-out.md)`,
    );
  }
  return target;
}

function outDir(ctx: CliContext, flags: StoreFlags): string {
  if (flags.out === undefined) throw new UsageError("ASP_CLI_USAGE", "--out DIR is required (a new or empty folder)");
  return resolve(ctx.io.cwd, flags.out);
}

/** `asp store check|salvage|backup|migrate`: look after the evidence store itself (docs/store.md, docs/scale-out.md). */
export function registerStore(program: Command, ctx: CliContext): void {
  const store = program
    .command("store")
    .description("check, salvage and back up the evidence store (never modifies it; runs while a host holds it)");
  const withTarget = (cmd: Command): Command =>
    cmd
      .option("--config <path>", CONFIG_OPTION_HELP)
      .option("--store <dir>", "the store folder to act on (default: the one the host configuration names)");
  withTarget(
    store.command("check").description("report damage without modifying the store (exit 0 ok, 74 damaged)"),
  ).action(async (flags: StoreFlags) => {
    const report = await checkStore(storeDir(ctx, flags, "check"));
    ctx.print(renderCheck(report), report);
    if (!report.ok) ctx.setExit(EXIT.storeDamaged);
  });
  withTarget(
    store
      .command("salvage")
      .description(
        "copy every entry that still verifies into a new store at --out, recording what was lost and from which store (exit 0 when the new store is made)",
      )
      .option("--out <dir>", "a new or empty folder for the salvaged store"),
  ).action(async (flags: StoreFlags) => {
    const result = await salvageStore(storeDir(ctx, flags, "salvage"), outDir(ctx, flags));
    ctx.print(renderSalvage(result), result);
  });
  withTarget(
    store
      .command("backup")
      .description(
        "a consistent, verified copy at --out, taken while a host may be running; prints the head to verify a restore against",
      )
      .option("--out <dir>", "a new or empty folder for the backup"),
  ).action(async (flags: StoreFlags) => {
    const dir = storeDir(ctx, flags, "backup");
    const result = await backupStore(dir, outDir(ctx, flags));
    const head = result.head === null ? null : formatHead(result.head);
    ctx.print(
      [
        `backed up ${inert(dir)} to ${inert(result.path)}: ${result.entries} entries, head ${head ?? "-"}`,
        ...(head === null
          ? []
          : [`record the head; after a restore, check it with: asp receipts verify --expect-head ${head}`]),
      ].join("\n"),
      { ...result, headText: head },
    );
  });
  withTarget(
    store
      .command("migrate")
      .description(
        "create or upgrade the schema of a PostgreSQL store (never done at start-up; safe to run again, and from many hosts at once)",
      ),
  ).action(async (flags: StoreFlags) => {
    const target = storeTarget(ctx, flags);
    if (!isPostgresUrl(target)) {
      throw new UsageError(
        "ASP_CLI_USAGE",
        `asp store migrate acts on a PostgreSQL store (a postgres:// URL); ${inert(target)} is a level store folder, which needs no migration`,
      );
    }
    const result = await migrateStore(target);
    const shown = redactStoreLocation(target);
    ctx.print(
      result.applied.length === 0
        ? `store ${inert(shown)}: schema version ${result.to}, up to date`
        : `store ${inert(shown)}: schema version ${result.from} -> ${result.to} (applied ${result.applied.join(", ")})`,
      { url: shown, ...result },
    );
  });
}
