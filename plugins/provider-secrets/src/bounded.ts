// Repository content is untrusted and the catalogue's patterns are third-party: a crafted file
// can make a regular expression backtrack for minutes or grow the heap. Each file is therefore
// scanned in a worker thread with a deadline and V8 resource limits; a file that hits either
// bound is reported as not scanned (the provider puts it in coverage.missing, status incomplete)
// and the worker is replaced. Nothing is ever counted as scanned that was not.

import { parentPort, type ResourceLimits, Worker, workerData } from "node:worker_threads";
import type { Diagnostic } from "@asp/contracts";
import { compileAllowlist } from "./allowlist.js";
import { loadRuleSet, type RuleSet, type RuleSetSpec } from "./rules.js";
import { scanBlob } from "./scan.js";

/** One file to scan, with the allowlist entries that travel to the worker as data. */
export interface ScanJob {
  readonly path: string;
  readonly bytes: Uint8Array;
  /** Allowlisted fingerprints (finding or secret). */
  readonly fingerprints: readonly string[];
  /** Published example values that are never reported. */
  readonly values: readonly string[];
}

/** Why a file was not scanned. */
export type ScanFailure = "size" | "deadline" | "memory" | "crashed" | "cancelled";

/** The outcome of one file's scan: its findings, or the bound it hit. */
export type ScanOutcome =
  | { readonly ok: true; readonly diagnostics: Diagnostic[] }
  | { readonly ok: false; readonly reason: ScanFailure };

/** Scans files; a caller may keep several scans in flight (they run one at a time, in order). */
export interface BlobScanner {
  /** Scan one file; never rejects (a failure is an outcome, so it cannot be mistaken for a pass). */
  scan(job: ScanJob, signal?: AbortSignal): Promise<ScanOutcome>;
  /** Release the worker, if any. */
  close(): Promise<void>;
}

/** Time one file's scan may take in the worker before it is abandoned (ms). */
export const FILE_SCAN_DEADLINE_MS = 5_000;

/**
 * Largest file scanned (bytes); a larger one is not scanned (`size`). Checked before the worker
 * sees it: an out-of-memory inside a worker can take the whole process down with it (V8 ends the
 * process on some large allocations despite `resourceLimits`), so the heap a scan can need is
 * kept far below the worker's limit by bounding its input.
 */
export const MAX_SCAN_BYTES = 8 * 1024 * 1024;

/** V8 limits of the scan worker: a file whose scan needs more is abandoned. */
export const SCAN_RESOURCE_LIMITS: Readonly<ResourceLimits> = Object.freeze({
  maxOldGenerationSizeMb: 256,
  maxYoungGenerationSizeMb: 32,
  codeRangeSizeMb: 64,
  stackSizeMb: 4,
});

/** Options of {@link createBoundedScanner}. */
export interface BoundedScannerOptions {
  /** The module the worker runs; it must call {@link runScanWorker} when `isMainThread` is false. */
  readonly workerUrl: URL;
  readonly rules: RuleSet;
  /** Default {@link FILE_SCAN_DEADLINE_MS}. */
  readonly fileDeadlineMs?: number;
  /** Default {@link SCAN_RESOURCE_LIMITS}. */
  readonly resourceLimits?: ResourceLimits;
  /** Default {@link MAX_SCAN_BYTES}. */
  readonly maxBytes?: number;
}

/** The data form of a compiled rule set, to rebuild it in the worker. */
function specOf(rules: RuleSet): RuleSetSpec {
  return {
    version: 1,
    rules: rules.rules.map(({ regex: _compiled, pathRegex: _path, ...rule }) => rule),
    allowlist: rules.allowlist,
  };
}

type WorkerReply =
  | { readonly type: "ready" }
  | { readonly type: "started"; readonly id: number }
  | { readonly type: "result"; readonly id: number; readonly diagnostics: Diagnostic[] }
  | { readonly type: "failed"; readonly id: number };

/** Scan in-process, unbounded: for tests and trusted input only. */
export function createInlineScanner(rules: RuleSet): BlobScanner {
  return {
    async scan(job) {
      try {
        const allowlist = compileAllowlist({ fingerprints: job.fingerprints, values: job.values });
        return { ok: true, diagnostics: await scanBlob(job.bytes, job.path, rules, allowlist) };
      } catch {
        return { ok: false, reason: "crashed" };
      }
    },
    async close() {},
  };
}

/**
 * A scanner that runs every file in a worker thread under a deadline and V8 resource limits,
 * after refusing a file larger than `maxBytes`. The worker starts on first use. Scans may be
 * queued: every queued file is posted to the worker at once and scanned in order, and the
 * deadline of a file starts when the worker says it started that file (so a long queue never
 * eats a file's time). A file that hits a bound is that file's outcome; the worker is replaced and
 * the files queued behind it are posted to the new one. A worker that dies before starting any
 * file (it could not load its rules) fails every queued file as `crashed`, never in a loop.
 *
 * @example
 * ```ts
 * // main.ts: one module is both the provider and its scan worker.
 * if (isMainThread) createSecretsProvider({ scanner: (rules) => createBoundedScanner({ workerUrl: new URL(import.meta.url), rules }) }).listen();
 * else runScanWorker();
 * ```
 */
