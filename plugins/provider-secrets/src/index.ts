/**
 * `@asp/provider-secrets`: a check provider that detects committed secrets (private keys, cloud
 * access keys, tokens, high-entropy assignments) with a rule set in data, allowlists and
 * redaction — a finding carries a fingerprint and a location, never the secret.
 *
 * The plugin entry is `dist/main.js`; this module is the pure logic, for tests and reuse.
 *
 * @packageDocumentation
 */

export type { Allowlist, SecretsConfig } from "./allowlist.js";
export { CONFIG_PATH, compileAllowlist, EMPTY_ALLOWLIST, effectiveAllowlist, parseSecretsConfig } from "./allowlist.js";
export type {
  BlobScanner,
  BoundedScannerOptions,
  ScanFailure,
  ScanJob,
  ScanOutcome,
} from "./bounded.js";
export {
  createBoundedScanner,
  createInlineScanner,
  FILE_SCAN_DEADLINE_MS,
  MAX_SCAN_BYTES,
  runScanWorker,
  SCAN_RESOURCE_LIMITS,
} from "./bounded.js";
export type { CatalogueHit } from "./catalogue.js";
export { CATALOGUE_RULE_IDS, EXCLUDED_CATALOGUE_RULES, lintCatalogue } from "./catalogue.js";
export type { DecodedText, EncodedView, TextEncoding, ViewEncoding } from "./decode.js";
export { decodeBlob, encodedViews, MAX_VIEWS } from "./decode.js";
export type { SecretsErrorCode } from "./errors.js";
export { SecretsError } from "./errors.js";
export type { SecretsProviderOptions } from "./provider.js";
export { assessSecrets, createSecretsProvider, MAX_DIAGNOSTICS, PROVIDER } from "./provider.js";
export type {
  AllowlistSpec,
  CompiledRule,
  EntropyGate,
  RuleSet,
  RuleSetSpec,
  SecretRule,
  ServiceValueSpec,
} from "./rules.js";
export { DEFAULT_RULES, loadRuleSet } from "./rules.js";
export {
  alphabetOf,
  findingFingerprint,
  isBinary,
  isPlaceholder,
  passesEntropy,
  SOURCE,
  scanBlob,
  scanText,
  secretFingerprint,
  shannonEntropy,
} from "./scan.js";
