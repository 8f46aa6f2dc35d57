import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { type Policy, type ProviderManifest, validate } from "@asp/contracts";
import { type Clock, createMemoryStore, openStore, type Store, TOKENS } from "@asp/evidence";
import {
  createTempPluginCache,
  type LoadedSandbox,
  loadPlugins,
  TOKENS as PLUGIN_TOKENS,
  type PluginLoadResult,
  type RefusedPlugin,
  readTrustRoots,
  refusedPluginKey,
  registerPlugins,
  removePluginCache,
  type Sandbox,
} from "@asp/plugin-host";
import { budgetsOf, DEFAULT_TIMINGS, type SupervisorTimings } from "./budgets.js";
import { assertComposeHostOptions } from "./compose-options.js";
import { type DependencyContainer, container as rootContainer } from "./di.js";
import { checkEnvironmentSetting, type EnvironmentSetting } from "./environment.js";
import { ThsError } from "./errors.js";
import { FreshnessAuthority } from "./freshness.js";
import { Host } from "./host.js";
import { configuredProvider, remeasuredPlugin } from "./integrity.js";
import { loadPolicy } from "./policy-file.js";
import type { TrustedProvider } from "./supervisor.js";
import { type FailOpenSink, type HostPolicy, type ProviderSet, type RefusedProvider, THS_TOKENS } from "./tokens.js";

/**
 * The host's own name and version, sent in `initialize`, reported by `host/status`, and
 * compared with the trusted policy's `host` pin (implementation, version range) before every
 * decision. The name is `asp-ths` everywhere (docs/policy.md's example pins it).
 */
export const HOST_INFO = Object.freeze({ name: "asp-ths", version: packageVersion() });

/** The released version, from this package's own package.json (src/ and dist/ both sit one level below it). */
function packageVersion(): string {
  const pkg = createRequire(import.meta.url)("../package.json") as { version?: unknown };
  if (typeof pkg.version !== "string") throw new ThsError("ASP_THS_INTERNAL", "@asp/ths package.json has no version");
  return pkg.version;
}

/** Options of {@link composeHost}. */
export interface ComposeHostOptions {
  /** An evidence store folder (level), `"memory:"` for an in-memory store, or an opened `Store` (the caller closes it). */
  readonly store: string | Store;
  /** A trusted policy file, a policy document, or an `@asp/policy` ActivePolicy. */
  readonly policy: string | Policy | HostPolicy;
  /** Trusted public keys for plugin signatures (used with `plugins`). */
  readonly trustRoots?: readonly string[];
  /** Plugin folders, loaded through `@asp/plugin-host` when it is available. */
  readonly plugins?: readonly string[];
  /**
   * Options of plugins by id, from trusted configuration (a sandbox's budgets, e.g.
   * sandbox-bubblewrap's `tmpBytes`, `maxProcesses`), validated by each plugin's options schema.
   */
  readonly pluginOptions?: Readonly<Record<string, unknown>>;
  /** Trusted provider launch manifests from host configuration (never from the repository). */
  readonly providers?: readonly ProviderManifest[];
  /** Extra snapshot excludes (gitignore syntax). */
  readonly excludes?: readonly string[];
  /**
   * The dependency environment (host §9): which dependency roots every evaluation snapshots
   * read-only next to the baseline and serves to providers (default `{ roots: "auto" }`:
   * each `node_modules` beside a `package.json` of the baseline); `false` for none.
   */
  readonly environment?: EnvironmentSetting;
  /** Supervision timings (initialize timeout, shutdown timeout, restart backoff). */
  readonly timings?: Partial<SupervisorTimings>;
  /** Clock for timestamps (tests pass a fake one). */
  readonly clock?: Clock;
  /** Where PATH and pass-through variables come from (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Where fail-opens are logged as they happen (default: one JSON line on stderr). */
  readonly failOpenSink?: FailOpenSink;
  /** Launch and initialize the providers before returning (default true). */
  readonly warm?: boolean;
  /**
   * Override any token after the defaults are registered (own store, clock, sink, ...). Runs last:
   * what it registers wins over the matching direct option (e.g. a registered `TOKENS.Clock` over
   * `clock`).
   */
  readonly register?: (container: DependencyContainer) => void;
}

