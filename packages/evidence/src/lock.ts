import { readFile, rename, rm, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { EvidenceError } from "./errors.js";
import { HOLDER_FILE } from "./layout.js";

/**
 * Who holds a store: level's `LOCK` is an exclusive OS lock (released when the holder exits,
 * even by SIGKILL) but it does not say who holds it. The holder writes its pid beside it, so
 * a process that waits can name the holder.
 */

/** What a waiting opener reports, about once a second, through `onWait`. */
export interface WaitProgress {
  /** Pid of the process holding the store, when it could be read and that process is alive. */
  readonly pid: number | null;
  /** How long this opener has waited so far (ms). */
  readonly waitedMs: number;
  /** The wait it will give up after (ms). */
  readonly timeoutMs: number;
}

/** The default bound on waiting for a store another process holds (ms). */
export const DEFAULT_WAIT_MS = 30_000;

/** True when a process with this pid exists (it may belong to another user). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The holder's pid, when the holder file names a live process. */
export async function readHolderPid(dir: string): Promise<number | null> {
  try {
    const v = JSON.parse(await readFile(join(dir, HOLDER_FILE), "utf8")) as { pid?: unknown };
    return typeof v.pid === "number" && Number.isSafeInteger(v.pid) && v.pid > 0 && alive(v.pid) ? v.pid : null;
  } catch {
    return null;
  }
}

/** Record this process as the holder (atomic replace; not synced: it is advice, not data). */
export async function writeHolder(dir: string): Promise<void> {
  const tmp = join(dir, `${HOLDER_FILE}.${process.pid}.tmp`);
  await writeFile(tmp, `${JSON.stringify({ pid: process.pid, host: hostname(), since: new Date().toISOString() })}\n`);
  await rename(tmp, join(dir, HOLDER_FILE));
}

/** Remove the holder file, while the lock is still held (so no later holder's file is removed). */
export async function removeHolder(dir: string): Promise<void> {
  await rm(join(dir, HOLDER_FILE), { force: true });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Call `attempt` until it stops failing with `locked`, for at most `timeoutMs`, reporting
 * progress about once a second. Polls with jittered backoff (25 ms up to 250 ms), so a store
 * released by one of many waiters is taken by the next quickly.
 *
 * @throws EvidenceError `ASP_EVIDENCE_STORE_LOCKED` with `data.pid` (the holder) and
 *   `data.waitedMs` once the wait runs out.
 */
export async function waitForLock<T>(
  location: string,
  attempt: () => Promise<T | "locked">,
  timeoutMs: number,
  onWait: ((progress: WaitProgress) => void) | undefined,
): Promise<T> {
  const started = Date.now();
  let delay = 25;
  let reported = Number.NEGATIVE_INFINITY;
  for (;;) {
    const got = await attempt();
    if (got !== "locked") return got;
    const waitedMs = Date.now() - started;
    const pid = await readHolderPid(location);
    if (waitedMs >= timeoutMs) {
      throw new EvidenceError(
        "ASP_EVIDENCE_STORE_LOCKED",
        `the evidence store at ${location} is held by ${pid === null ? "another process" : `process ${pid}`}; gave up after waiting ${Math.round(waitedMs / 1000)} s`,
        { data: { path: location, pid, waitedMs, timeoutMs } },
      );
    }
    if (onWait !== undefined && waitedMs - reported >= 1000) {
      reported = waitedMs;
      onWait({ pid, waitedMs, timeoutMs });
    }
    await sleep(Math.min(delay * (0.5 + Math.random()), Math.max(1, timeoutMs - waitedMs)));
    delay = Math.min(delay * 2, 250);
  }
}
