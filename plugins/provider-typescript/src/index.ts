/**
 * `@asp/provider-typescript`: a check provider that type-checks the after-state of a changeset
 * with the TypeScript compiler API over a virtual file system fed only by the host's
 * `host/readTree` / `host/readBlob` callbacks, and keeps its program warm between checks.
 *
 * @packageDocumentation
 */

// The content helpers moved to @asp/sdk; re-exported so existing imports keep working.
export type { ContentSource, TreeListing } from "@asp/sdk";
export { TextCache, TreeLister } from "@asp/sdk";
export type {
  CheckChange,
  CheckRequest,
  CheckResult,
  CheckScope,
  CheckStats,
  TypeScriptChecker,
  TypeScriptCheckerOptions,
} from "./checker.js";
export { createTypeScriptChecker, locateLibDir, toAspDiagnostics } from "./checker.js";
export type { BundledCompiler, CompilerChoice, PinnedVersion, ReadFile } from "./compilers.js";
export { BUNDLED_COMPILERS, chooseCompiler, minorOf, pinnedTypeScript, satisfies } from "./compilers.js";
export type { TypeScriptProviderErrorCode } from "./errors.js";
export { TypeScriptProviderError } from "./errors.js";
export type { FingerprintInput } from "./fingerprint.js";
export { fingerprintDiagnostic, normalizeText } from "./fingerprint.js";
export { codeHref, helpFor } from "./help.js";
export {
  assessWith,
  createTypeScriptProvider,
  PROVIDER_ID,
  PROVIDER_VERSION,
  parseProviderArgs,
} from "./provider.js";
export type { EnvironmentTree } from "./vfs.js";
