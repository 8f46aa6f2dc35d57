import { AspError } from "@asp/contracts";

/**
 * Every code `@asp/provider-secrets` raises. Stable public API: switch on these, never on text.
 *
 * - `ASP_SECRETS_INVALID_RULES`: a rule set is not valid (shape, duplicate id, pattern that does
 *   not compile, unknown severity ...). The shipped rule set is validated when the plugin loads.
 * - `ASP_SECRETS_INVALID_CONFIG`: the repository's `asp.secrets.json` is not valid JSON or not the
 *   documented shape (unknown key, bad glob, fingerprint that is not 64 hex characters).
 */
export type SecretsErrorCode = "ASP_SECRETS_INVALID_RULES" | "ASP_SECRETS_INVALID_CONFIG";

/** Thrown by `@asp/provider-secrets`. Messages and data never contain a secret. */
export class SecretsError extends AspError<SecretsErrorCode> {}
