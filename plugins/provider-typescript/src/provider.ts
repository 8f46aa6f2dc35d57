import { type AssessContext, type AssessOutcome, defineProvider, type ProviderDefinition } from "@asp/sdk";
import { createTypeScriptChecker, type TypeScriptChecker, type TypeScriptCheckerOptions } from "./checker.js";
import { TypeScriptProviderError } from "./errors.js";

/** The plugin's identity: equal to `asp-plugin.json` (a test keeps them in step). */
export const PROVIDER_ID = "asp.provider-typescript";
/** The plugin's version: equal to `package.json` and `asp-plugin.json`. */
export const PROVIDER_VERSION = "0.1.0";

/**
 * Parse the plugin's command line: `--project PATH` (the tsconfig in the tree),
 * `--scope changed|affected|all`, `--max-diagnostics N`, `--lib-dir DIR`.
 *
 * @throws TypeScriptProviderError `ASP_TS_BAD_OPTIONS` for an unknown flag or a missing value.
 */
export function parseProviderArgs(argv: readonly string[]): TypeScriptCheckerOptions {
  const out: { -readonly [K in keyof TypeScriptCheckerOptions]: TypeScriptCheckerOptions[K] } = {};
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i] as string;
    const value = argv[i + 1];
    const need = (): string => {
      if (value === undefined || value.startsWith("--")) {
        throw new TypeScriptProviderError("ASP_TS_BAD_OPTIONS", `${flag} needs a value`, { data: { flag } });
      }
      i++;
      return value;
    };
    switch (flag) {
      case "--project":
        out.project = need();
        break;
      case "--scope": {
        const scope = need();
        if (scope !== "changed" && scope !== "affected" && scope !== "all") {
          throw new TypeScriptProviderError("ASP_TS_BAD_OPTIONS", `--scope must be changed, affected or all`, {
            data: { flag, value: scope },
          });
        }
        out.scope = scope;
        break;
      }
      case "--max-diagnostics":
        out.maxDiagnostics = Number(need());
        break;
      case "--lib-dir":
        out.libDir = need();
        break;
      default:
        throw new TypeScriptProviderError("ASP_TS_BAD_OPTIONS", `unknown option ${flag}`, { data: { flag } });
    }
  }
  return out;
}

/** Answer one `check/assess` with a checker: the changeset's after tree, or the baseline. */
export async function assessWith(checker: TypeScriptChecker, ctx: AssessContext): Promise<AssessOutcome> {
  const tree = ctx.changeset?.after ?? ctx.baseline;
  const result = await checker.check({ tree, changes: ctx.changes }, ctx);
  return { status: result.status, diagnostics: result.diagnostics, coverage: result.coverage };
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
