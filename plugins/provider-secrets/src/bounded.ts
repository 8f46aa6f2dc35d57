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

/** Scans one file at a time. */
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
    rules: rules.rules.map(({ regex: _compiled, ...rule }) => rule),
    allowlist: rules.allowlist,
  };
}

type WorkerReply =
  | { readonly type: "ready" }
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
 * after refusing a file larger than `maxBytes`. The worker starts on first use and is replaced
 * after a file that hit a bound.
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
  let current: { worker: Worker; ready: Promise<boolean> } | undefined;
  let nextId = 0;

  const start = (): { worker: Worker; ready: Promise<boolean> } => {
    const worker = new Worker(options.workerUrl, {
      workerData: { rules: spec },
      resourceLimits: { ...(options.resourceLimits ?? SCAN_RESOURCE_LIMITS) },
      // The worker needs none of the parent's Node flags (resolution conditions, inspector ...);
      // its limits are the resourceLimits above.
      execArgv: [],
      // The process's stdout is the protocol channel: nothing the worker prints may reach it.
      stdout: true,
      stderr: true,
    });
    worker.stdout.resume();
    worker.stderr.resume();
    worker.unref();
    const ready = new Promise<boolean>((resolve) => {
      const onMessage = (m: WorkerReply) => {
        if (m.type !== "ready") return;
        worker.off("message", onMessage);
        resolve(true);
      };
      worker.on("message", onMessage);
      worker.once("error", () => resolve(false));
      worker.once("exit", () => resolve(false));
    });
    return { worker, ready };
  };

  const discard = (w: Worker): void => {
    if (current?.worker === w) current = undefined;
    void w.terminate();
  };

  return {
    async scan(job, signal) {
      if (signal?.aborted) return { ok: false, reason: "cancelled" };
      if (job.bytes.length > maxBytes) return { ok: false, reason: "size" };
      current ??= start();
      const { worker, ready } = current;
      if (!(await ready)) {
        discard(worker);
        return { ok: false, reason: "crashed" };
      }
      const id = ++nextId;
      return new Promise<ScanOutcome>((resolve) => {
        const finish = (outcome: ScanOutcome, healthy: boolean): void => {
          clearTimeout(timer);
          worker.off("message", onMessage);
          worker.off("error", onError);
          worker.off("exit", onExit);
          signal?.removeEventListener("abort", onAbort);
          if (!healthy) discard(worker);
          resolve(outcome);
        };
        const onMessage = (m: WorkerReply) => {
          if (m.type === "result" && m.id === id) finish({ ok: true, diagnostics: m.diagnostics }, true);
          else if (m.type === "failed" && m.id === id) finish({ ok: false, reason: "crashed" }, true);
        };
        const onError = (error: Error & { code?: string }) =>
          finish({ ok: false, reason: error.code === "ERR_WORKER_OUT_OF_MEMORY" ? "memory" : "crashed" }, false);
        const onExit = () => finish({ ok: false, reason: "crashed" }, false);
        const onAbort = () => finish({ ok: false, reason: "cancelled" }, false);
        const timer = setTimeout(() => finish({ ok: false, reason: "deadline" }, false), deadlineMs);
        worker.on("message", onMessage);
        worker.on("error", onError);
        worker.on("exit", onExit);
        signal?.addEventListener("abort", onAbort, { once: true });
        worker.postMessage({
          id,
          path: job.path,
          bytes: job.bytes,
          fingerprints: job.fingerprints,
          values: job.values,
        });
      });
    },
    async close() {
      const w = current?.worker;
      current = undefined;
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
  port.on("message", async (job: ScanJob & { id: number }) => {
    try {
      const allowlist = compileAllowlist({ fingerprints: job.fingerprints, values: job.values });
      const diagnostics = await scanBlob(job.bytes, job.path, rules, allowlist);
      port.postMessage({ type: "result", id: job.id, diagnostics } satisfies WorkerReply);
    } catch {
      port.postMessage({ type: "failed", id: job.id } satisfies WorkerReply);
    }
  });
  port.postMessage({ type: "ready" } satisfies WorkerReply);
}
