/**
 * `@asp/plugin-host`: signed, policy-granted plugins (DESIGN §1, host §1–§2).
 *
 * - plugin digests (the `@asp/evidence` tree digest of the folder) and detached ed25519
 *   signatures over `{ id, version, digest }` ({@link signPlugin}, {@link writeKeyPair}),
 * - trust roots with expiry and revocation from trusted configuration ({@link readTrustRoots}),
 * - the loader ({@link loadPlugins}): every check before anything runs, precise refusal codes,
 *   providers as trusted launch configurations, verifiers, sandboxes and engines in-process, all run
 *   from a host-owned, content-addressed, read-only copy of the verified bytes (`cachePlugin`),
 * - tsyringe wiring ({@link TOKENS}, {@link registerPlugins}): in-process plugins get only the
 *   {@link PluginPorts} of their kind, and their answers are validated before use.
 *
 * @packageDocumentation
 */

export { createTempPluginCache, removePluginCache } from "./cache.js";
export { protocolCompatible, satisfiesNodeRange } from "./compat.js";
export { registerPlugins, TOKENS } from "./di.js";
export type { PluginDigest } from "./digest.js";
export { digestPlugin, MANIFEST_FILE, SIGNATURE_FILE } from "./digest.js";
export type { PluginErrorCode } from "./errors.js";
export { PLUGIN_ERROR_CODES, PLUGIN_REFUSAL_CODES, PluginError } from "./errors.js";
export type { KeyPair, PublicKey } from "./keys.js";
export {
  generateKeyPair,
  keyIdOf,
  PUBLIC_KEY_TYPE,
  readPublicKey,
  readSecretKey,
  SECRET_KEY_TYPE,
  writeKeyPair,
} from "./keys.js";
export type { LoadPluginsOptions, PluginPolicy, VerifiedPlugin, VerifyPluginOptions } from "./loader.js";
export { factsOf, loadPlugins, refusedPluginKey, verifyPlugin } from "./loader.js";
export type { ReadManifest } from "./manifest.js";
export { readPluginManifest } from "./manifest.js";
export {
  checkPluginOptions,
  checkPluginOptionsOffThread,
  type OffThreadOptionsCheck,
} from "./options-check.js";
export type {
  GrantRequest,
  PinPolicyFileResult,
  PolicyAuthorityGrant,
  PolicyPluginGrant,
  PolicyProviderPin,
  PolicySnippet,
} from "./pin.js";
export { assertRequirementsExist, matchingGrants, pinInPolicy, pinPolicyFile, policySnippet } from "./pin.js";
export type { ContentReader, InProcessKind, PluginPorts } from "./ports.js";
export { assertPluginPorts, checkVerifyResponse, PLUGIN_PORT_KEYS } from "./ports.js";
export type { SignatureFile, SignedPayload, SignResult } from "./signature.js";
export { readSignatureFile, SIGNATURE_TYPE, signedMessage, signPlugin, verifySignature } from "./signature.js";
export type { TrustDocument, TrustRoot } from "./trust.js";
export { isTrustRoot, parseTrustDocument, readTrustRoots, TRUST_FILE_TYPE } from "./trust.js";
export type {
  CapturedInit,
  DependencyRefLike,
  Engine,
  HostChecks,
  HostChecksFile,
  HostChecksFinding,
  HostChecksParams,
  HostChecksResult,
  LoadedEngine,
  LoadedInProcess,
  LoadedProvider,
  LoadedSandbox,
  LoadedVerifier,
  PluginEvidence,
  PluginLoadResult,
  RefusedPlugin,
  Sandbox,
  StageRequest,
  StageResult,
  Verifier,
  VerifyRequest,
  VerifyResponse,
} from "./types.js";
