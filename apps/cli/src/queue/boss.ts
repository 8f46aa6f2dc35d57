import { redactStoreLocation } from "@asp/store-postgres";
import type { HostConfig } from "@asp/ths";
import PgBoss from "pg-boss";
import { UsageError } from "../errors.js";
import { SWEEP_QUEUE } from "./jobs.js";

const POSTGRES_URL = /^postgres(ql)?:\/\//;

/**
 * The queue's database: the host configuration's `store` when it is a `postgres://` URL (one
 * database for receipts and jobs), else its `queue` field.
 * @throws UsageError `ASP_CLI_QUEUE_NO_DATABASE` when neither names one.
 */
export function queueUrl(config: Pick<HostConfig, "store" | "queue">): string {
  if (POSTGRES_URL.test(config.store)) return config.store;
  if (config.queue !== undefined && POSTGRES_URL.test(config.queue)) return config.queue;
  throw new UsageError(
    "ASP_CLI_QUEUE_NO_DATABASE",
    'the host configuration names no queue database: give it "store": "postgres://…" or "queue": "postgres://…"',
  );
}

/** The retry and expiry settings `asp worker --migrate` stores on the sweep queue. */
export interface SweepQueuePolicy {
  /** Attempts before a job ends failed (pg-boss `retryLimit` is this minus one). */
  readonly maxAttempts: number;
  /** First retry delay in seconds; doubled per attempt with jitter (pg-boss `retryBackoff`). */
  readonly retryDelaySeconds: number;
  /** How long a job may stay active before it counts as its worker's crash and is retried. */
  readonly expireSeconds: number;
}

/** Options of {@link openQueue}. */
export interface OpenQueueOptions {
  /** Run pg-boss maintenance (expire jobs of crashed workers, retries, archive) every this many seconds. */
  readonly maintenanceSeconds?: number;
  /** Where pg-boss's background errors go. */
  readonly onError?: (error: Error) => void;
}

function unavailable(url: string, cause: unknown): UsageError {
  return new UsageError(
    "ASP_CLI_QUEUE_UNAVAILABLE",
    `the queue database ${redactStoreLocation(url)} is unavailable: ${(cause as Error)?.message ?? String(cause)}`,
    { cause, category: "internal", data: { url: redactStoreLocation(url) } },
  );
}

function newBoss(url: string, migrate: boolean, options: OpenQueueOptions): PgBoss {
  const supervise = options.maintenanceSeconds !== undefined;
  const boss = new PgBoss({
    connectionString: url,
    application_name: "asp",
    max: 4,
    // The schema is installed and migrated only by `asp worker --migrate`, never at start-up.
    migrate,
    schedule: false,
    supervise,
    ...(supervise ? { maintenanceIntervalSeconds: options.maintenanceSeconds } : {}),
  });
  boss.on("error", (e) => options.onError?.(e));
  return boss;
}

/**
 * Connect to the queue and check its schema and the sweep queue are installed (nothing is
 * created or migrated here).
 * @throws UsageError `ASP_CLI_QUEUE_NOT_MIGRATED` (run `asp worker --migrate`),
 *   `ASP_CLI_QUEUE_UNAVAILABLE`.
 */
export async function openQueue(url: string, options: OpenQueueOptions = {}): Promise<PgBoss> {
  const boss = newBoss(url, false, options);
  try {
    await boss.start();
  } catch (cause) {
    await boss.stop({ graceful: false, wait: true }).catch(() => {});
    const message = (cause as Error)?.message ?? "";
    if (/not installed|requires migrations/.test(message)) {
      throw new UsageError(
        "ASP_CLI_QUEUE_NOT_MIGRATED",
        `the queue schema in ${redactStoreLocation(url)} is ${message.includes("migrations") ? "out of date" : "not installed"}: run asp worker --migrate`,
        { cause, data: { url: redactStoreLocation(url) } },
      );
    }
    throw unavailable(url, cause);
  }
  let queue: unknown;
  try {
    queue = await boss.getQueue(SWEEP_QUEUE);
  } catch (cause) {
    await closeQueue(boss);
    throw unavailable(url, cause);
  }
  if (queue === null) {
    await closeQueue(boss);
    throw new UsageError(
      "ASP_CLI_QUEUE_NOT_MIGRATED",
      `the queue ${SWEEP_QUEUE} does not exist in ${redactStoreLocation(url)}: run asp worker --migrate`,
      { data: { url: redactStoreLocation(url) } },
    );
  }
  return boss;
}

/** Stop a queue handle, waiting for its connections to close; never throws. */
export async function closeQueue(boss: PgBoss): Promise<void> {
  await boss.stop({ graceful: false, wait: true, close: true }).catch(() => {});
}

/** Outcome of {@link migrateQueue}. */
export interface MigrateQueueResult {
  readonly schemaVersion: number;
  readonly queue: string;
  readonly created: boolean;
  readonly policy: SweepQueuePolicy;
}

/**
 * Install or migrate pg-boss's schema (`pgboss`) and create or update the sweep queue with
 * `policy`: what `asp worker --migrate` does, explicitly, once per database and upgrade.
 * @throws UsageError `ASP_CLI_QUEUE_UNAVAILABLE`.
 */
export async function migrateQueue(url: string, policy: SweepQueuePolicy): Promise<MigrateQueueResult> {
  const boss = newBoss(url, true, {});
  try {
    await boss.start();
    const settings = {
      retryLimit: policy.maxAttempts - 1,
      retryDelay: policy.retryDelaySeconds,
      retryBackoff: true,
      expireInSeconds: policy.expireSeconds,
    };
    const existing = await boss.getQueue(SWEEP_QUEUE);
    if (existing === null) await boss.createQueue(SWEEP_QUEUE, { name: SWEEP_QUEUE, policy: "standard", ...settings });
    else await boss.updateQueue(SWEEP_QUEUE, { name: SWEEP_QUEUE, ...settings });
    return {
      schemaVersion: Number(await boss.schemaVersion()),
      queue: SWEEP_QUEUE,
      created: existing === null,
      policy,
    };
  } catch (cause) {
    throw unavailable(url, cause);
  } finally {
    await closeQueue(boss);
  }
}