/** A composed host: the {@link Host} plus the container it was resolved from. Closing it closes an owned store. */
export interface ComposedHost extends Host {
  readonly container: DependencyContainer;
  readonly store: Store;
}

const stderrSink: FailOpenSink = {
  log(entry) {
    process.stderr.write(
      `${JSON.stringify({ event: "asp.fail-open", provider: entry.provider, failClass: entry.failClass, callSite: entry.callSite, decisionId: entry.decisionId })}\n`,
    );
  },
};

/**
 * Compose a Trusted Host Service (DESIGN §3): open the store, load the trusted policy, register
 * every seam under its token in a fresh child container, resolve the {@link Host} and (by
 * default) warm its providers. Tests compose through this same function with `store:
 * "memory:"` and a fake clock.
 *
 * Options are checked first: an option it does not know is refused (`ASP_THS_BAD_OPTIONS`, naming
 * the closest known one), never ignored, like an unknown key in the host configuration file.
 *
 * @throws ThsError `ASP_THS_BAD_OPTIONS`, `ASP_THS_BAD_CONFIG` (a bad `environment`), `ASP_THS_BAD_POLICY`,
 *   `ASP_THS_BAD_MANIFEST`; EvidenceError
 *   when the store cannot be opened.
 * @example
 * ```ts
 * const host = await composeHost({ store: "./.asp/store", policy: "./asp.policy.json", providers });
 * const { envelope } = await host.gate({ repo: "." });
 * await host.close();
 * ```
 */