export function createBoundedScanner(options: BoundedScannerOptions): BlobScanner {
  const deadlineMs = options.fileDeadlineMs ?? FILE_SCAN_DEADLINE_MS;
  const maxBytes = options.maxBytes ?? MAX_SCAN_BYTES;
  const spec = specOf(options.rules);

  interface Pending {
    readonly id: number;
    readonly job: ScanJob;
    readonly settle: (outcome: ScanOutcome) => void;
  }
  /** Files posted to the current worker and not settled, in the order the worker scans them. */
  let queue: Pending[] = [];
  let worker: Worker | undefined;
  /** The file the worker said it started, and its deadline timer. */
  let started: { id: number; timer: NodeJS.Timeout } | undefined;
  let nextId = 0;

  const post = (w: Worker, p: Pending): void => {
    w.postMessage({
      id: p.id,
      path: p.job.path,
      bytes: p.job.bytes,
      fingerprints: p.job.fingerprints,
      values: p.job.values,
    });
  };

  const settle = (id: number, outcome: ScanOutcome): void => {
    const i = queue.findIndex((p) => p.id === id);
    if (i < 0) return;
    const [p] = queue.splice(i, 1);
    if (started?.id === id) {
      clearTimeout(started.timer);
      started = undefined;
    }
    p?.settle(outcome);
  };

  /** Drop the worker; with `failing`, that file fails with `reason` and the rest go to a new worker. */
  const replace = (w: Worker, failing: number | undefined, reason: ScanFailure): void => {
    if (worker !== w) return;
    worker = undefined;
    if (started !== undefined) clearTimeout(started.timer);
    started = undefined;
    void w.terminate();
    if (failing === undefined) {
      // It died before starting any file: it cannot scan, so nothing queued will be scanned.
      for (const p of queue.splice(0)) p.settle({ ok: false, reason: "crashed" });
      return;
    }
    settle(failing, { ok: false, reason });
    if (queue.length > 0) {
      const next = start();
      for (const p of queue) post(next, p);
    }
  };

  const start = (): Worker => {
    const w = new Worker(options.workerUrl, {
      workerData: { rules: spec },
      resourceLimits: { ...(options.resourceLimits ?? SCAN_RESOURCE_LIMITS) },
      // The worker needs none of the parent's Node flags (resolution conditions, inspector ...);
      // its limits are the resourceLimits above.
      execArgv: [],
      // The process's stdout is the protocol channel: nothing the worker prints may reach it.
      stdout: true,
      stderr: true,
    });
    w.stdout.resume();
    w.stderr.resume();
    w.unref();
    w.on("message", (m: WorkerReply) => {
      if (worker !== w) return;
      if (m.type === "started") {
        if (started !== undefined) clearTimeout(started.timer);
        started = { id: m.id, timer: setTimeout(() => replace(w, m.id, "deadline"), deadlineMs) };
      } else if (m.type === "result") settle(m.id, { ok: true, diagnostics: m.diagnostics });
      else if (m.type === "failed") settle(m.id, { ok: false, reason: "crashed" });
    });
    w.on("error", (error: Error & { code?: string }) =>
      replace(w, started?.id, error.code === "ERR_WORKER_OUT_OF_MEMORY" ? "memory" : "crashed"),
    );
    w.on("exit", () => replace(w, started?.id, "crashed"));
    worker = w;
    return w;
  };

  return {
    scan(job, signal) {
      if (signal?.aborted) return Promise.resolve({ ok: false, reason: "cancelled" });
      if (job.bytes.length > maxBytes) return Promise.resolve({ ok: false, reason: "size" });
      return new Promise<ScanOutcome>((resolve) => {
        const id = ++nextId;
        const onAbort = (): void => {
          if (started?.id === id && worker !== undefined) replace(worker, id, "cancelled");
          else settle(id, { ok: false, reason: "cancelled" });
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        const p: Pending = {
          id,
          job,
          settle: (outcome) => {
            signal?.removeEventListener("abort", onAbort);
            resolve(outcome);
          },
        };
        queue.push(p);
        post(worker ?? start(), p);
      });
    },
    async close() {
      const w = worker;
      worker = undefined;
      if (started !== undefined) clearTimeout(started.timer);
      started = undefined;
      for (const p of queue.splice(0)) p.settle({ ok: false, reason: "cancelled" });
      queue = [];
      if (w !== undefined) await w.terminate();
    },
  };
}

/**
 * The worker side of {@link createBoundedScanner}: rebuild the rule set from `workerData`, answer
 * `ready`, then scan each posted file. Call it from the worker module when `isMainThread` is false.
 *
 * @throws SecretsError `ASP_SECRETS_INVALID_RULES` when the rule set it was given is invalid
 *   (the worker exits, and every file it was meant to scan is reported as not scanned).
 */
export function runScanWorker(): void {
  const port = parentPort;
  if (port === null) return;
  const rules = loadRuleSet((workerData as { rules: unknown }).rules);
  // Messages are handled one at a time, in order: a file is started only after the one before it
  // answered, so the host's deadline for a file starts with that file.
  let chain = Promise.resolve();
  port.on("message", (job: ScanJob & { id: number }) => {
    chain = chain.then(() => scanOne(job));
  });
  const scanOne = async (job: ScanJob & { id: number }): Promise<void> => {
    port.postMessage({ type: "started", id: job.id } satisfies WorkerReply);
    try {
      const allowlist = compileAllowlist({ fingerprints: job.fingerprints, values: job.values });
      const diagnostics = await scanBlob(job.bytes, job.path, rules, allowlist);
      port.postMessage({ type: "result", id: job.id, diagnostics } satisfies WorkerReply);
    } catch {
      port.postMessage({ type: "failed", id: job.id } satisfies WorkerReply);
    }
  };
  port.postMessage({ type: "ready" } satisfies WorkerReply);
}
