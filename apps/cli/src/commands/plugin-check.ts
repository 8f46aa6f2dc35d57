// reflect-metadata must be evaluated before tsyringe (tsyringe throws at import otherwise).
import "reflect-metadata";
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { ActionResult, EnginePortStep, Policy } from "@asp/contracts";
import {
  digestPlugin,
  type Engine,
  loadPlugins,
  type PluginLoadResult,
  type PluginPolicy,
  readPluginManifest,
  readTrustRoots,
  registerPlugins,
  removePluginCache,
  type Sandbox,
  TOKENS,
  type TrustRoot,
  type Verifier,
  type VerifyRequest,
} from "@asp/plugin-host";
import { loadPolicy } from "@asp/ths";
import type { Command } from "commander";
import { container } from "tsyringe";
import type { CliContext } from "../context.js";
import { type CliErrorCode, UsageError } from "../errors.js";
import { EXIT } from "../exit-codes.js";
import { inert } from "../terminal.js";

/** One step of {@link checkPlugin}: what was checked, and the code of its failure. */
export interface PluginCheckStep {
  /** `load` (signature, digest, manifest, grant, brand), `init`, or the port method exercised (`review`, `guardian`, `launch`, `stage`, `recover`, `run`). */
  readonly id: string;
  readonly status: "pass" | "fail";
  readonly detail: string;
  /** The failure's code (`ASP_PLUGIN_*` from `@asp/plugin-host`, or `ASP_CLI_PLUGIN_*`); absent on pass. */
  readonly code?: string;
}

/** What {@link checkPlugin} found. */
export interface PluginCheckReport {
  readonly dir: string;
  readonly id: string;
  readonly version: string;
  readonly kind: "verifier" | "sandbox" | "engine";
  /** The folder's tree digest (what the signature signs and a policy pins). */
  readonly digest: string;
  /** `policy`: the grant came from `--policy`; `manifest`: none was given, the manifest's capabilities were granted for the check. */
  readonly grantFrom: "policy" | "manifest";
  /** True when every step passed. */
  readonly passed: boolean;
  readonly steps: readonly PluginCheckStep[];
}

/** Options of {@link checkPlugin}. */
export interface CheckPluginOptions {
  /** The packed, signed plugin folder. */
  readonly dir: string;
  /** The keys the host would trust (`--trust`). */
  readonly trustRoots: readonly TrustRoot[];
  /** A trusted policy whose `plugins[]` must grant the plugin; default: a grant of exactly the manifest's id, digest and capabilities. */
  readonly policy?: PluginPolicy;
  /** Options for the plugin's `init`, as the host configuration would give them (validated against its `optionsSchema`). */
  readonly pluginOptions?: unknown;
  /** Bound of each port call in milliseconds (default 5000). */
  readonly timeoutMs?: number;
}

/** A coded failure of a step (the plugin's own throw is wrapped as `ASP_CLI_PLUGIN_THREW`). */
class StepFailure extends Error {
  constructor(
    readonly code: CliErrorCode | "ASP_PLUGIN_LOAD_FAILED",
    message: string,
  ) {
    super(message);
  }
}

/** An engine's own coded `failed` step, reported under its code. */
class EngineRunFailed extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^ASP_[A-Z0-9_]+$/.test(code) ? code : "ASP_CLI_PLUGIN_THREW";
}

function messageOf(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return "an unprintable error";
  }
}

/**
 * `call()`, bounded: a port that never answers fails the step with `ASP_CLI_PLUGIN_TIMEOUT`, and
 * the signal it was handed aborts then (an engine's run stops at it).
 */
