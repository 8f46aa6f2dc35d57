import { resolve } from "node:path";
import { redactStoreLocation } from "@asp/store-postgres";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { closeQueue, migrateQueue, openQueue, queueUrl } from "../queue/boss.js";
import { enqueueSweeps } from "../queue/enqueue.js";
import { readReposFile } from "../queue/jobs.js";
import { runWorker, type WorkerMode } from "../queue/worker.js";
import { inert } from "../terminal.js";
import { CONFIG_OPTION_HELP, readHostConfig } from "./host.js";
import { parseWait, WAIT_OPTION_HELP } from "./store.js";

/** The help text of `asp sweep --queue`. */
export const QUEUE_OPTION_HELP =
  "enqueue one sweep job per repository listed in FILE (absolute paths, one per line) for `asp worker`, instead of sweeping here";

/**
 * `asp sweep --queue FILE`: read and check every line (one bad line: nothing enqueued), then
 * send one job per repository keyed by (path, HEAD); prints how many were enqueued and how many
 * were already in the queue.
 * @throws UsageError `ASP_CLI_QUEUE_BAD_REPOS_FILE`, `ASP_CLI_BAD_INPUT`, `ASP_CLI_QUEUE_NO_DATABASE`,
 *   `ASP_CLI_QUEUE_NOT_MIGRATED`, `ASP_CLI_QUEUE_UNAVAILABLE`.
 */
export async function enqueueCommand(ctx: CliContext, file: string, configFlag: string | undefined): Promise<void> {
  const url = queueUrl(readHostConfig(ctx, configFlag));
  const jobs = readReposFile(resolve(ctx.io.cwd, file));
  const boss = await openQueue(url);
  try {
    const r = await enqueueSweeps(boss, url, jobs);
    ctx.print(`enqueued ${r.enqueued}, duplicate ${r.duplicate} (queue ${redactStoreLocation(url)})`, r);
  } finally {
    await closeQueue(boss);
  }
}

function positiveInt(flag: string, name: string, max: number): number {
  const n = Number(flag);
  if (!/^\d+$/.test(flag.trim()) || !Number.isInteger(n) || n < 1 || n > max)
    throw new UsageError("ASP_CLI_USAGE", `${name} takes an integer from 1 to ${max}, got ${JSON.stringify(flag)}`);
  return n;
}

interface WorkerFlags {
  readonly config?: string;
  readonly concurrency: string;
  readonly once?: boolean;
  readonly untilIdle?: boolean;
  readonly wait?: string;
  readonly poll: string;
  readonly maintenance: string;
  readonly migrate?: boolean;
  readonly maxAttempts: string;
  readonly retryDelay: string;
  readonly expire: string;
}

/** `asp worker`: run sweep jobs from the queue; `asp worker --migrate`: install the queue's schema. */
export function registerWorker(program: Command, ctx: CliContext): void {
  program
    .command("worker")
    .description(
      "run the sweep jobs `asp sweep --queue` enqueued: evaluate each repository, write its receipt exactly once; a job that fails every attempt ends failed, recorded (exit 0)",
    )
    .option("--config <path>", CONFIG_OPTION_HELP)
    .option("--concurrency <n>", "jobs run at once in this process", "1")
    .option("--once", "take at most one job per concurrent loop, then exit")
    .option("--until-idle", "exit once nothing is queued, retrying or running")
    .option("--wait <seconds>", WAIT_OPTION_HELP)
    .option("--poll <seconds>", "how long to sleep when no job is ready", "2")
    .option(
      "--maintenance <seconds>",
      "how often this worker expires jobs of crashed workers (pg-boss maintenance)",
      "60",
    )
    .option(
      "--migrate",
      "install or migrate the queue's schema and create the sweep queue, then exit (nothing else does)",
    )
    .option("--max-attempts <n>", "with --migrate: attempts before a job ends failed", "3")
    .option("--retry-delay <seconds>", "with --migrate: first retry delay, doubled per attempt", "5")
    .option(
      "--expire <seconds>",
      "with --migrate: how long a job may run before it counts as its worker's crash and is retried",
      "900",
    )
    .action(async (flags: WorkerFlags) => {
      const url = queueUrl(readHostConfig(ctx, flags.config));
      if (flags.migrate === true) {
        const r = await migrateQueue(url, {
          maxAttempts: positiveInt(flags.maxAttempts, "--max-attempts", 100),
          retryDelaySeconds: positiveInt(flags.retryDelay, "--retry-delay", 86_400),
          expireSeconds: positiveInt(flags.expire, "--expire", 86_399),
        });
        ctx.print(
          `queue schema version ${r.schemaVersion} installed in ${redactStoreLocation(url)}; queue ${r.queue} ${r.created ? "created" : "updated"} (max attempts ${r.policy.maxAttempts}, retry delay ${r.policy.retryDelaySeconds} s, expire ${r.policy.expireSeconds} s)`,
          r,
        );
        return;
      }
      if (flags.once === true && flags.untilIdle === true)
        throw new UsageError("ASP_CLI_USAGE", "--once and --until-idle exclude each other");
      const mode: WorkerMode = flags.once === true ? "once" : flags.untilIdle === true ? "until-idle" : "forever";
      const summary = await runWorker(ctx, {
        config: flags.config,
        concurrency: positiveInt(flags.concurrency, "--concurrency", 64),
        mode,
        waitMs: parseWait(flags.wait),
        pollMs: positiveInt(flags.poll, "--poll", 3600) * 1000,
        maintenanceSeconds: positiveInt(flags.maintenance, "--maintenance", 3600),
      });
      ctx.print(
        `processed ${summary.processed}: ${summary.receipts} receipts, ${summary.alreadyDone} already done, ${summary.retried} to retry, ${summary.failed} failed${summary.jobs
          .filter((j) => j.outcome === "failed")
          .map((j) => `\n  failed ${inert(j.repo ?? j.id)}: ${inert(j.error?.code ?? "")}`)
          .join("")}`,
        summary,
      );
    });
}
