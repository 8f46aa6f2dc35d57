import type { InspectResult } from "@asp/contracts";
import { ImportGraphError } from "./errors.js";
import type { ImportGraph } from "./graph.js";

/** An `inspect/query` query (the protocol's `InspectParams["query"]`). */
export interface GraphQuery {
  readonly kind: "dependents" | "dependencies" | "impact" | "symbol";
  readonly path?: string;
  readonly symbol?: string;
  readonly limit?: number;
}

/** A changed path, as in a changeset. */
export interface GraphChange {
  readonly path: string;
  readonly kind: "added" | "modified" | "deleted" | "mode_changed";
}

/** One result row of `InspectResultSchema`. */
export type GraphResult = InspectResult["results"][number];

/** Results of one query, and whether the default cap cut them. */
export interface GraphAnswer {
  readonly results: GraphResult[];
  /** True when there were more results than the cap (the query's `limit`, else 10,000). */
  readonly truncated: boolean;
}

/** Results returned when a query gives no `limit`. */
export const DEFAULT_LIMIT = 10_000;

/**
 * Answer a query on a graph:
 *
 * - `dependents` of `path`: the files importing it directly (`line` = the import in the importer),
 * - `dependencies` of `path`: the repository files it imports (`line` = the import in `path`),
 * - `impact`: the changed files (or `path`) and everything depending on them, transitively;
 *   deleted files' dependents come from `baseGraph` (the changeset's base tree) when given,
 * - `symbol`: where `symbol` is exported (declarations, re-exports, `export *` chains).
 *
 * @throws ImportGraphError `ASP_IMPORTS_BAD_QUERY` when the query lacks its `path` / `symbol`, or
 *   an `impact` query has neither a changeset nor a `path`.
 */
export function answerQuery(
  graph: ImportGraph,
  query: GraphQuery,
  changes: readonly GraphChange[] = [],
  baseGraph?: ImportGraph,
): GraphAnswer {
  const need = (value: string | undefined, what: "path" | "symbol"): string => {
    if (value === undefined) {
      throw new ImportGraphError("ASP_IMPORTS_BAD_QUERY", `a ${query.kind} query needs a ${what}`, {
        data: { kind: query.kind, field: what },
      });
    }
    return value;
  };
  let results: GraphResult[];
  switch (query.kind) {
    case "dependents":
      results = graph.dependents(need(query.path, "path")).map((e) => ({
        path: e.from,
        line: e.line,
        detail: `imports ${JSON.stringify(e.specifier)}`,
      }));
      break;
    case "dependencies":
      results = graph.dependencies(need(query.path, "path")).map((e) => ({
        path: e.to,
        line: e.line,
        detail: `imported as ${JSON.stringify(e.specifier)}`,
      }));
      break;
    case "impact": {
      const seeds =
        query.path !== undefined ? [query.path] : changes.filter((c) => c.kind !== "deleted").map((c) => c.path);
      const deleted = query.path !== undefined ? [] : changes.filter((c) => c.kind === "deleted").map((c) => c.path);
      if (seeds.length === 0 && deleted.length === 0) {
        throw new ImportGraphError("ASP_IMPORTS_BAD_QUERY", "an impact query needs a changeset or a path", {
          data: { kind: query.kind, field: "path" },
        });
      }
      // A deleted file is not in the after graph: whoever imported it (in the base) is affected.
      const orphans = new Set<string>();
      if (baseGraph !== undefined) {
        const present = new Set(graph.files);
        for (const e of baseGraph.impact(deleted)) if (e.depth === 1 && present.has(e.path)) orphans.add(e.path);
      }
      const entries = graph.impact([...seeds, ...orphans]);
      const rows = new Map<string, GraphResult>();
      for (const path of deleted) rows.set(path, { path, detail: "deleted" });
      for (const e of entries) {
        if (rows.has(e.path)) continue;
        const detail =
          e.depth > 0
            ? `depends on ${e.via} (depth ${e.depth})`
            : seeds.includes(e.path)
              ? "changed"
              : "imported a deleted file";
        rows.set(e.path, { path: e.path, detail });
      }
      results = [...rows.values()];
      break;
    }
    case "symbol": {
      const name = need(query.symbol, "symbol");
      results = graph.findSymbol(name).map((s) => ({
        path: s.path,
        symbol: name,
        line: s.line,
        detail: s.from === undefined ? s.kind : `${s.kind} from ${JSON.stringify(s.from)}`,
      }));
      break;
    }
  }
  const limit = query.limit ?? DEFAULT_LIMIT;
  return { results: results.slice(0, limit), truncated: query.limit === undefined && results.length > limit };
}
