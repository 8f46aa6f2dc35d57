// reflect-metadata must be evaluated before tsyringe (tsyringe throws at import otherwise).
import "reflect-metadata";
import type { ActionResult, EnginePort, EnginePortStep, EngineRunParams, Sandbox as SandboxPort } from "@asp/contracts";
import { type DependencyContainer, type InjectionToken, instanceCachingFactory } from "tsyringe";
import { PluginError } from "./errors.js";
import {
  checkEngineStep,
  checkLaunchResult,
  checkRecoverResult,
  checkStageResult,
  checkVerifyResponse,
  type InProcessKind,
  type PluginPorts,
  portsFor,
} from "./ports.js";
import type {
  Engine,
  LaunchRequest,
  LoadedInProcess,
  PluginLoadResult,
  RecoverRequest,
  Sandbox,
  StageRequest,
  Verifier,
} from "./types.js";

/**
 * DI tokens of the plugin kinds (DESIGN §3). `Symbol.for` keys, so two copies of the package
 * agree. Every loaded verifier is registered under `TOKENS.Verifier`, every sandbox under
 * `TOKENS.Sandbox`, every engine under `TOKENS.Engine`: resolve them with
 * `container.resolveAll(TOKENS.Verifier)`.
 */
export const TOKENS = Object.freeze({
  Verifier: Symbol.for("asp.plugin-host.Verifier") as InjectionToken<Verifier>,
  Sandbox: Symbol.for("asp.plugin-host.Sandbox") as InjectionToken<Sandbox>,
  Engine: Symbol.for("asp.plugin-host.Engine") as InjectionToken<Engine>,
  PluginLoadResult: Symbol.for("asp.plugin-host.PluginLoadResult") as InjectionToken<PluginLoadResult>,
});

function instantiate(
  loaded: LoadedInProcess,
  kind: InProcessKind,
  ports: PluginPorts,
  methods: readonly string[],
): unknown {
  if ((loaded as { isolation?: unknown }).isolation === "subprocess") {
    throw new PluginError(
      "ASP_PLUGIN_OUT_OF_PROCESS",
      `verifier ${loaded.plugin.id} was loaded to run out of process (verifierIsolation "subprocess"): launch it with launchVerifier`,
      { data: { id: loaded.plugin.id } },
    );
  }
  // Only the ports of the plugin's kind, attenuated: never `container.resolve` of a key the
  // plugin chose (that reached the launch environment and the fact log).
  const deps = portsFor(kind, loaded.plugin.id, loaded.init.deps, ports);
  let instance: unknown;
  try {
    instance = loaded.init.init(deps, { id: loaded.plugin.id, options: loaded.options });
  } catch (error) {
    throw new PluginError("ASP_PLUGIN_LOAD_FAILED", `init of ${loaded.plugin.id} failed: ${(error as Error).message}`, {
      cause: error,
      data: { id: loaded.plugin.id },
    });
  }
  const has = methods.filter((m) => typeof (instance as Record<string, unknown> | null)?.[m] === "function");
  if (has.length === 0) {
    throw new PluginError(
      "ASP_PLUGIN_LOAD_FAILED",
      `init of ${loaded.plugin.id} did not return an object with ${methods.map((m) => `${m}()`).join(" or ")}`,
      {
        data: { id: loaded.plugin.id },
      },
    );
  }
  return instance;
}

/** The steps that end an engine run. */
const TERMINAL_STEPS: ReadonlySet<string> = new Set(["completion", "failed", "max_turns", "cancelled"]);

/**
 * An engine's `run`, every step checked ({@link checkEngineStep}) before the caller sees it. The
 * iterator is the plugin's own, driven one `next(result)` at a time. The run ends at its first
 * terminal step (`completion`, `failed`, `max_turns`, `cancelled`): the next `next()` is done and
 * the plugin's iterator is closed, so nothing it yields after that is ever seen. A step that does
 * not check, or a run that stops before any terminal step while its signal has not aborted, ends
 * the plugin's run (`return()`) and rejects with `ASP_PLUGIN_BAD_OUTPUT`.
 */
