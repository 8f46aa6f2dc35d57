import { lstatSync } from "node:fs";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { Worker } from "node:worker_threads";

/**
 * `lstat` many paths on two threads. Node's promise and callback `lstat` cost more on the main
 * thread than the syscall they hand to libuv's pool (measured: 10,000 of them take 1.5-4x as long
 * as a `lstatSync` loop), so the main thread keeps calling `lstatSync` while one helper worker
 * thread does the same. Paths go out in jobs of 1,024 while the tree is still being listed; both
 * threads claim chunks of a job from its shared atomic counter and write into its shared arrays. The main thread never depends on the worker: it claims whatever is left,
 * does not wait for a worker that has not claimed anything, and re-does any entry the worker left
 * unfinished (a worker that failed or exited). The worker is started on first use and `unref`ed
 * while idle, so it never keeps a process alive.
 */

/** Numbers per path: size, mtimeMs, ctimeMs, ino, mode. */
const STAT_FIELDS = 5;

/** The lstat numbers a stat cache row compares. */
export interface StatNumbers {
  size: number;
  mtimeMs: number;
  ctimeMs: number;
  ino: number;
  mode: number;
}

/** Per-path outcome of {@link StatQueue.read}. */
export const STAT_PENDING = 0;
export const STAT_OK = 1;
/** ENOENT, ENOTDIR: the path is gone. */
export const STAT_MISSING = 2;
/** Any other error: the caller stats the path again itself to get (and report) the error. */
export const STAT_FAILED = 3;

/** Below this many paths the worker's message round trip is not worth it. */
export const PARALLEL_MIN = 2048;
/** Paths per claim: small enough to balance, large enough to keep atomics off the profile. */
const CHUNK = 128;
/** Jobs the main thread works through between two turns of the event loop. */
const YIELD_JOBS = 8;

/** `control[0]`: the next index to claim; `control[1]`: entries done. */
const DONE = 1;

interface Job {
  readonly id: number;
  readonly chunk: number;
  readonly paths: readonly string[];
  readonly control: Int32Array;
  readonly fields: Float64Array;
  readonly status: Int32Array;
}

/**
 * The loop both threads run. The worker runs this function's own source, so it refers to
 * nothing but its parameters and globals (the status codes are literals: 1 ok, 2 missing,
 * 3 failed). Should a tool ever rewrite it into something the worker cannot run, the worker
 * fails, and the main thread does all the work.
 */
function claimAndStat(job: Job, lstat: typeof lstatSync, maxChunks: number): boolean {
  const paths = job.paths;
  const control = job.control;
  const fields = job.fields;
  const status = job.status;
  const n = paths.length;
  for (let c = 0; c < maxChunks; c++) {
    const start = Atomics.add(control, 0, job.chunk);
    if (start >= n) return false;
    const end = Math.min(n, start + job.chunk);
    for (let i = start; i < end; i++) {
      try {
        const st = lstat(paths[i] as string, { throwIfNoEntry: false });
        if (st === undefined) status[i] = 2;
        else {
          const o = i * 5;
          fields[o] = st.size;
          fields[o + 1] = st.mtimeMs;
          fields[o + 2] = st.ctimeMs;
          fields[o + 3] = st.ino;
          fields[o + 4] = st.mode;
          status[i] = 1;
        }
      } catch (error) {
        const code = (error as { code?: unknown } | null)?.code;
        status[i] = code === "ENOENT" || code === "ENOTDIR" ? 2 : 3;
      }
    }
    // Seq-cst: whoever reads control[1] == n also sees every field and status written before it.
    Atomics.add(control, 1, end - start);
  }
  return true;
}

const WORKER_SOURCE = `"use strict";
const { parentPort } = require("node:worker_threads");
const { lstatSync } = require("node:fs");
const claimAndStat = ${claimAndStat.toString()};
parentPort.on("message", (job) => {
  claimAndStat(job, lstatSync, Infinity);
  parentPort.postMessage(job.id);
});
`;

/** The helper thread and the jobs waiting for its answer. */
class Helper {
  readonly #worker: Worker;
  readonly #waiting = new Map<number, () => void>();
  #dead = false;

  constructor() {
    this.#worker = new Worker(WORKER_SOURCE, { eval: true, name: "asp-evidence-lstat" });
    this.#worker.on("message", (id: number) => this.#settle(id));
    const die = (): void => {
      this.#dead = true;
      if (helper === this) helper = undefined;
      for (const id of [...this.#waiting.keys()]) this.#settle(id);
    };
    this.#worker.on("error", () => {
      parallel = false; // the worker cannot run here: stop starting new ones
      die();
    });
    this.#worker.on("exit", die);
    // Last: adding a "message" listener refs the worker's port again.
    this.#worker.unref();
  }

  get dead(): boolean {
    return this.#dead;
  }

  post(job: Job): void {
    this.#worker.postMessage(job);
  }

  /** Resolves when the worker has answered job `id` (or died). Keeps the process alive meanwhile. */
  answered(id: number): Promise<void> {
    if (this.#dead) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.#waiting.size === 0) this.#worker.ref();
      this.#waiting.set(id, resolve);
    });
  }

  #settle(id: number): void {
    const resolve = this.#waiting.get(id);
    if (resolve === undefined) return; // the main thread finished without waiting
    this.#waiting.delete(id);
    if (this.#waiting.size === 0) this.#worker.unref();
    resolve();
  }

  /** Stop the thread (tests). */
  terminate(): Promise<number> {
    return this.#worker.terminate();
  }
}

