import type { EnginePort, PluginCapability, Sandbox, Verifier } from "@asp/contracts";
import { PLUGIN_BRANDS, PLUGIN_CAPABILITIES } from "@asp/contracts";
import { SdkError } from "./errors.js";

// The port types (Verifier, Sandbox, the Engine and their requests and answers) and the brands are
// declared once, in `@asp/contracts`: `@asp/plugin-host` checks the same brands without importing the SDK.
export type {
  ActionResult,
  EngineArtifact,
  EnginePort,
  EnginePortStep as EngineStep,
  EngineRunParams,
  EngineToolSpec,
  EngineUsage,
  GuardianRequest,
  GuardianResponse,
  ProposedAction,
  ReviewFinding,
  ReviewRequest,
  ReviewResponse,
  Sandbox,
  StageRequest,
  StageResult,
  Verifier,
  VerifyRequest,
  VerifyResponse,
} from "@asp/contracts";

const VERIFIER_BRAND = PLUGIN_BRANDS.verifier;
const SANDBOX_BRAND = PLUGIN_BRANDS.sandbox;
const ENGINE_BRAND = PLUGIN_BRANDS.engine;
const DEPENDENCY_BRAND = PLUGIN_BRANDS.dependencyRef;

/** A typed reference to a host port; the host hands the port of that key, if its kind may have it. */
export interface DependencyRef<T> {
  readonly $$type: typeof DEPENDENCY_BRAND;
  readonly key: string;
  /** Phantom: never set, only carries `T`. */
  readonly __type?: T;
}

/**
 * Name a host port a plugin depends on, by its key: a verifier may ask for `asp.plugin.Clock` and
 * `asp.plugin.ContentReader`, a sandbox and an engine for `asp.plugin.Clock` (any other key refuses
 * the plugin).
 *
 * @throws SdkError `ASP_SDK_INVALID_DEFINITION` for an empty key.
 */
export function createDependencyRef<T>(key: string): DependencyRef<T> {
  if (typeof key !== "string" || key.length === 0) {
    throw new SdkError("ASP_SDK_INVALID_DEFINITION", "a dependency key must be a non-empty string");
  }
  return Object.freeze({ $$type: DEPENDENCY_BRAND, key });
}

/** Dependencies a plugin asks for, by name. */
export type DependencyMap = Readonly<Record<string, DependencyRef<unknown>>>;

/** The resolved services, by the same names. */
export type ResolvedDependencies<D extends DependencyMap> = {
  readonly [K in keyof D]: D[K] extends DependencyRef<infer T> ? T : never;
};

/** What `init` receives besides its dependencies. */
export interface PluginInitContext {
  /** The plugin id from its signed manifest. */
  readonly id: string;
  /** Options from the host's trusted configuration, already validated against `optionsSchema`. */
  readonly options: unknown;
}

/** The second phase of a plugin: its dependencies and the function that builds the service. */
export interface PluginInit<P, D extends DependencyMap> {
  readonly deps: D;
  readonly init: (deps: ResolvedDependencies<D>, ctx: PluginInitContext) => P;
}

/** Handed to `register`: the plugin declares its init once. */
export interface PluginRegistrar<P> {
  registerInit<D extends DependencyMap>(init: PluginInit<P, D>): void;
}

/** Declaration of an in-process plugin (two phases: `register` now, `init` when the host composes). */
export interface PluginDeclaration<P, C extends PluginCapability> {
  readonly id: string;
  readonly capabilities: readonly C[];
  /** JSON Schema of the plugin's options; the host validates them with ajv before `init`. */
  readonly optionsSchema?: Readonly<Record<string, unknown>>;
  readonly register: (reg: PluginRegistrar<P>) => void;
}

/** A verifier plugin: the branded value its entry module exports as `default`. */
export interface VerifierPlugin extends PluginDeclaration<Verifier, "review" | "guardian"> {
  readonly $$type: typeof VERIFIER_BRAND;
  readonly version: 1;
  readonly kind: "verifier";
}

/** A sandbox plugin: the branded value its entry module exports as `default`. */
export interface SandboxPlugin
  extends PluginDeclaration<Sandbox, "sandbox:content_api" | "sandbox:staged_snapshot" | "sandbox:bubblewrap"> {
  readonly $$type: typeof SANDBOX_BRAND;
  readonly version: 1;
  readonly kind: "sandbox";
}

/**
 * An engine plugin (an Auto Mode agent Engine): the branded value its entry module exports as
 * `default`. Its port proposes actions; the host alone runs them.
 */
export interface EnginePlugin extends PluginDeclaration<EnginePort, "engine"> {
  readonly $$type: typeof ENGINE_BRAND;
  readonly version: 1;
  readonly kind: "engine";
}

