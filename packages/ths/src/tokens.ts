import type { InjectionToken } from "@asp/evidence";
import type { Sandbox } from "@asp/plugin-host";
import type { ActivePolicy } from "@asp/policy";
import type { Budgets, SupervisorTimings } from "./budgets.js";
import type { FailOpen } from "./decide.js";
import type { EnvironmentSetting } from "./environment.js";
import type { HostInfo, TrustedProvider } from "./supervisor.js";

/** The trusted policy the host decides under (an `@asp/policy` ActivePolicy: document + digest). */
export type HostPolicy = ActivePolicy;

/** Where fail-opens are logged as they happen (host §2: never silent). They are also in every receipt. */
export interface FailOpenSink {
  log(entry: FailOpen & { readonly decisionId: string }): void;
}

/** Source of decision and receipt ids. */
export interface IdSource {
  next(kind: "decision" | "receipt"): string;
}

/** A required provider that could not even be offered to the supervisor (e.g. refused by plugin-host). */
export interface RefusedProvider {
  /**
   * What the refusal is reported under. For a refused plugin folder: `plugin:<its real path>`
   * (plugin-host's `RefusedPlugin.key`), never the id the folder claims. When a supervised
   * provider or an earlier refusal already has this id, the host reports it with a `#n` suffix.
   */
  readonly id: string;
  readonly reason: "missing" | "unavailable";
  readonly detail: string;
}

/** The providers the host supervises, from trusted configuration and verified plugins. */
export interface ProviderSet {
  readonly providers: readonly TrustedProvider[];
  readonly refused: readonly RefusedProvider[];
}

/**
 * The sandbox plugins the host may use (verified, granted, instantiated; each answer validated
 * by plugin-host): `launch` confines provider processes, `stage` / `recover` publish and recover
 * mediated applies (issue 13). Empty: providers run as plain subprocesses (advisory, direct-write
 * risk) and applies are written directly (`rollback_attempted` at best).
 */
export interface SandboxSet {
  readonly sandboxes: readonly Sandbox[];
}

/**
 * DI tokens of the seams `@asp/ths` owns (DESIGN §3). `Symbol.for` keys, so two copies of the
 * package agree. The evidence seams (`FactLog`, `ObjectStore`, `Clock`, `Hasher`) use
 * `@asp/evidence`'s `TOKENS`.
 */
export const THS_TOKENS = {
  Policy: Symbol.for("asp.ths.Policy") as InjectionToken<HostPolicy>,
  Providers: Symbol.for("asp.ths.Providers") as InjectionToken<ProviderSet>,
  Budgets: Symbol.for("asp.ths.Budgets") as InjectionToken<Budgets>,
  Timings: Symbol.for("asp.ths.Timings") as InjectionToken<SupervisorTimings>,
  HostInfo: Symbol.for("asp.ths.HostInfo") as InjectionToken<HostInfo>,
  LaunchEnv: Symbol.for("asp.ths.LaunchEnv") as InjectionToken<Readonly<Record<string, string | undefined>>>,
  FailOpenSink: Symbol.for("asp.ths.FailOpenSink") as InjectionToken<FailOpenSink>,
  Ids: Symbol.for("asp.ths.Ids") as InjectionToken<IdSource>,
  StoreId: Symbol.for("asp.ths.StoreId") as InjectionToken<string>,
  SnapshotExcludes: Symbol.for("asp.ths.SnapshotExcludes") as InjectionToken<readonly string[]>,
  /** Folder of the per-repository stat caches (beside the store), `dir: null` for an in-memory store. */
  StatCacheDir: Symbol.for("asp.ths.StatCacheDir") as InjectionToken<{ readonly dir: string | null }>,
  /** The dependency environment setting (host §9): roots and excludes, or `false` for none. */
  Environment: Symbol.for("asp.ths.Environment") as InjectionToken<{ readonly setting: EnvironmentSetting }>,
  /** Verified, granted sandbox plugins (issue 13). */
  Sandboxes: Symbol.for("asp.ths.Sandboxes") as InjectionToken<SandboxSet>,
  /**
   * Folder of the per-repository apply journals (beside the store, never inside the worktree);
   * `dir: null` for an in-memory store (a host-owned temp folder is used instead).
   */
  ApplyJournalDir: Symbol.for("asp.ths.ApplyJournalDir") as InjectionToken<{ readonly dir: string | null }>,
} as const;