async function bounded<T>(what: string, timeoutMs: number, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const controller = new AbortController();
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new StepFailure("ASP_CLI_PLUGIN_TIMEOUT", `${what} did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([call(controller.signal), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The grant a check uses without `--policy`: exactly the manifest's id, digest and capabilities. */
function selfGrant(dir: string): Policy {
  const { manifest } = readPluginManifest(dir);
  return {
    apiVersion: "asp.policy/v1",
    requirements: [],
    providers: [],
    grants: [],
    plugins: [{ id: manifest.id, digest: digestPlugin(dir).digest, capabilities: [...manifest.capabilities] }],
  } as Policy;
}

/** Step `load`: verify and import the folder exactly as `loadPlugins` does for a host. */
async function loadStep(
  dir: string,
  options: CheckPluginOptions,
  scratch: string,
): Promise<{ result: PluginLoadResult; step: PluginCheckStep }> {
  const result = await loadPlugins({
    dirs: [dir],
    trustRoots: options.trustRoots,
    policy: options.policy ?? selfGrant(dir),
    cacheDir: join(scratch, "cache"),
    kinds: ["verifier", "sandbox", "engine"],
    ...(options.pluginOptions === undefined
      ? {}
      : { pluginOptions: { [readPluginManifest(dir).manifest.id]: options.pluginOptions } }),
  });
  const refused = result.refused[0];
  if (refused !== undefined) {
    return { result, step: { id: "load", status: "fail", detail: refused.message, code: refused.code } };
  }
  const loaded = result.verifiers[0] ?? result.sandboxes[0] ?? result.engines?.[0];
  const e = loaded?.evidence;
  return {
    result,
    step: {
      id: "load",
      status: "pass",
      detail: `signature (key ${e?.keyId}), digest, manifest, grant (${e?.capabilities.join(", ")}) and the default export's brand verified`,
    },
  };
}

/** Step `init`: build the port through `registerPlugins`, which wraps every answer in its validator. */
function initStep(result: PluginLoadResult): { port: Verifier | Sandbox | Engine } {
  const child = container.createChildContainer();
  registerPlugins(child, result, {
    clock: { now: () => new Date() },
    // The check serves no content: a verifier asking for a blob gets "not in the store".
    content: { read: async () => null },
  });
  const port =
    result.verifiers.length > 0
      ? child.resolveAll(TOKENS.Verifier)[0]
      : (result.engines ?? []).length > 0
        ? child.resolveAll(TOKENS.Engine)[0]
        : child.resolveAll(TOKENS.Sandbox)[0];
  if (port === undefined) throw new StepFailure("ASP_PLUGIN_LOAD_FAILED", "nothing was registered");
  return { port };
}

/** The requests a verifier is asked once each, by the capability that allows it. */
const SAMPLE_REQUESTS: Readonly<Record<"review" | "guardian", VerifyRequest>> = {
  review: { kind: "review", subject: { title: "asp plugin check", text: "a sample subject to review\n" } },
  guardian: {
    kind: "guardian",
    actionDigest: `sha256:${"0".repeat(64)}`,
    actionClass: "asp.plugin-check",
    subject: { command: "true" },
  },
};

/** The most steps the check reads from an engine's sample run before it stops the run. */
const ENGINE_CHECK_STEPS = 256;

/** What the check answers every action an engine proposes: it runs no tool. */
const CHECK_REFUSAL: ActionResult = {
  status: "refused",
  action_digest: null,
  code: "ASP_CLI_PLUGIN_CHECK",
  reason: "asp plugin check runs no tool; answer without tools",
};

/**
 * Step `run`: one sample run of an engine, read as a host reads it (every step checked by
 * plugin-host), every proposed action refused, to its terminal step. A `failed` step fails the
 * check step with the engine's own code; a run still going after {@link ENGINE_CHECK_STEPS} steps
 * is stopped. `signal` aborts it (the check's deadline).
 */
async function engineRun(port: Engine, signal: AbortSignal): Promise<string> {
  const it = port.run({
    run: { root_frame_id: "asp-plugin-check", branch_id: "check", turn_id: "check-1", execution_id: "check-1" },
    task: "asp plugin check: reply with the single word ready.",
    tools: [
      {
        name: "read_file",
        description: "Read a file of the repository (this check refuses every call).",
        parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
      },
    ],
    signal,
  });
  const counts = new Map<string, number>();
  let last: EnginePortStep | undefined;
  try {
    for (let n = 0; n < ENGINE_CHECK_STEPS; n++) {
      const r = await it.next(last?.kind === "action" ? CHECK_REFUSAL : undefined);
      if (r.done) break;
      last = r.value;
      counts.set(last.kind, (counts.get(last.kind) ?? 0) + 1);
    }
  } finally {
    await it.return?.();
  }
  const seen = [...counts].map(([k, c]) => `${k} ${c}`).join(", ");
  if (last?.kind === "failed")
    throw new EngineRunFailed(last.code, `the run failed (${last.outcome}): ${last.message}`);
  if (last === undefined || !["completion", "max_turns", "cancelled"].includes(last.kind)) {
    throw new StepFailure("ASP_CLI_PLUGIN_TIMEOUT", `the run did not end within ${ENGINE_CHECK_STEPS} steps (${seen})`);
  }
  return `ended ${last.kind} after ${seen}; every step valid, every action refused`;
}