function checkDeclaration(what: string, decl: PluginDeclaration<unknown, PluginCapability>, allowed: string[]): void {
  const bad = (message: string, field: string): never => {
    throw new SdkError("ASP_SDK_INVALID_DEFINITION", `${what}: ${message}`, { data: { field } });
  };
  if (typeof decl !== "object" || decl === null) bad("needs a declaration object", "");
  if (typeof decl.id !== "string" || decl.id.length === 0) bad("id must be a non-empty string", "id");
  if (!Array.isArray(decl.capabilities) || decl.capabilities.length === 0) {
    bad("capabilities must be a non-empty array", "capabilities");
  }
  for (const c of decl.capabilities) {
    if (!(PLUGIN_CAPABILITIES as readonly string[]).includes(c) || !allowed.includes(c)) {
      bad(`capability ${JSON.stringify(c)} is not one of ${allowed.join(", ")}`, "capabilities");
    }
  }
  if (typeof decl.register !== "function") bad("register must be a function", "register");
  if (decl.optionsSchema !== undefined && (typeof decl.optionsSchema !== "object" || decl.optionsSchema === null)) {
    bad("optionsSchema must be a JSON Schema object", "optionsSchema");
  }
}

/**
 * Declare a verifier plugin (Reviewer, Guardian). Export the result as the entry module's
 * `default`; nothing runs on import, the host calls `register` after verifying the signature
 * and the policy grant, and `init` when it composes.
 *
 * @throws SdkError `ASP_SDK_INVALID_DEFINITION` for a bad id, capability or register.
 * @example
 * ```ts
 * export default defineVerifier({
 *   id: "verifier-strict",
 *   capabilities: ["review"],
 *   register(reg) {
 *     reg.registerInit({ deps: {}, init: () => ({ verify: async () => ({ kind: "review", verdict: "pass", findings: [] }) }) });
 *   },
 * });
 * ```
 */
export function defineVerifier(decl: PluginDeclaration<Verifier, "review" | "guardian">): VerifierPlugin {
  checkDeclaration("defineVerifier", decl, ["review", "guardian"]);
  return Object.freeze({ ...decl, $$type: VERIFIER_BRAND, version: 1, kind: "verifier" });
}

/**
 * Declare a sandbox plugin (an assurance mechanism). Same two phases as {@link defineVerifier}.
 *
 * @throws SdkError `ASP_SDK_INVALID_DEFINITION` for a bad id, capability or register.
 */
export function defineSandbox(
  decl: PluginDeclaration<Sandbox, "sandbox:content_api" | "sandbox:staged_snapshot" | "sandbox:bubblewrap">,
): SandboxPlugin {
  checkDeclaration("defineSandbox", decl, ["sandbox:content_api", "sandbox:staged_snapshot", "sandbox:bubblewrap"]);
  return Object.freeze({ ...decl, $$type: SANDBOX_BRAND, version: 1, kind: "sandbox" });
}

/**
 * Declare an engine plugin: an agent Engine whose `run(params)` is an async iterator of steps
 * (`prose`, `action`, `turn`, then one `completion`, `failed` or `max_turns`). It never runs a tool:
 * an `action` step proposes one, and the host passes its `ActionResult` to the next `next()`. Same
 * two phases as {@link defineVerifier}; an engine may depend on `asp.plugin.Clock` only.
 *
 * @throws SdkError `ASP_SDK_INVALID_DEFINITION` for a bad id, capability or register.
 * @example
 * ```ts
 * export default defineEngine({
 *   id: "engine-echo",
 *   capabilities: ["engine"],
 *   register(reg) {
 *     reg.registerInit({
 *       deps: {},
 *       init: () => ({
 *         async *run(params) {
 *           yield { kind: "turn", usage: { input_tokens: 0, output_tokens: 0 } };
 *           yield { kind: "completion", payload: params.task, artifacts: [], evidence: [] };
 *         },
 *       }),
 *     });
 *   },
 * });
 * ```
 */
export function defineEngine(decl: PluginDeclaration<EnginePort, "engine">): EnginePlugin {
  checkDeclaration("defineEngine", decl, ["engine"]);
  return Object.freeze({ ...decl, $$type: ENGINE_BRAND, version: 1, kind: "engine" });
}

/** True for a {@link VerifierPlugin}, including one made by another copy of the SDK. */
export function isVerifierPlugin(value: unknown): value is VerifierPlugin {
  return typeof value === "object" && value !== null && (value as { $$type?: unknown }).$$type === VERIFIER_BRAND;
}

/** True for a {@link SandboxPlugin}, including one made by another copy of the SDK. */
export function isSandboxPlugin(value: unknown): value is SandboxPlugin {
  return typeof value === "object" && value !== null && (value as { $$type?: unknown }).$$type === SANDBOX_BRAND;
}

/** True for an {@link EnginePlugin}, including one made by another copy of the SDK. */
export function isEnginePlugin(value: unknown): value is EnginePlugin {
  return typeof value === "object" && value !== null && (value as { $$type?: unknown }).$$type === ENGINE_BRAND;
}
