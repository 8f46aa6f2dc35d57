import { existsSync } from "node:fs";
import { isAspError } from "@asp/contracts";
import type { FactInput, FactLog, Store } from "@asp/evidence";
import { redactStoreLocation } from "@asp/store-postgres";
import { candidatePolicyPaths, FACT_KINDS, type HostConfig } from "@asp/ths";
import pg from "pg";
import type PgBoss from "pg-boss";
import { hostFromConfig, readHostConfig } from "../commands/host.js";
import { openForWriting } from "../commands/store.js";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { inert } from "../terminal.js";
import { closeQueue, openQueue, queueUrl } from "./boss.js";
import { checkJobData, jobStateKey, repoHead, SWEEP_QUEUE, type SweepJob } from "./jobs.js";

/** The fact kind of a job that ended failed after its last attempt (index `queueJob` = its key). */
export const QUEUE_JOB_FAILED = "queue.job-failed";

/** When a worker stops. */
export type WorkerMode = "forever" | "once" | "until-idle";

/** Options of {@link runWorker}. */
export interface WorkerOptions {
  /** `--config`: the trusted host configuration (read per job, checked against each repository). */
  readonly config: string | undefined;
  /** Jobs this process runs at once (each takes the evidence store for its evaluation). */
  readonly concurrency: number;
  /** `once`: one job (or none) per loop; `until-idle`: until nothing is queued, retrying or running. */
  readonly mode: WorkerMode;
  /** How long one job waits for the evidence store another holds, in ms. */
  readonly waitMs: number;
  /** How long to sleep when no job is ready, in ms. */
  readonly pollMs: number;
  /** pg-boss maintenance interval (expiry of crashed workers' jobs), in seconds. */
  readonly maintenanceSeconds: number;
}

/** What became of one job this worker took. */
export interface JobOutcome {
  readonly id: string;
  readonly repo: string | null;
  readonly key: string | null;
  /** 1-based attempt number. */
  readonly attempt: number;
  /**
   * `receipt`: evaluated, receipt written; `already-done`: the fact log held the job's receipt
   * (a retry after a crash between the receipt and the queue's completion): nothing written;
   * `retry`: this attempt failed, the queue retries it; `failed`: its last attempt failed, a
   * `queue.job-failed` fact is recorded and the queue keeps it failed.
   */
  readonly outcome: "receipt" | "already-done" | "retry" | "failed";
  readonly decision?: string;
  readonly receiptId?: string;
  readonly error?: { readonly code: string; readonly message: string };
}

/** The `--json` summary of `asp worker`. */
export interface WorkerSummary {
  readonly processed: number;
  readonly receipts: number;
  readonly alreadyDone: number;
  readonly retried: number;
  readonly failed: number;
  readonly jobs: readonly JobOutcome[];
}

/**
 * Open the evidence store a job's evaluation writes to, held for the whole evaluation (as
 * `asp sweep` holds it). The one place a job opens its store.
 */
function openJobStore(ctx: CliContext, config: HostConfig, waitMs: number, repo?: string): Promise<Store> {
  // A folder (level) or a postgres:// URL: on a shared PostgreSQL store every worker appends to one
  // chain, holding the job's repository for the evaluation like `asp gate` does.
  return openForWriting(ctx, "worker", config.store, waitMs, repo);
}

/**
 * The store as the host sees it while it runs one job: its receipt append also names the job's
 * state key and `queueJob` index, in the same atomic batch, and is refused when the log already
 * holds a receipt for the job (checked again inside the append, after the evaluation).
 */
function storeForJob(store: Store, key: string): Store {
  const log = store.log;
  // Options pass through: a conditional append (the trusted base's) stays conditional.
  const append: FactLog["append"] = async (entries, options) => {
    if (!entries.some((e) => e.kind === FACT_KINDS.receipt)) return log.append(entries, options);
    if ((await log.latest(jobStateKey(key))) !== undefined) {
      throw new UsageError("ASP_CLI_QUEUE_DUPLICATE_RECEIPT", "the fact log already holds this job's receipt", {
        data: { key },
      });
    }
    const tagged: FactInput[] = entries.map((e) =>
      e.kind === FACT_KINDS.receipt
        ? {
            ...e,
            index: [...(e.index ?? []), { name: "queueJob", value: key }],
            state: [...(e.state ?? []), jobStateKey(key)],
          }
        : e,
    );
    return log.append(tagged, options);
  };
  return {
    location: store.location,
    id: store.id,
    readOnly: store.readOnly,
    log: { ...log, append },
    objects: store.objects,
    hasher: store.hasher,
    close: () => store.close(),
  };
}