/** Each port method the plugin implements, called once with a sample request. */
function exercises(
  port: Verifier | Sandbox | Engine,
  scratch: string,
): Array<{ id: string; call: (signal: AbortSignal) => Promise<string> }> {
  if ("run" in port) return [{ id: "run", call: (signal) => engineRun(port, signal) }];
  if ("verify" in port) {
    return (["review", "guardian"] as const)
      .filter((c) => port.capabilities.includes(c))
      .map((c) => ({
        id: c,
        call: async () => {
          const r = await port.verify(SAMPLE_REQUESTS[c]);
          return r.kind === "review"
            ? `${r.verdict}, ${r.findings.length} finding(s), schema-valid`
            : `${r.decision} (risk ${r.risk}), schema-valid`;
        },
      }));
  }
  const out: Array<{ id: string; call: () => Promise<string> }> = [];
  const { launch, stage, recover } = port;
  if (launch !== undefined) {
    out.push({
      id: "launch",
      call: async () => {
        const r = await launch({
          executable: process.execPath,
          args: [join(scratch, "provider", "main.js")],
          cwd: join(scratch, "provider"),
          env: { PATH: "/usr/bin:/bin" },
          readOnly: [join(scratch, "provider")],
          deny: [join(scratch, "repo")],
        });
        return `mode ${r.mode}${r.directWrite ? ", direct write" : ""}: ${r.mechanism}${r.reason === undefined ? "" : ` (${r.reason})`}; valid for its grant`;
      },
    });
  }
  if (stage !== undefined) {
    out.push({
      id: "stage",
      call: async () => {
        const r = await stage({
          root: join(scratch, "repo"),
          writes: [{ path: "asp-plugin-check.txt", content: new TextEncoder().encode("checked\n") }],
          journalDir: join(scratch, "journal"),
        });
        return `applied ${r.applied}, guarantee ${r.guarantee}; valid for its grant`;
      },
    });
  }
  if (recover !== undefined) {
    out.push({
      id: "recover",
      call: async () =>
        `outcome ${(await recover({ root: join(scratch, "repo"), journalDir: join(scratch, "journal") })).outcome}`,
    });
  }
  return out;
}

/**
 * Check a packed, signed verifier, sandbox or engine plugin as a host would use it: load the
 * folder with `loadPlugins` (signature against `trustRoots`, tree digest, manifest, policy grant,
 * the brand of the entry's default export), build its port with `registerPlugins`, and call each
 * port method it implements once with a sample request, every answer validated as the host
 * validates it (`plugin-verify-response`; `checkLaunchResult` / `checkStageResult` against the
 * grant; each engine step against `EnginePortStep`). An engine gets one sample run (a task, one
 * offered tool, every proposed action refused) read to its terminal step. What `asp conformance`
 * is to a provider. The plugin's code runs in this process, as in a host.
 *
 * Failures are reported per step with their code: `ASP_PLUGIN_*` refusals and
 * `ASP_PLUGIN_BAD_OUTPUT` / `ASP_PLUGIN_FORBIDDEN_PORT` / `ASP_PLUGIN_LOAD_FAILED` from
 * `@asp/plugin-host`; an engine's own code when its run ends `failed`; `ASP_CLI_PLUGIN_THREW`
 * when the plugin throws without a code; `ASP_CLI_PLUGIN_TIMEOUT` when it does not answer in time
 * (an engine run: its signal is aborted then, or it did not end within 256 steps);
 * `ASP_CLI_PLUGIN_NO_PORT_METHOD` when it implements no method its capabilities allow.
 *
 * @throws UsageError `ASP_CLI_BAD_INPUT` when the folder is a provider (check it with
 *   `asp conformance --plugin`); PluginError `ASP_PLUGIN_BAD_MANIFEST` / `ASP_PLUGIN_IO` when the
 *   folder has no readable manifest.
 */
export async function checkPlugin(options: CheckPluginOptions): Promise<PluginCheckReport> {
  const dir = realpathSync(resolve(options.dir));
  const { manifest } = readPluginManifest(dir);
  if (manifest.kind === "provider") {
    throw new UsageError(
      "ASP_CLI_BAD_INPUT",
      `${manifest.id} is a provider: check it with asp conformance --plugin ${dir}`,
      { data: { dir, kind: manifest.kind } },
    );
  }
  const timeoutMs = options.timeoutMs ?? 5000;
  const scratch = mkdtempSync(join(tmpdir(), "asp-plugin-check-"));
  const steps: PluginCheckStep[] = [];
  let result: PluginLoadResult | undefined;
  try {
    const loaded = await loadStep(dir, options, scratch);
    result = loaded.result;
    steps.push(loaded.step);
    if (loaded.step.status === "pass") await exerciseSteps(result, scratch, timeoutMs, steps);
  } finally {
    if (result?.cacheDir) removePluginCache(result.cacheDir);
    rmSync(scratch, { recursive: true, force: true });
  }
  return {
    dir,
    id: manifest.id,
    version: manifest.version,
    kind: manifest.kind,
    digest: digestPlugin(dir).digest,
    grantFrom: options.policy === undefined ? "manifest" : "policy",
    passed: steps.every((s) => s.status === "pass"),
    steps,
  };
}

