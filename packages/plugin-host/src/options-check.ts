import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { Ajv2020 } from "ajv/dist/2020.js";
import { PluginError } from "./errors.js";

/** What one check of options against a schema found (the same in this thread and in a worker). */
interface OptionsVerdict {
  readonly ok?: boolean;
  readonly detail?: string;
  readonly compileError?: string;
}

function verdictOf(schema: unknown, options: unknown): OptionsVerdict {
  try {
    const fn = new Ajv2020({ allErrors: true, strict: false }).compile(schema as object);
    const ok = fn(options) === true;
    const first = fn.errors?.[0];
    return { ok, detail: first ? `${first.instancePath || "/"} ${first.message ?? ""}` : "" };
  } catch (error) {
    return { compileError: (error as Error).message };
  }
}

function throwOn(id: string, verdict: OptionsVerdict, cause?: unknown): void {
  if (verdict.compileError !== undefined) {
    throw new PluginError(
      "ASP_PLUGIN_LOAD_FAILED",
      `${id}: its optionsSchema does not compile: ${verdict.compileError}`,
      {
        data: { id },
        ...(cause === undefined ? {} : { cause }),
      },
    );
  }
  if (verdict.ok !== true) {
    throw new PluginError("ASP_PLUGIN_BAD_OPTIONS", `options for ${id} are invalid: ${verdict.detail ?? ""}`, {
      data: { id },
    });
  }
}

/**
 * Check a plugin's options from trusted configuration against the `optionsSchema` its declaration
 * gives (ajv, JSON Schema 2020-12), as `loadPlugins` does before `init`. This runs on the calling
 * thread: use it only for a schema from code that already runs in this process. A schema that
 * comes from outside (an out-of-process verifier's declaration) goes to
 * {@link checkPluginOptionsOffThread}.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_OPTIONS` naming the first failing pointer;
 *   `ASP_PLUGIN_LOAD_FAILED` when the schema does not compile.
 */
export function checkPluginOptions(id: string, schema: unknown, options: unknown): void {
  throwOn(id, verdictOf(schema, options));
}

/** Bounds of {@link checkPluginOptionsOffThread}. */
export interface OffThreadOptionsCheck {
  /** Terminate the check after this long (default 5000 ms). */
  readonly timeoutMs?: number;
  /** The worker's V8 heap bound (default 64 MiB). */
  readonly maxHeapMb?: number;
}

const AJV_2020 = createRequire(import.meta.url).resolve("ajv/dist/2020.js");

/** The worker: one ajv compile and validate, its verdict posted back. CommonJS, as eval'd workers are. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { Ajv2020 } = require(workerData.ajv);
let verdict;
try {
  const fn = new Ajv2020({ allErrors: true, strict: false }).compile(workerData.schema);
  const ok = fn(workerData.options) === true;
  const first = fn.errors && fn.errors[0];
  verdict = { ok, detail: first ? (first.instancePath || "/") + " " + (first.message || "") : "" };
} catch (error) {
  verdict = { compileError: String((error && error.message) || error) };
}
parentPort.postMessage(verdict);
`;

/**
 * {@link checkPluginOptions} for a schema this process must not trust with its own thread: the
 * `optionsSchema` an out-of-process verifier reports is chosen by the plugin's author, and ajv
 * runs its `pattern`s as regular expressions over the trusted options (a backtracking pattern
 * takes hours on a 40-character URL) and compiles it to code (a huge schema takes memory). The
 * check runs in a worker thread with a bounded heap and is terminated at `timeoutMs`, so the
 * host's event loop keeps turning and a hostile schema costs at most the deadline.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_OPTIONS` naming the first failing pointer;
 *   `ASP_PLUGIN_LOAD_FAILED` when the schema does not compile, the check passes its deadline
 *   (`data.timeoutMs`) or the worker runs out of memory.
 */
export async function checkPluginOptionsOffThread(
  id: string,
  schema: unknown,
  options: unknown,
  bounds: OffThreadOptionsCheck = {},
): Promise<void> {
  const timeoutMs = bounds.timeoutMs ?? 5000;
  const maxHeapMb = bounds.maxHeapMb ?? 64;
  let worker: Worker;
  try {
    worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { ajv: AJV_2020, schema, options },
      resourceLimits: { maxOldGenerationSizeMb: maxHeapMb, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
      stdout: true,
      stderr: true,
    });
  } catch (error) {
    // workerData is structured-cloned: a value that cannot be (never from JSON) is a bad schema.
    throw new PluginError(
      "ASP_PLUGIN_LOAD_FAILED",
      `${id}: its optionsSchema cannot be checked: ${(error as Error).message}`,
      {
        data: { id },
        cause: error,
      },
    );
  }
  const verdict = await new Promise<OptionsVerdict | PluginError>((resolve) => {
    const timer = setTimeout(() => {
      resolve(
        new PluginError(
          "ASP_PLUGIN_LOAD_FAILED",
          `${id}: checking the options against its optionsSchema took longer than ${timeoutMs} ms (a pattern that backtracks, or a schema too big to compile); the check was stopped`,
          { data: { id, timeoutMs } },
        ),
      );
    }, timeoutMs);
    worker.once("message", (v: OptionsVerdict) => {
      clearTimeout(timer);
      resolve(v);
    });
    worker.once("error", (error: Error) => {
      clearTimeout(timer);
      resolve(
        new PluginError("ASP_PLUGIN_LOAD_FAILED", `${id}: checking its optionsSchema failed: ${error.message}`, {
          data: { id },
          cause: error,
        }),
      );
    });
    worker.once("exit", (code) => {
      clearTimeout(timer);
      resolve(
        new PluginError(
          "ASP_PLUGIN_LOAD_FAILED",
          `${id}: checking its optionsSchema ended without an answer (exit ${code})`,
          {
            data: { id },
          },
        ),
      );
    });
  });
  await worker.terminate();
  if (verdict instanceof PluginError) throw verdict;
  throwOn(id, verdict);
}
