import { redactStoreLocation } from "@asp/store-postgres";
import type PgBoss from "pg-boss";
import { UsageError } from "../errors.js";
import { jobId, SWEEP_QUEUE, type SweepJob } from "./jobs.js";

/** One repository's line in {@link EnqueueResult}. */
export interface EnqueuedJob extends SweepJob {
  /** The pg-boss job id (derived from the key). */
  readonly id: string;
  /** False when a job with this key was already in the queue (queued, running, done or failed). */
  readonly enqueued: boolean;
}

/** What `asp sweep --queue` reports. */
export interface EnqueueResult {
  readonly enqueued: number;
  readonly duplicate: number;
  readonly jobs: readonly EnqueuedJob[];
}

/**
 * Send one job per repository, each under the id its key gives: a job whose id is already in the
 * queue is not inserted again (pg-boss inserts `ON CONFLICT DO NOTHING`) and counts as a duplicate.
 * @throws UsageError `ASP_CLI_QUEUE_UNAVAILABLE` when the database fails mid-way (what was sent
 *   stays sent; sending again is idempotent).
 */
export async function enqueueSweeps(boss: PgBoss, url: string, jobs: readonly SweepJob[]): Promise<EnqueueResult> {
  const out: EnqueuedJob[] = [];
  for (const job of jobs) {
    const id = jobId(job.key);
    let sent: string | null;
    try {
      sent = await boss.send(SWEEP_QUEUE, { repo: job.repo, head: job.head, key: job.key }, { id });
    } catch (cause) {
      throw new UsageError("ASP_CLI_QUEUE_UNAVAILABLE", `enqueueing failed after ${out.length} job(s)`, {
        cause,
        category: "internal",
        data: { url: redactStoreLocation(url), sent: out.length },
      });
    }
    out.push({ ...job, id, enqueued: sent !== null });
  }
  const enqueued = out.filter((j) => j.enqueued).length;
  return { enqueued, duplicate: out.length - enqueued, jobs: out };
}
