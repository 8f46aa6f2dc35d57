import { parseArgs } from "node:util";
import { type AssessContext, type AssessOutcome, defineProvider, type ProviderDefinition } from "@asp/sdk";
import { createTypeScriptChecker, type TypeScriptChecker, type TypeScriptCheckerOptions } from "./checker.js";
import { BUNDLED_COMPILERS } from "./compilers.js";
import { TypeScriptProviderError } from "./errors.js";

/** The plugin's identity: equal to `asp-plugin.json` (a test keeps them in step). */
export const PROVIDER_ID = "asp.provider-typescript";
/** The plugin's version: equal to `package.json` and `asp-plugin.json`. */
export const PROVIDER_VERSION = "0.1.0";

const OPTIONS = {
  project: { type: "string" },
  scope: { type: "string" },
  "max-diagnostics": { type: "string" },
  "lib-dir": { type: "string" },
  compilers: { type: "string" },
} as const;

const SCOPES = ["changed", "affected", "all"] as const;

/**
 * Parse the plugin's command line with `node:util` `parseArgs` (strict: no positionals, no
 * unknown flag, no value that looks like a flag): `--project PATH` (the tsconfig in the tree),
 * `--scope changed|affected|all`, `--max-diagnostics N`, `--lib-dir DIR`, `--compilers 5.9,6.0`
 * (the bundled compilers trusted configuration lets answer; default all); `--flag=value` works too.
 *
 * @throws TypeScriptProviderError `ASP_TS_BAD_OPTIONS` for an unknown flag, a missing or
 *   flag-like value, a positional argument, a scope outside the list, or a count that is not a
 *   decimal integer.
 */
export function parseProviderArgs(argv: readonly string[]): TypeScriptCheckerOptions {
  let values: ReturnType<typeof parseArgs<{ options: typeof OPTIONS }>>["values"];
  try {
    ({ values } = parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: false }));
  } catch (cause) {
    throw new TypeScriptProviderError("ASP_TS_BAD_OPTIONS", (cause as Error).message, {
      cause,
      data: { argv: argv.slice(0, 16) },
    });
  }
  const out: { -readonly [K in keyof TypeScriptCheckerOptions]: TypeScriptCheckerOptions[K] } = {};
  if (values.project !== undefined) out.project = values.project;
  if (values.scope !== undefined) {
    const scope = SCOPES.find((s) => s === values.scope);
    if (scope === undefined) {
      throw new TypeScriptProviderError("ASP_TS_BAD_OPTIONS", "--scope must be changed, affected or all", {
        data: { flag: "--scope", value: values.scope },
      });
    }
    out.scope = scope;
  }
  const max = values["max-diagnostics"];
  if (max !== undefined) {
    if (!/^[0-9]{1,9}$/.test(max)) {
      throw new TypeScriptProviderError("ASP_TS_BAD_OPTIONS", "--max-diagnostics must be a decimal integer", {
        data: { flag: "--max-diagnostics", value: max.slice(0, 40) },
      });
    }
    out.maxDiagnostics = Number(max);
  }
  if (values["lib-dir"] !== undefined) out.libDir = values["lib-dir"];
  if (values.compilers !== undefined) {
    const list = values.compilers.split(",").map((c) => c.trim());
    const bundled = BUNDLED_COMPILERS.map((c) => c.minor);
    const unknown = list.find((c) => !bundled.includes(c));
    if (unknown !== undefined) {
      throw new TypeScriptProviderError(
        "ASP_TS_BAD_OPTIONS",
        `--compilers: ${unknown.slice(0, 40)} is not bundled; bundled: ${bundled.join(",")}`,
        { data: { flag: "--compilers", value: values.compilers.slice(0, 200), bundled } },
      );
    }
    out.compilers = list;
  }
  return out;
}

/** Answer one `check/assess` with a checker: the changeset's after tree (or the baseline), over the request's dependency environment when it carries one. */
export async function assessWith(checker: TypeScriptChecker, ctx: AssessContext): Promise<AssessOutcome> {
  const tree = ctx.changeset?.after ?? ctx.baseline;
  const result = await checker.check({ tree, changes: ctx.changes, environment: ctx.environment }, ctx);
  return {
    status: result.status,
    diagnostics: result.diagnostics,
    coverage: result.coverage,
    ...(result.tool === undefined ? {} : { tool: result.tool }),
    ...(result.error === undefined ? {} : { error: result.error }),
  };
}

/**
 * The provider definition (inert until `.listen()`): declares source `ts` and capability
 * `check`, and keeps one warm checker for the life of the process.
 *
 * @throws TypeScriptProviderError as {@link createTypeScriptChecker} does.
 * @example
 * ```ts
 * createTypeScriptProvider({ scope: "affected" }).listen();
 * ```
 */
export function createTypeScriptProvider(options: TypeScriptCheckerOptions = {}): ProviderDefinition {
  const checker = createTypeScriptChecker(options);
  return defineProvider({
    initialize: {
      provider: { id: PROVIDER_ID, version: PROVIDER_VERSION },
      diagnosticSources: ["ts"],
      capabilities: ["check"],
    },
    assess: (ctx) => assessWith(checker, ctx),
  });
}
