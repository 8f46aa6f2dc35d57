import { createHash } from "node:crypto";
import { parseArgs } from "node:util";
import type { Diagnostic } from "@asp/contracts";
import {
  type AssessContext,
  type AssessOutcome,
  defineProvider,
  type InspectContext,
  type InspectOutcome,
  type ProviderDefinition,
} from "@asp/sdk";
import { ImportGraphError } from "./errors.js";
import { ImportGraphIndex } from "./graph-index.js";
import { isSourcePath, parseModule } from "./parse.js";
import { answerQuery } from "./query.js";
import { resolveImport } from "./resolve.js";

/** The plugin's identity: equal to `asp-plugin.json` (a test keeps them in step). */
export const PROVIDER_ID = "asp.provider-import-graph";
/** The plugin's version: equal to `package.json` and `asp-plugin.json`. */
export const PROVIDER_VERSION = "0.1.0";

/**
 * Answer `inspect/query` with an index: the graph of the changeset's after tree (or the
 * baseline), and for an `impact` query with deletions also the base tree's graph.
 */
export async function inspectWith(index: ImportGraphIndex, ctx: InspectContext): Promise<InspectOutcome> {
  const changeset = ctx.params.changeset;
  const after = await index.graphOf(changeset?.after ?? ctx.baseline, ctx);
  const changes = changeset?.changes ?? [];
  const needsBase = ctx.query.kind === "impact" && changeset !== null && changes.some((c) => c.kind === "deleted");
  const base = needsBase && changeset !== null ? await index.graphOf(changeset.base, ctx) : undefined;
  const missing = [...after.missing, ...(base?.missing ?? [])];
  let answer: ReturnType<typeof answerQuery>;
  try {
    answer = answerQuery(after.graph, ctx.query, changes, base?.graph);
  } catch (error) {
    if (error instanceof ImportGraphError) {
      return { status: "error", results: [], error: { code: error.code, message: error.message } };
    }
    throw error;
  }
  if (missing.length > 0) {
    return {
      status: "incomplete",
      results: answer.results,
      error: {
        code: "ASP_IMPORTS_UNREADABLE",
        message: `could not read ${missing.length} path(s): ${missing.slice(0, 20).join(", ")}`,
      },
    };
  }
  if (answer.truncated) {
    return {
      status: "incomplete",
      results: answer.results,
      error: { code: "ASP_IMPORTS_TRUNCATED", message: "more results than the default limit; pass a limit" },
    };
  }
  return { status: "complete", results: answer.results };
}

/**
 * `check/assess` with `check: true`: relative
 * imports in the changed files that match no file of the after tree, as `imports/unresolved`
 * warnings. Only the changed files are read, plus the tree listing.
 */
export async function assessWith(index: ImportGraphIndex, ctx: AssessContext): Promise<AssessOutcome> {
  const tree = ctx.changeset?.after ?? ctx.baseline;
  const changed = ctx.changes.filter((c) => c.after !== null && isSourcePath(c.path));
  const diagnostics: Diagnostic[] = [];
  const missing: string[] = [];
  if (changed.length > 0) {
    const { paths, unreadable } = await index.pathsOf(tree, ctx);
    missing.push(...unreadable);
    for (const change of changed) {
      let text: string;
      try {
        text = await ctx.readText(change.after as string);
      } catch (error) {
        if (ctx.signal.aborted) throw error;
        missing.push(change.path);
        continue;
      }
      const seen = new Map<string, number>();
      for (const site of parseModule(change.path, text).imports) {
        if (resolveImport(change.path, site.specifier, paths) !== null) continue;
        const occurrence = seen.get(site.specifier) ?? 0;
        seen.set(site.specifier, occurrence + 1);
        const start = { line: site.line, character: site.character };
        diagnostics.push({
          source: "imports",
          code: "imports/unresolved",
          severity: "warning",
          message: `${JSON.stringify(site.specifier)} matches no file of the change (tried the TypeScript source, the extensions and index files).`,
          range: {
            path: change.path,
            start,
            end: { line: site.line, character: site.character + site.specifier.length },
          },
          fingerprint: `imports1:${createHash("sha256")
            .update(`${change.path}\0${site.specifier}\0${occurrence}`)
            .digest("hex")}`,
          help: "Fix the relative import path, or add the file it names to the change.",
        });
      }
    }
  }
  return {
    status: missing.length > 0 ? "incomplete" : "complete",
    diagnostics,
    coverage: {
      sources: ["imports"],
      paths: changed.length - missing.length,
      ...(missing.length > 0 ? { missing } : {}),
    },
  };
}

/** Options of {@link createImportGraphProvider}. */
export interface ImportGraphProviderOptions {
  /**
   * Also declare `check` and answer `check/assess` with `imports/unresolved` warnings (source
   * `imports`). Off by default: the signed plugin is inspect-only and answers `check/assess`
   * with an honest `unsupported`.
   */
  readonly check?: boolean;
}

/**
 * Parse the plugin's command line with `node:util` `parseArgs` (strict, no positionals):
 * `--check` turns on {@link ImportGraphProviderOptions.check}.
 *
 * @throws ImportGraphError `ASP_IMPORTS_BAD_OPTIONS` for any other argument (`--check=yes` included).
 */
export function parseProviderArgs(argv: readonly string[]): ImportGraphProviderOptions {
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: { check: { type: "boolean" } },
      strict: true,
      allowPositionals: false,
    });
    return { check: values.check === true };
  } catch (cause) {
    throw new ImportGraphError("ASP_IMPORTS_BAD_OPTIONS", (cause as Error).message, {
      cause,
      data: { argv: argv.slice(0, 16) },
    });
  }
}

/**
 * The provider definition (inert until `.listen()`): capability `inspect` (`dependents`,
 * `dependencies`, `impact`, `symbol`) with one warm index for the life of the process, and
 * with `check: true` also `check` with source `imports`.
 *
 * @example
 * ```ts
 * createImportGraphProvider().listen();
 * ```
 */
export function createImportGraphProvider(options: ImportGraphProviderOptions = {}): ProviderDefinition {
  const index = new ImportGraphIndex();
  const check = options.check === true;
  return defineProvider({
    initialize: {
      provider: { id: PROVIDER_ID, version: PROVIDER_VERSION },
      diagnosticSources: check ? ["imports"] : [],
      capabilities: check ? ["check", "inspect"] : ["inspect"],
    },
    // host §2: not checking is a capability gap (`unsupported`), never a clean `complete`.
    assess: (ctx) => (check ? assessWith(index, ctx) : { status: "unsupported" }),
    inspect: (ctx) => inspectWith(index, ctx),
  });
}
