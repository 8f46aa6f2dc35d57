// reflect-metadata must be evaluated before tsyringe (tsyringe throws at import otherwise).
import "reflect-metadata";
import { type DependencyContainer, type InjectionToken, instanceCachingFactory } from "tsyringe";
import { PluginError } from "./errors.js";
import type { LoadedInProcess, PluginLoadResult, Sandbox, Verifier } from "./types.js";

/**
 * DI tokens of the plugin kinds (DESIGN §3). `Symbol.for` keys, so two copies of the package
 * agree. Every loaded verifier is registered under `TOKENS.Verifier`, every sandbox under
 * `TOKENS.Sandbox`: resolve them with `container.resolveAll(TOKENS.Verifier)`.
 */
export const TOKENS = Object.freeze({
  Verifier: Symbol.for("asp.plugin-host.Verifier") as InjectionToken<Verifier>,
  Sandbox: Symbol.for("asp.plugin-host.Sandbox") as InjectionToken<Sandbox>,
  PluginLoadResult: Symbol.for("asp.plugin-host.PluginLoadResult") as InjectionToken<PluginLoadResult>,
});

function instantiate(loaded: LoadedInProcess, c: DependencyContainer, method: "verify" | "stage"): unknown {
  const deps: Record<string, unknown> = {};
  for (const [name, ref] of Object.entries(loaded.init.deps)) {
    deps[name] = c.resolve(Symbol.for(ref.key));
  }
  let instance: unknown;
  try {
    instance = loaded.init.init(deps, { id: loaded.plugin.id, options: loaded.options });
  } catch (error) {
    throw new PluginError("ASP_PLUGIN_LOAD_FAILED", `init of ${loaded.plugin.id} failed: ${(error as Error).message}`, {
      cause: error,
      data: { id: loaded.plugin.id },
    });
  }
  const fn = (instance as Record<string, unknown> | null)?.[method];
  if (typeof fn !== "function") {
    throw new PluginError(
      "ASP_PLUGIN_LOAD_FAILED",
      `init of ${loaded.plugin.id} did not return an object with ${method}()`,
      {
        data: { id: loaded.plugin.id },
      },
    );
  }
  return instance;
}

/**
 * Register a {@link PluginLoadResult} in a tsyringe container: each verifier under
 * `TOKENS.Verifier`, each sandbox under `TOKENS.Sandbox` (built on first resolve, with its
 * declared dependencies resolved from the container by their `Symbol.for` keys), and the
 * result itself under `TOKENS.PluginLoadResult`. Refused plugins are never registered.
 *
 * @throws PluginError `ASP_PLUGIN_LOAD_FAILED` at resolve time when a plugin's `init` throws
 *   or does not return the port of its kind.
 * @example
 * ```ts
 * registerPlugins(container, await loadPlugins({ dirs, trustRoots, policy }));
 * const verifiers = container.resolveAll(TOKENS.Verifier);
 * ```
 */
export function registerPlugins(container: DependencyContainer, result: PluginLoadResult): void {
  container.register(TOKENS.PluginLoadResult, { useValue: result });
  for (const v of result.verifiers) {
    container.register(TOKENS.Verifier, {
      useFactory: instanceCachingFactory((c) => {
        const inner = instantiate(v, c, "verify") as Pick<Verifier, "verify">;
        return Object.freeze({
          id: v.plugin.id,
          version: v.plugin.version,
          digest: v.evidence.digest,
          capabilities: v.plugin.capabilities,
          verify: (request) => inner.verify(request),
        } satisfies Verifier);
      }),
    });
  }
  for (const s of result.sandboxes) {
    container.register(TOKENS.Sandbox, {
      useFactory: instanceCachingFactory((c) => {
        const inner = instantiate(s, c, "stage") as Pick<Sandbox, "stage">;
        return Object.freeze({
          id: s.plugin.id,
          version: s.plugin.version,
          digest: s.evidence.digest,
          capabilities: s.plugin.capabilities,
          stage: (request) => inner.stage(request),
        } satisfies Sandbox);
      }),
    });
  }
}
