/**
 * `@asp/sdk`: what a plugin author imports.
 *
 * - {@link defineProvider}: a check / inspect / edit provider speaking the Core Profile wire
 *   protocol over stdio (`@asp/protocol` on vscode-jsonrpc), with content read only through host callbacks and
 *   `validAsOf` filled in by the SDK,
 * - {@link defineVerifier}, {@link defineSandbox} and {@link defineEngine}: in-process plugins
 *   declared in two phases (`register`, then `init` with typed dependencies), loaded by
 *   `@asp/plugin-host`,
 * - {@link TreeLister}, {@link TextCache} and {@link ContentSource}: tree listings and blob texts
 *   cached by digest across requests, for providers that keep a warm index.
 *
 * Test helpers (an in-memory repository, a host that drives a built provider as a subprocess)
 * are in the second entry, `@asp/sdk/testing`.
 *
 * @packageDocumentation
 */

export type { ContentSource, TreeListing } from "./content.js";
export { resolveRelative, TextCache, TreeLister, throwIfAborted } from "./content.js";
export type { SdkErrorCode } from "./errors.js";
export { SDK_ERROR_CODES, SdkError } from "./errors.js";
export type {
  ActionResult,
  DependencyMap,
  DependencyRef,
  EngineArtifact,
  EnginePlugin,
  EnginePort,
  EngineRunParams,
  EngineStep,
  EngineToolSpec,
  EngineUsage,
  GuardianRequest,
  GuardianResponse,
  PluginDeclaration,
  PluginInit,
  PluginInitContext,
  PluginRegistrar,
  ProposedAction,
  ResolvedDependencies,
  ReviewFinding,
  ReviewRequest,
  ReviewResponse,
  Sandbox,
  SandboxPlugin,
  StageRequest,
  StageResult,
  Verifier,
  VerifierPlugin,
  VerifyRequest,
  VerifyResponse,
} from "./plugin.js";
export {
  createDependencyRef,
  defineEngine,
  defineSandbox,
  defineVerifier,
  isEnginePlugin,
  isSandboxPlugin,
  isVerifierPlugin,
} from "./plugin.js";
export type {
  AssessContext,
  AssessOutcome,
  ChangedPath,
  FileInfo,
  InspectContext,
  InspectOutcome,
  ListenOptions,
  ProposeContext,
  ProposeOutcome,
  ProviderDefinition,
  ProviderInfo,
  ProviderSession,
  ProviderSpec,
  RequestContext,
  TreeEntryInfo,
} from "./provider.js";
export { defineProvider, isProviderDefinition } from "./provider.js";