/** A coded view of anything a job threw. */
function codeOf(error: unknown): { code: string; message: string } {
  if (isAspError(error)) return { code: error.code, message: error.message.slice(0, 2000) };
  return { code: "ASP_CLI_INTERNAL", message: (error instanceof Error ? error.message : String(error)).slice(0, 2000) };
}

/**
 * A session-level advisory lock on the job's key in the queue's database, held while the job
 * runs: a job the queue hands out again while its first worker still runs it (the job outlived
 * its expiry) waits here, then finds that worker's receipt. PostgreSQL drops the lock with the
 * connection, so a SIGKILLed worker never holds it.
 */
async function lockJob(client: pg.Client, key: string): Promise<void> {
  await client.query("SELECT pg_advisory_lock(hashtextextended($1, 0))", [`asp-sweep-job:${key}`]);
}

async function unlockJob(client: pg.Client, key: string): Promise<void> {
  await client.query("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [`asp-sweep-job:${key}`]);
}

/** Evaluate one job's repository at the sweep call-site and write its receipt, at most once. */
async function sweepJob(
  ctx: CliContext,
  options: WorkerOptions,
  job: SweepJob,
): Promise<{ outcome: "receipt" | "already-done"; decision?: string; receiptId?: string }> {
  const located = readHostConfig(ctx, options.config);
  const store = await openJobStore(ctx, located, options.waitMs, job.repo);
  try {
    const prior = await store.log.latest(jobStateKey(job.key));
    if (prior !== undefined) {
      const record = prior.record as { receiptId?: unknown; decision?: unknown };
      return {
        outcome: "already-done",
        ...(typeof record.receiptId === "string" ? { receiptId: record.receiptId } : {}),
        ...(typeof record.decision === "string" ? { decision: record.decision } : {}),
      };
    }
    if (!existsSync(job.repo)) {
      throw new UsageError("ASP_CLI_BAD_INPUT", `no repository folder at ${job.repo}`, { data: { path: job.repo } });
    }
    if (repoHead(job.repo) !== job.head) {
      throw new UsageError(
        "ASP_CLI_QUEUE_STALE_JOB",
        `the repository's HEAD is no longer ${job.head}, the commit it was enqueued at`,
        { data: { repo: job.repo, head: job.head } },
      );
    }
    // Threat model invariant 2: checked against every repository a job names.
    const config = readHostConfig(ctx, options.config, job.repo);
    const host = await hostFromConfig(ctx, config, { store: storeForJob(store, job.key) }, job.repo);
    try {
      const { envelope } = await host.evaluate("sweep", {
        repo: job.repo,
        wholeTree: true,
        candidatePolicyPath: candidatePolicyPaths(config),
      });
      return {
        outcome: "receipt",
        decision: envelope.decision,
        ...(envelope.receipt === undefined ? {} : { receiptId: envelope.receipt.id }),
      };
    } finally {
      await host.close();
    }
  } finally {
    await store.close();
  }
}

/** Record a job's final failure in the fact log (best effort: the queue keeps it failed either way). */
async function recordFailure(
  ctx: CliContext,
  options: WorkerOptions,
  job: PgBoss.JobWithMetadata,
  data: SweepJob | null,
  error: { code: string; message: string },
): Promise<void> {
  try {
    const config = readHostConfig(ctx, options.config);
    const store = await openJobStore(ctx, config, options.waitMs);
    try {
      await store.log.append([
        {
          kind: QUEUE_JOB_FAILED,
          record: {
            jobId: job.id,
            queue: SWEEP_QUEUE,
            repo: data?.repo ?? null,
            head: data?.head ?? null,
            key: data?.key ?? null,
            attempts: job.retryCount + 1,
            error,
          },
          index: data === null ? [] : [{ name: "queueJob", value: data.key }],
        },
      ]);
    } finally {
      await store.close();
    }
  } catch (e) {
    ctx.io.stderr(`asp worker: job ${inert(job.id)}: could not record its failure: ${inert(codeOf(e).message)}\n`);
  }
}

/** Take one job, run it, settle it in the queue. */
async function runOne(
  ctx: CliContext,
  options: WorkerOptions,
  boss: PgBoss,
  client: pg.Client,
  job: PgBoss.JobWithMetadata,
): Promise<JobOutcome> {
  const attempt = job.retryCount + 1;
  const last = job.retryCount >= job.retryLimit;
  let data: SweepJob | null = null;
  let r: Awaited<ReturnType<typeof sweepJob>>;
  // Only what the job itself throws fails it; the queue's own errors end the worker (the job
  // then expires and comes back), so a receipt is never followed by a failure fact.
  try {
    data = checkJobData(job.data);
    ctx.io.stderr(`asp worker: job ${inert(job.id)} ${inert(data.repo)} (attempt ${attempt})…\n`);
    r = await lockedSweep(ctx, options, client, data);
  } catch (error) {
    if (error instanceof QueueConnectionError) throw error.cause;
    const coded = codeOf(error);
    if (last) await recordFailure(ctx, options, job, data, coded);
    await boss.fail(SWEEP_QUEUE, job.id, coded);
    ctx.io.stderr(
      `asp worker: job ${inert(job.id)} attempt ${attempt} failed: ${inert(coded.code)}${last ? " (last attempt: failed)" : " (will be retried)"}\n`,
    );
    return {
      id: job.id,
      repo: data?.repo ?? null,
      key: data?.key ?? null,
      attempt,
      outcome: last ? "failed" : "retry",
      error: coded,
    };
  }
  await boss.complete(SWEEP_QUEUE, job.id, { outcome: r.outcome, receiptId: r.receiptId ?? null });
  ctx.io.stderr(
    `asp worker: job ${inert(job.id)} ${r.outcome === "receipt" ? `${inert(r.decision ?? "")}, receipt ${inert(r.receiptId ?? "-")}` : "already has its receipt: nothing written"}\n`,
  );
  return { id: job.id, repo: data.repo, key: data.key, attempt, ...r };
}

/** A failure of the queue's database connection, told apart from the job's own failures. */
class QueueConnectionError {
  constructor(readonly cause: unknown) {}
}

/** {@link sweepJob} under the job's advisory lock. */
async function lockedSweep(
  ctx: CliContext,
  options: WorkerOptions,
  client: pg.Client,
  data: SweepJob,
): Promise<Awaited<ReturnType<typeof sweepJob>>> {
  try {
    await lockJob(client, data.key);
  } catch (cause) {
    throw new QueueConnectionError(cause);
  }
  try {
    return await sweepJob(ctx, options, data);
  } finally {
    await unlockJob(client, data.key).catch(() => {});
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Run sweep jobs from the queue (`asp worker`): `concurrency` loops, each fetching one job at a
 * time, until the mode says stop. A job whose receipt the fact log already holds completes
 * without a second receipt; a failing job is retried with backoff and ends failed (with a
 * `queue.job-failed` fact) after the queue's maximum attempts; a job a crashed worker held is
 * expired by pg-boss maintenance and retried.
 * @throws UsageError `ASP_CLI_QUEUE_NO_DATABASE`, `ASP_CLI_QUEUE_NOT_MIGRATED`,
 *   `ASP_CLI_QUEUE_UNAVAILABLE`; ThsError from reading the host configuration.
 */
export async function runWorker(ctx: CliContext, options: WorkerOptions): Promise<WorkerSummary> {
  const url = queueUrl(readHostConfig(ctx, options.config));
  const boss = await openQueue(url, {
    maintenanceSeconds: options.maintenanceSeconds,
    onError: (e) => ctx.io.stderr(`asp worker: queue: ${inert(e.message)}\n`),
  });
  const outcomes: JobOutcome[] = [];
  const clients: pg.Client[] = [];
  try {
    const loop = async (): Promise<void> => {
      const client = new pg.Client({ connectionString: url, application_name: "asp-worker" });
      clients.push(client);
      client.on("error", () => {});
      await client.connect();
      for (;;) {
        const [job] = await boss.fetch<unknown>(SWEEP_QUEUE, { batchSize: 1, includeMetadata: true });
        if (job === undefined) {
          if (options.mode === "once") return;
          // Queued, retrying (not yet due) or running elsewhere: wait for it, it may come back.
          if (options.mode === "until-idle" && (await boss.getQueueSize(SWEEP_QUEUE, { before: "completed" })) === 0)
            return;
          await sleep(options.pollMs);
          continue;
        }
        outcomes.push(await runOne(ctx, options, boss, client, job as PgBoss.JobWithMetadata));
        if (options.mode === "once") return;
      }
    };
    await Promise.all(Array.from({ length: options.concurrency }, loop));
  } catch (cause) {
    if (isAspError(cause)) throw cause;
    // The queue's database went away under a loop (fetch, lock, connect): the jobs it held expire and come back.
    throw new UsageError(
      "ASP_CLI_QUEUE_UNAVAILABLE",
      `the queue database ${redactStoreLocation(url)} failed: ${codeOf(cause).message}`,
      {
        cause,
        category: "internal",
        data: { url: redactStoreLocation(url) },
      },
    );
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
    await closeQueue(boss);
  }
  const count = (o: JobOutcome["outcome"]) => outcomes.filter((j) => j.outcome === o).length;
  return {
    processed: outcomes.length,
    receipts: count("receipt"),
    alreadyDone: count("already-done"),
    retried: count("retry"),
    failed: count("failed"),
    jobs: outcomes,
  };
}
