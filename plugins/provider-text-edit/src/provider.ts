import { isAspError } from "@asp/contracts";
import { defineProvider, type ProposeContext, type ProposeOutcome, type ProviderDefinition } from "@asp/sdk";
import { createBaselineReader } from "./baseline.js";
import { type PlanOptions, planEdit } from "./plan.js";

/** The provider's identity; equal to `asp-plugin.json`. */
export const PROVIDER = Object.freeze({ id: "asp.provider-text-edit", version: "0.1.0" });

/** Options of {@link createTextEditProvider}. */
export interface TextEditProviderOptions {
  readonly regex?: PlanOptions["regex"];
}

/**
 * Answer one `edit/propose`: plan the intent against the request's baseline, read through host
 * callbacks. A refusal is thrown as an `Error` whose message starts with the `ASP_TEXT_EDIT_*`
 * code, because the SDK turns a thrown error into a JSON-RPC error carrying only its message.
 */
export async function proposeEdit(ctx: ProposeContext, options: TextEditProviderOptions = {}): Promise<ProposeOutcome> {
  const reader = createBaselineReader(ctx.baseline, ctx);
  try {
    return await planEdit(ctx.intent, reader, {
      signal: ctx.signal,
      ...(options.regex ? { regex: options.regex } : {}),
    });
  } catch (error) {
    if (isAspError(error) && error.code.startsWith("ASP_TEXT_EDIT_"))
      throw new Error(`${error.code}: ${error.message}`);
    throw error;
  }
}

/**
 * The text-edit provider, inert until `.listen()`. Capability `edit` only: it declares no
 * diagnostic source and answers `check/assess` with status `unsupported` (a capability gap).
 * It has no write path: it proposes, the host applies (host §6).
 *
 * @example
 * ```ts
 * createTextEditProvider().listen();
 * ```
 */
export function createTextEditProvider(options: TextEditProviderOptions = {}): ProviderDefinition {
  return defineProvider({
    initialize: { provider: PROVIDER, diagnosticSources: [], capabilities: ["edit"] },
    assess: () => ({ status: "unsupported" }),
    propose: (ctx) => proposeEdit(ctx, options),
  });
}
