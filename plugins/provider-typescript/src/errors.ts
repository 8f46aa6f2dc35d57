import { AspError } from "@asp/contracts";

/**
 * Every code `@asp/provider-typescript` raises. Stable public API: switch on these, never on
 * message text.
 *
 * - `ASP_TS_BAD_OPTIONS`: the checker or the plugin's command line was given an unknown or
 *   invalid option.
 * - `ASP_TS_LIB_NOT_FOUND`: the default library files (`lib.*.d.ts`) are neither next to the
 *   loaded `typescript` module nor next to the plugin entry.
 * - `ASP_TS_UNSUPPORTED_COMPILER`: the loaded `typescript` lacks an API the checker needs.
 */
export type TypeScriptProviderErrorCode = "ASP_TS_BAD_OPTIONS" | "ASP_TS_LIB_NOT_FOUND" | "ASP_TS_UNSUPPORTED_COMPILER";

/** Thrown by `@asp/provider-typescript`. */
export class TypeScriptProviderError extends AspError<TypeScriptProviderErrorCode> {}