function checkedRun(
  id: string,
  inner: EnginePort,
  params: EngineRunParams,
): AsyncIterator<EnginePortStep, void, ActionResult | undefined> {
  const it = inner.run(params) as AsyncIterator<unknown, unknown, ActionResult | undefined> | null;
  if (typeof it !== "object" || it === null || typeof it.next !== "function") {
    throw new PluginError(
      "ASP_PLUGIN_BAD_OUTPUT",
      `${id} returned an invalid engine run: run() must return an async iterator`,
      { data: { id, what: "engine run" } },
    );
  }
  let ended = false;
  const stop = async (): Promise<void> => {
    ended = true;
    try {
      await it.return?.();
    } catch {
      // The run is over either way; the plugin's own cleanup failing changes nothing.
    }
  };
  const done = { done: true, value: undefined } as const;
  return {
    async next(result?: ActionResult): Promise<IteratorResult<EnginePortStep, void>> {
      if (ended) {
        await stop();
        return done;
      }
      const r = await it.next(result);
      if (r.done === true) {
        ended = true;
        if (params.signal?.aborted === true) return done;
        throw new PluginError(
          "ASP_PLUGIN_BAD_OUTPUT",
          `${id} returned an invalid engine run: it ended without a completion, failed, max_turns or cancelled step`,
          { data: { id, what: "engine run" } },
        );
      }
      let step: EnginePortStep;
      try {
        step = checkEngineStep(id, r.value);
      } catch (error) {
        await stop();
        throw error;
      }
      if (TERMINAL_STEPS.has(step.kind)) ended = true;
      return { done: false, value: step };
    },
    async return(): Promise<IteratorResult<EnginePortStep, void>> {
      await stop();
      return done;
    },
  };
}

/**
 * Register a {@link PluginLoadResult} in a tsyringe container: each verifier under
 * `TOKENS.Verifier`, each sandbox under `TOKENS.Sandbox`, each engine under `TOKENS.Engine`
 * (built on first resolve), and the result itself under `TOKENS.PluginLoadResult`. Refused
 * plugins are never registered.
 *
 * A plugin's `init` receives only the {@link PluginPorts} of its kind, by the keys of
 * {@link PLUGIN_PORT_KEYS} (a verifier: clock and content reader; a sandbox and an engine:
 * clock), never anything else in the container. Every answer is validated against its contracts
 * schema before the caller sees it, a sandbox's guarantee against its grant, and each step an
 * engine yields against the `EnginePortStep` shape.
 *
 * @throws PluginError `ASP_PLUGIN_FORBIDDEN_PORT` at resolve time when a plugin depends on
 *   anything but its kind's ports; `ASP_PLUGIN_LOAD_FAILED` when its `init` throws or does not
 *   return the port of its kind (an engine: an object with `run()`). `verify()` / `stage()` and
 *   an engine run's `next()` reject with `ASP_PLUGIN_BAD_OUTPUT` when the plugin's answer does
 *   not validate.
 * @example
 * ```ts
 * registerPlugins(container, await loadPlugins({ dirs, trustRoots, policy }), { clock, content });
 * const verifiers = container.resolveAll(TOKENS.Verifier);
 * ```
 */
export function registerPlugins(container: DependencyContainer, result: PluginLoadResult, ports: PluginPorts): void {
  container.register(TOKENS.PluginLoadResult, { useValue: result });
  for (const v of result.verifiers) {
    container.register(TOKENS.Verifier, {
      useFactory: instanceCachingFactory(() => {
        const inner = instantiate(v, "verifier", ports, ["verify"]) as Pick<Verifier, "verify">;
        return Object.freeze({
          id: v.plugin.id,
          version: v.plugin.version,
          digest: v.evidence.digest,
          capabilities: v.plugin.capabilities,
          verify: async (request) => checkVerifyResponse(v.plugin.id, request.kind, await inner.verify(request)),
        } satisfies Verifier);
      }),
    });
  }
  for (const s of result.sandboxes) {
    container.register(TOKENS.Sandbox, {
      useFactory: instanceCachingFactory(() => {
        const inner = instantiate(s, "sandbox", ports, ["launch", "stage", "recover"]) as SandboxPort;
        const granted = s.evidence.capabilities;
        const id = s.plugin.id;
        // Each method the plugin implements, its answer validated before the host sees it.
        return Object.freeze({
          id,
          version: s.plugin.version,
          digest: s.evidence.digest,
          capabilities: s.plugin.capabilities,
          ...(typeof inner.launch === "function"
            ? {
                launch: async (request: LaunchRequest) =>
                  checkLaunchResult(id, granted, await inner.launch?.call(inner, request)),
              }
            : {}),
          ...(typeof inner.stage === "function"
            ? {
                stage: async (request: StageRequest) =>
                  checkStageResult(id, granted, await inner.stage?.call(inner, request)),
              }
            : {}),
          ...(typeof inner.recover === "function"
            ? {
                recover: async (request: RecoverRequest) =>
                  checkRecoverResult(id, await inner.recover?.call(inner, request)),
              }
            : {}),
        } satisfies Sandbox);
      }),
    });
  }
  for (const e of result.engines ?? []) {
    container.register(TOKENS.Engine, {
      useFactory: instanceCachingFactory(() => {
        const inner = instantiate(e, "engine", ports, ["run"]) as EnginePort;
        const id = e.plugin.id;
        return Object.freeze({
          id,
          version: e.plugin.version,
          digest: e.evidence.digest,
          capabilities: e.plugin.capabilities,
          run: (params: EngineRunParams) => checkedRun(id, inner, params),
        } satisfies Engine);
      }),
    });
  }
}