let helper: Helper | undefined;
let nextId = 0;
let parallel = true;

/** Paths per job: a power of two, so a path's job and slot are a shift and a mask. */
const BATCH_SHIFT = 10;
const BATCH = 1 << BATCH_SHIFT;

function newJob(paths: readonly string[]): Job {
  const n = paths.length;
  return {
    id: nextId++,
    chunk: CHUNK,
    paths,
    control: new Int32Array(new SharedArrayBuffer(8)),
    fields: new Float64Array(new SharedArrayBuffer(n * STAT_FIELDS * 8)),
    status: new Int32Array(new SharedArrayBuffer(n * 4)),
  };
}

/**
 * Paths to `lstat` (never following links), added while a tree is listed. Once there are
 * `minParallel` of them, every full batch of 1,024 goes to the helper thread as soon as it is
 * complete, so the helper stats while the main thread is still reading directories; `finish`
 * then has the main thread claim what the helper has not, and settles every path.
 */
export class StatQueue {
  readonly #paths: string[] = [];
  readonly #jobs: Job[] = [];
  readonly #minParallel: number;
  #worker: Helper | undefined;

  constructor(minParallel = PARALLEL_MIN) {
    this.#minParallel = minParallel;
  }

  get size(): number {
    return this.#paths.length;
  }

  /** Queue a path; returns its index. */
  add(path: string): number {
    const i = this.#paths.length;
    this.#paths.push(path);
    const n = i + 1;
    if (n % BATCH === 0 && n >= this.#minParallel && this.#start()) {
      while (this.#jobs.length < n >> BATCH_SHIFT) this.#post(this.#jobs.length << BATCH_SHIFT, BATCH);
    }
    return i;
  }

  /** Stat every queued path; then read them with {@link status} and {@link fields}. */
  async finish(): Promise<void> {
    const n = this.#paths.length;
    const posted = this.#jobs.length << BATCH_SHIFT;
    for (let start = posted; start < n; start += BATCH) {
      const job = newJob(this.#paths.slice(start, Math.min(n, start + BATCH)));
      this.#jobs.push(job);
    }
    // Yield between jobs now and then, so a host process stays responsive during a large tree.
    for (let k = 0; k < this.#jobs.length; k++) {
      claimAndStat(this.#jobs[k] as Job, lstatSync, Infinity);
      if (k % YIELD_JOBS === YIELD_JOBS - 1) await yieldToLoop();
    }
    const worker = this.#worker;
    for (const job of this.#jobs) {
      const n = job.paths.length;
      // The helper holds claimed chunks: it is running and finishes them within a chunk's time.
      if (worker !== undefined && Atomics.load(job.control, DONE) < n) await worker.answered(job.id);
      if (Atomics.load(job.control, DONE) < n) {
        // The helper died holding a chunk: re-do what it left.
        for (let i = 0; i < n; i++) if (job.status[i] === STAT_PENDING) statOne(job, i);
      }
    }
  }

  /**
   * Path `i`'s outcome after {@link finish}: `STAT_OK` (its numbers copied into `into`),
   * `STAT_MISSING` or `STAT_FAILED`.
   */
  read(i: number, into: StatNumbers): number {
    const job = this.#jobs[i >>> BATCH_SHIFT] as Job;
    const k = i & (BATCH - 1);
    const status = job.status[k] as number;
    if (status === STAT_OK) {
      const f = job.fields;
      const o = k * STAT_FIELDS;
      into.size = f[o] as number;
      into.mtimeMs = f[o + 1] as number;
      into.ctimeMs = f[o + 2] as number;
      into.ino = f[o + 3] as number;
      into.mode = f[o + 4] as number;
    }
    return status;
  }

  path(i: number): string {
    return this.#paths[i] as string;
  }

  /** Whether the helper runs for this queue (starting it on first use). */
  #start(): boolean {
    if (this.#worker !== undefined) return true;
    if (!parallel) return false;
    try {
      helper ??= new Helper();
      this.#worker = helper;
      return true;
    } catch {
      parallel = false; // no worker threads in this runtime: the main thread does it all
      return false;
    }
  }

  #post(start: number, count: number): void {
    const job = newJob(this.#paths.slice(start, start + count));
    this.#jobs.push(job);
    this.#worker?.post(job);
  }
}

/** Stat entry `i` of a job on this thread (the helper left it). */
function statOne(job: Job, i: number): void {
  const one: Job = {
    id: -1,
    chunk: 1,
    paths: [job.paths[i] as string],
    control: new Int32Array(2),
    fields: new Float64Array(STAT_FIELDS),
    status: new Int32Array(1),
  };
  claimAndStat(one, lstatSync, 1);
  job.fields.set(one.fields, i * STAT_FIELDS);
  job.status[i] = one.status[0] as number;
}

/** Test hooks: turn the helper thread off or on, and stop it. */
export const statPoolForTests = {
  setParallel(on: boolean): void {
    parallel = on;
  },
  async stop(): Promise<void> {
    parallel = true;
    const h = helper;
    helper = undefined;
    if (h !== undefined) await h.terminate();
  },
  get running(): boolean {
    return helper !== undefined && !helper.dead;
  },
};