export async function composeHost(options: ComposeHostOptions): Promise<ComposedHost> {
  assertComposeHostOptions(options);
  const environment = checkEnvironmentSetting(options.environment, "composeHost options");
  const policy = loadPolicy(options.policy);
  const ids = new Set<string>();
  const providers: TrustedProvider[] = [];
  for (const m of options.providers ?? []) {
    const r = validate("provider-manifest", m);
    if (!r.ok) {
      const e = r.errors[0];
      throw new ThsError(
        "ASP_THS_BAD_MANIFEST",
        `provider manifest ${String((m as { id?: unknown })?.id)}: ${e?.pointer || "/"} ${e?.message}`,
        {
          data: { errors: r.errors },
        },
      );
    }
    if (ids.has(m.id))
      throw new ThsError("ASP_THS_BAD_MANIFEST", `provider ${m.id} is configured twice`, { data: { id: m.id } });
    ids.add(m.id);
    // Measured now and before every launch: a grant is honoured only over a measured digest.
    providers.push(configuredProvider(r.value));
  }
  const refused: RefusedProvider[] = [];
  const loadedSandboxes: LoadedSandbox[] = [];
  // Verified plugins run from the host's own copy of their bytes, beside the store (the store
  // folder itself is level's), or, for an in-memory store, in a temp folder this host removes.
  let ownedCache: string | null = null;
  if ((options.plugins ?? []).length > 0) {
    let cacheDir = pluginCacheBeside(options.store);
    if (cacheDir === null) {
      cacheDir = createTempPluginCache();
      ownedCache = cacheDir;
    }
    let loaded: Awaited<ReturnType<typeof loadPluginProviders>>;
    try {
      loaded = await loadPluginProviders(
        options.plugins ?? [],
        options.trustRoots ?? [],
        policy,
        options.clock,
        ids,
        cacheDir,
        options.pluginOptions,
      );
    } catch (error) {
      if (ownedCache !== null) removePluginCache(ownedCache);
      throw error;
    }
    // Unique already: plugin-host refuses two verified plugins claiming one id, and
    // loadPluginProviders refuses a plugin whose id a configured provider holds.
    for (const p of loaded.providers) {
      ids.add(p.manifest.id);
      providers.push(remeasuredPlugin(p));
    }
    refused.push(...loaded.refused);
    loadedSandboxes.push(...loaded.sandboxes);
  }

  const ownsStore = typeof options.store === "string";
  const storeOptions = options.clock === undefined ? {} : { clock: options.clock };
  // Everything this host owns, released on close or on a failed compose.
  const release = async (): Promise<void> => {
    if (ownsStore) await store?.close();
    if (ownedCache !== null) removePluginCache(ownedCache);
  };
  let store: Store | undefined;
  try {
    if (typeof options.store === "string" && STORE_URL.test(options.store)) {
      // Never a folder named like a URL: a database store is opened by its package and passed in.
      throw new ThsError(
        "ASP_THS_BAD_CONFIG",
        "a store URL is opened by the caller (the asp CLI, or openPostgresStore from @asp/store-postgres) and passed as a Store",
        { data: { store: "url" } },
      );
    }
    store =
      typeof options.store !== "string"
        ? options.store
        : options.store === "memory:"
          ? await createMemoryStore(storeOptions)
          : await openStore(options.store, storeOptions);
  } catch (error) {
    await release();
    throw error;
  }

  const c = rootContainer.createChildContainer();
  const clock: Clock = options.clock ?? { now: () => new Date() };
  c.register(TOKENS.FactLog, { useValue: store.log });
  c.register(TOKENS.ObjectStore, { useValue: store.objects });
  c.register(TOKENS.Hasher, { useValue: store.hasher });
  c.register(TOKENS.Clock, { useValue: clock });
  c.register(THS_TOKENS.StoreId, { useValue: store.id });
  c.register(THS_TOKENS.Policy, { useValue: policy });
  c.register(THS_TOKENS.Providers, { useValue: { providers, refused } satisfies ProviderSet });
  c.register(THS_TOKENS.Budgets, { useValue: budgetsOf(policy.document as Policy) });
  c.register(THS_TOKENS.Timings, { useValue: { ...DEFAULT_TIMINGS, ...options.timings } });
  c.register(THS_TOKENS.HostInfo, { useValue: HOST_INFO });
  c.register(THS_TOKENS.LaunchEnv, { useValue: options.env ?? process.env });
  c.register(THS_TOKENS.FailOpenSink, { useValue: options.failOpenSink ?? stderrSink });
  c.register(THS_TOKENS.Ids, {
    useValue: { next: (kind: string) => `${kind === "decision" ? "dec" : "rcpt"}-${randomUUID()}` },
  });
  c.register(THS_TOKENS.SnapshotExcludes, { useValue: options.excludes ?? [] });
  c.register(THS_TOKENS.Environment, { useValue: { setting: environment } });
  c.register(THS_TOKENS.StatCacheDir, {
    // Beside the level database, never inside it: the database folder holds only level's files.
    useValue: { dir: localBeside(store.location, ".stat-cache") },
  });
  c.register(THS_TOKENS.ApplyJournalDir, {
    useValue: { dir: localBeside(store.location, ".journal") },
  });
  // Sandbox plugins get the clock only (plugin-host attenuates the ports per kind).
  const objects = store.objects;
  registerPlugins(
    c,
    {
      providers: [],
      verifiers: [],
      sandboxes: loadedSandboxes,
      refused: [],
      cacheDir: null,
    } satisfies PluginLoadResult,
    { clock, content: { read: async (d) => ((await objects.has("blob", d)) ? objects.readBlob(d) : null) } },
  );
  let sandboxes: Sandbox[];
  try {
    sandboxes = loadedSandboxes.length === 0 ? [] : c.resolveAll(PLUGIN_TOKENS.Sandbox);
  } catch (error) {
    await release();
    throw error;
  }
  c.register(THS_TOKENS.Sandboxes, { useValue: { sandboxes } });
  c.register(FreshnessAuthority, { useClass: FreshnessAuthority });
  options.register?.(c);

  let host: Host;
  try {
    host = c.resolve(Host);
  } catch (error) {
    await release();
    throw error;
  }
  const close = host.close.bind(host);
  const composed = Object.assign(host, {
    container: c,
    store,
    close: async () => {
      await close();
      await release();
    },
  });
  if (options.warm !== false) await host.warm();
  return composed;
}

