import type {
  EnginePort,
  PluginCapability,
  PluginManifest,
  ProviderManifest,
  Sandbox as SandboxPort,
  Verifier as VerifierPort,
} from "@asp/contracts";
import type { Digest } from "@asp/evidence";
import type { PluginErrorCode } from "./errors.js";

/** Authority evidence of a verified plugin: what was checked and against what. */
export interface PluginEvidence {
  /** The signature verified against a trusted, unexpired, unrevoked key. */
  readonly identity: "verified";
  /** The folder's recomputed tree digest equals the signed one. */
  readonly integrity: "verified";
  /** Trusted policy grants this id + digest every declared capability. */
  readonly authorityGrant: "verified";
  readonly keyId: string;
  /** The trust-root file the key came from. */
  readonly trustSource: string;
  readonly digest: Digest;
  /** base64 ed25519 signature over `{ id, version, digest }`. */
  readonly signature: string;
  readonly capabilities: readonly PluginCapability[];
  readonly verifiedAt: string;
}

/** A verified, granted provider: launch it from `manifest` (trusted launch configuration). */
export interface LoadedProvider {
  readonly $$type: "@asp/LoadedProvider";
  /** The plugin folder it was verified from (reports and facts name it; nothing runs from it). */
  readonly dir: string;
  /** The host-owned, read-only copy of the verified bytes it runs from: `<cacheDir>/<digest>`. */
  readonly cached: string;
  /** The signed plugin manifest. */
  readonly plugin: PluginManifest;
  /** `executable` = this node binary, `args` = [the entry in the copy], `cwd` = the copy (`cached`), `digest` = the verified digest. */
  readonly manifest: ProviderManifest;
  readonly evidence: PluginEvidence;
}

/** A dependency reference as `@asp/sdk` declares it. */
export interface DependencyRefLike {
  readonly key: string;
}

/** The `registerInit` payload captured from an in-process plugin's `register` phase. */
export interface CapturedInit {
  readonly deps: Readonly<Record<string, DependencyRefLike>>;
  readonly init: (deps: Record<string, unknown>, ctx: { readonly id: string; readonly options: unknown }) => unknown;
}

/** Fields shared by verified in-process plugins. */
export interface LoadedInProcess {
  /** The plugin folder it was verified from (nothing is imported from it). */
  readonly dir: string;
  /** The host-owned, read-only copy of the verified bytes its entry is imported from. */
  readonly cached: string;
  readonly plugin: PluginManifest;
  readonly evidence: PluginEvidence;
  /** Validated options from trusted configuration. */
  readonly options: unknown;
  readonly init: CapturedInit;
}

/** A verified, granted verifier plugin (not yet instantiated: see `registerPlugins`). */
export interface LoadedVerifier extends LoadedInProcess {
  readonly $$type: "@asp/LoadedVerifier";
  /**
   * `subprocess` when `loadPlugins` ran with `verifierIsolation: "subprocess"`: its entry was
   * never imported here, `init` throws `ASP_PLUGIN_OUT_OF_PROCESS`, `options` are not validated
   * yet (`launchVerifier` does it against the declaration the child reports). Absent: imported
   * in-process.
   */
  readonly isolation?: "subprocess";
  /** The entry inside the verified copy (`cached`), set with `isolation: "subprocess"`. */
  readonly entryPath?: string;
}

/** A verified, granted sandbox plugin (not yet instantiated: see `registerPlugins`). */
export interface LoadedSandbox extends LoadedInProcess {
  readonly $$type: "@asp/LoadedSandbox";
}

/** A verified, granted engine plugin, an Auto Mode agent Engine (not yet instantiated: see `registerPlugins`). */
export interface LoadedEngine extends LoadedInProcess {
  readonly $$type: "@asp/LoadedEngine";
}

/** A plugin that was refused, and exactly why. Nothing from it ran. */
export interface RefusedPlugin {
  /** The folder: its real path (symbolic links resolved), or the path as named when it has none. */
  readonly dir: string;
  /**
   * What a host reports the refusal under: `plugin:<dir>` (bounded to 256 characters, unique per
   * folder, see `refusedPluginKey`). Never the id the plugin claims, so a refused folder can
   * neither shadow nor impersonate a verified plugin.
   */
  readonly key: string;
  /** The id its manifest claims, when readable: evidence for a reader, never a key. */
  readonly id: string | null;
  readonly code: PluginErrorCode;
  readonly message: string;
}

/** What `loadPlugins` found. */
export interface PluginLoadResult {
  readonly providers: readonly LoadedProvider[];
  readonly verifiers: readonly LoadedVerifier[];
  readonly sandboxes: readonly LoadedSandbox[];
  /**
   * Engine plugins. `loadPlugins` always sets it; a result a caller assembles by hand (one chosen
   * verifier, say) may leave it out, which registers no engine.
   */
  readonly engines?: readonly LoadedEngine[];
  readonly refused: readonly RefusedPlugin[];
  /** The plugin cache the loaded plugins run from (`null` when nothing was verified and none was given). */
  readonly cacheDir: string | null;
}

/** A registered verifier (resolved from `TOKENS.Verifier`), stamped with its verified identity. */
export interface Verifier extends VerifierPort {
  readonly id: string;
  readonly version: string;
  readonly digest: Digest;
  readonly capabilities: readonly PluginCapability[];
}

/** A registered sandbox (resolved from `TOKENS.Sandbox`), stamped with its verified identity. */
export interface Sandbox extends SandboxPort {
  readonly id: string;
  readonly version: string;
  readonly digest: Digest;
  readonly capabilities: readonly PluginCapability[];
}

/**
 * A registered engine (resolved from `TOKENS.Engine`), stamped with its verified identity. Every
 * step its `run` yields has been checked against the `EnginePortStep` shape before the caller sees it.
 */
export interface Engine extends EnginePort {
  readonly id: string;
  readonly version: string;
  readonly digest: Digest;
  readonly capabilities: readonly PluginCapability[];
}

// The port shapes are declared once, in @asp/contracts (the SDK re-exports the same types).
export type {
  HostChecks,
  HostChecksFile,
  HostChecksFinding,
  HostChecksParams,
  HostChecksResult,
  LaunchRequest,
  LaunchResult,
  RecoverRequest,
  RecoverResult,
  StageRequest,
  StageResult,
  VerifyRequest,
  VerifyResponse,
} from "@asp/contracts";