/** Steps `init` and one per port method: each failure recorded with its code, never thrown. */
async function exerciseSteps(
  result: PluginLoadResult,
  scratch: string,
  timeoutMs: number,
  steps: PluginCheckStep[],
): Promise<void> {
  let port: Verifier | Sandbox | Engine;
  try {
    port = initStep(result).port;
  } catch (error) {
    steps.push({ id: "init", status: "fail", detail: messageOf(error), code: codeOf(error) });
    return;
  }
  const calls = exercises(port, scratch);
  steps.push(
    calls.length === 0
      ? {
          id: "init",
          status: "fail",
          detail: `${port.id} implements no port method its granted capabilities (${port.capabilities.join(", ")}) allow`,
          code: "ASP_CLI_PLUGIN_NO_PORT_METHOD",
        }
      : { id: "init", status: "pass", detail: `implements ${calls.map((c) => c.id).join(", ")}` },
  );
  for (const c of calls) {
    try {
      steps.push({ id: c.id, status: "pass", detail: await bounded(c.id, timeoutMs, c.call) });
    } catch (error) {
      steps.push({ id: c.id, status: "fail", detail: messageOf(error), code: codeOf(error) });
    }
  }
}

/** The report for people: one line per step, every plugin-controlled string made {@link inert}. */
function formatCheck(r: PluginCheckReport): string {
  return [
    `${inert(r.id)}@${inert(r.version)} (${r.kind}) ${inert(r.digest)}`,
    `  grant: ${r.grantFrom === "policy" ? "from --policy" : "the manifest's capabilities (no --policy)"}`,
    ...r.steps.map(
      (s) =>
        `  ${s.status === "pass" ? "PASS" : "FAIL"} ${s.id}: ${s.code === undefined ? "" : `${s.code}: `}${inert(s.detail)}`,
    ),
    r.passed ? "passed" : "FAILED",
  ].join("\n");
}

/** `asp plugin check DIR --trust PUB`: what conformance is to a provider, for a verifier, a sandbox or an engine. */
export function registerPluginCheck(plugin: Command, ctx: CliContext): void {
  plugin
    .command("check")
    .description(
      "load a packed, signed verifier, sandbox or engine plugin as the host does and call its port once (exit 1 on any failure)",
    )
    .argument("<dir>", "the packed plugin folder (dist/plugin)")
    .requiredOption("--trust <pub>", "a trusted public key or trust file (repeatable)", collect)
    .option(
      "--policy <file>",
      "trusted policy whose plugins[] must grant it (default: grant the manifest's capabilities)",
    )
    .option("--options <json>", "the plugin's options, as a host configuration would give them")
    .option("--timeout <ms>", "bound of each port call in milliseconds", "5000")
    .action(async (dir: string, o: { trust: string[]; policy?: string; options?: string; timeout: string }) => {
      const timeoutMs = Number(o.timeout);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
        throw new UsageError("ASP_CLI_USAGE", `--timeout must be a positive integer, got ${o.timeout}`);
      }
      let pluginOptions: unknown;
      if (o.options !== undefined) {
        try {
          pluginOptions = JSON.parse(o.options);
        } catch {
          throw new UsageError("ASP_CLI_USAGE", "--options must be JSON, e.g. --options '{\"strict\":true}'");
        }
      }
      const report = await checkPlugin({
        dir: resolve(ctx.io.cwd, dir),
        trustRoots: readTrustRoots(o.trust.map((t) => resolve(ctx.io.cwd, t))),
        timeoutMs,
        ...(o.policy === undefined ? {} : { policy: loadPolicy(resolve(ctx.io.cwd, o.policy)).document as Policy }),
        ...(pluginOptions === undefined ? {} : { pluginOptions }),
      });
      ctx.print(formatCheck(report), report);
      if (!report.passed) ctx.setExit(EXIT.deny);
    });
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];