/** A store URL (`postgres://…`): a database, not a folder. */
const STORE_URL = /^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * `<store><suffix>` beside a level store folder (never inside: that folder is level's), or null
 * for a store that is not a local folder (in memory, or a database such as PostgreSQL, whose
 * location is a redacted URL): those run without the local cache or journal it would hold.
 */
function localBeside(location: string, suffix: string): string | null {
  return location === "memory:" || STORE_URL.test(location) ? null : `${resolve(location)}${suffix}`;
}

/** `<store>.plugins` beside a store folder, or null for a store that is not a local folder. */
function pluginCacheBeside(store: string | Store): string | null {
  return localBeside(typeof store === "string" ? store : store.location, ".plugins");
}

/**
 * Providers from signed plugin folders, loaded and verified by `@asp/plugin-host` (signature
 * against the trust roots, digest, policy plugin grant) and launched only from the host's
 * read-only copy of the verified bytes in `cacheDir`. A refused plugin never runs: it is
 * reported as an unavailable provider under `plugin:<its real folder>` (plugin-host's
 * `RefusedPlugin.key`), never under the id it claims, so it can neither shadow nor impersonate
 * a verified provider; it degrades coverage visibly and a required requirement it would have
 * served stays missing. Two verified folders claiming one id are both refused by plugin-host;
 * a verified plugin whose id a configured provider already has (`taken`) is refused here the
 * same way, so the configured provider keeps its id and nothing is dropped silently. Never
 * throws on anything a plugin folder holds.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_KEY` / `ASP_PLUGIN_BAD_TRUST_ROOT` when a trust root
 *   from trusted configuration cannot be read (a configuration error, not a plugin's).
 */
async function loadPluginProviders(
  dirs: readonly string[],
  trustRootFiles: readonly string[],
  policy: HostPolicy,
  clock: Clock | undefined,
  taken: ReadonlySet<string>,
  cacheDir: string,
  pluginOptions: Readonly<Record<string, unknown>> | undefined,
): Promise<{ providers: TrustedProvider[]; refused: RefusedProvider[]; sandboxes: readonly LoadedSandbox[] }> {
  const result = await loadPlugins({
    dirs,
    trustRoots: readTrustRoots(trustRootFiles),
    policy: policy.document as Policy,
    cacheDir,
    ...(pluginOptions === undefined ? {} : { pluginOptions }),
    ...(clock === undefined ? {} : { now: () => clock.now() }),
    // The gate host runs providers and the sandboxes that confine them and publish applies: a
    // verifier's code never enters it.
    kinds: ["provider", "sandbox"],
  });
  const providers: TrustedProvider[] = [];
  const refused: RefusedPlugin[] = [...result.refused];
  for (const p of result.providers) {
    if (taken.has(p.manifest.id)) {
      refused.push({
        dir: p.dir,
        key: refusedPluginKey(p.dir),
        id: p.manifest.id,
        code: "ASP_PLUGIN_DUPLICATE",
        message: `a configured provider is already ${p.manifest.id}; the plugin is not loaded`,
      });
      continue;
    }
    providers.push({
      manifest: p.manifest,
      origin: "plugin",
      integrityVerified: p.evidence.integrity === "verified",
    });
  }
  return {
    providers,
    sandboxes: result.sandboxes,
    refused: refused.map((r) => ({
      id: r.key,
      reason: "unavailable" as const,
      detail:
        `plugin folder ${r.dir}${r.id === null ? "" : ` (claims ${r.id})`} refused: ${r.code}: ${r.message}`.slice(
          0,
          1900,
        ),
    })),
  };
}
