import type { ImportSite, ParsedModule } from "./parse.js";
import { resolveImport } from "./resolve.js";

/** One resolved import: `from` imports `to` with `specifier` on `line` (0-based) of `from`. */
export interface ImportEdge {
  readonly from: string;
  readonly to: string;
  readonly specifier: string;
  readonly line: number;
}

/** A file of an impact set: a changed file (depth 0) or one that depends on it, through `via`. */
export interface ImpactEntry {
  readonly path: string;
  readonly depth: number;
  readonly via: string | null;
}

/** Where a symbol is exported. */
export interface SymbolSite {
  readonly path: string;
  readonly line: number;
  readonly kind: string;
  readonly from?: string;
}

/** The module import graph of a tree. Every answer is sorted (path, then line). */
export interface ImportGraph {
  /** The source files of the graph, sorted. */
  readonly files: readonly string[];
  /** What `path` imports (resolved repository files). */
  dependencies(path: string): ImportEdge[];
  /** Which files import `path` directly. */
  dependents(path: string): ImportEdge[];
  /** Relative imports of `path` that match no file. */
  unresolved(path: string): ImportSite[];
  /** `paths` and everything that depends on them, transitively (cycles included once). */
  impact(paths: readonly string[]): ImpactEntry[];
  /** Files exporting `name`: declarations, named re-exports and `export *` chains reaching one. */
  findSymbol(name: string): SymbolSite[];
}

const byPathLine =
  <T extends { line: number }>(key: (t: T) => string) =>
  (a: T, b: T) =>
    key(a) !== key(b) ? (key(a) < key(b) ? -1 : 1) : a.line - b.line;

/**
 * Build the graph from parsed modules (path -> {@link ParsedModule}). `paths` are all files of
 * the tree (default: the modules' paths), so an import of a non-source file (`./data.json`) resolves.
 *
 * @example
 * ```ts
 * const graph = buildImportGraph(new Map([["a.ts", parseModule("a.ts", 'import "./b.js";')], ["b.ts", parseModule("b.ts", "")]]));
 * graph.dependents("b.ts"); // [{ from: "a.ts", to: "b.ts", specifier: "./b.js", line: 0 }]
 * ```
 */
export function buildImportGraph(
  modules: ReadonlyMap<string, ParsedModule>,
  paths: ReadonlySet<string> = new Set(modules.keys()),
): ImportGraph {
  const forward = new Map<string, ImportEdge[]>();
  const reverse = new Map<string, ImportEdge[]>();
  const missing = new Map<string, ImportSite[]>();
  for (const [from, mod] of modules) {
    const out: ImportEdge[] = [];
    const seen = new Set<string>();
    for (const site of mod.imports) {
      const to = resolveImport(from, site.specifier, paths);
      if (to === "external") continue;
      if (to === null) {
        missing.set(from, [...(missing.get(from) ?? []), site]);
        continue;
      }
      const key = `${to}\0${site.line}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const edge = { from, to, specifier: site.specifier, line: site.line };
      out.push(edge);
      const back = reverse.get(to);
      if (back === undefined) reverse.set(to, [edge]);
      else back.push(edge);
    }
    forward.set(from, out);
  }
  const files = [...modules.keys()].sort();

  function impact(seeds: readonly string[]): ImpactEntry[] {
    const found = new Map<string, ImpactEntry>();
    let frontier: string[] = [];
    for (const s of seeds) {
      if (found.has(s)) continue;
      found.set(s, { path: s, depth: 0, via: null });
      frontier.push(s);
    }
    for (let depth = 1; frontier.length > 0; depth++) {
      const next: string[] = [];
      for (const f of frontier.sort()) {
        for (const edge of reverse.get(f) ?? []) {
          if (found.has(edge.from)) continue;
          found.set(edge.from, { path: edge.from, depth, via: f });
          next.push(edge.from);
        }
      }
      frontier = next;
    }
    return [...found.values()].sort((a, b) => a.depth - b.depth || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  function findSymbol(name: string): SymbolSite[] {
    const sites: SymbolSite[] = [];
    const exporting = new Set<string>();
    for (const [path, mod] of modules) {
      for (const e of mod.exports) {
        if (e.name !== name) continue;
        sites.push(
          e.from === undefined
            ? { path, line: e.line, kind: e.kind }
            : { path, line: e.line, kind: e.kind, from: e.from },
        );
        exporting.add(path);
      }
    }
    // `export * from "./x"` re-exports x's names (not its default): follow chains to a fixpoint.
    if (name !== "default") {
      for (let grew = true; grew; ) {
        grew = false;
        for (const [path, mod] of modules) {
          if (exporting.has(path)) continue;
          for (const star of mod.starExports) {
            const to = resolveImport(path, star.specifier, paths);
            if (to === null || to === "external" || !exporting.has(to)) continue;
            sites.push({ path, line: star.line, kind: "re-export *", from: star.specifier });
            exporting.add(path);
            grew = true;
            break;
          }
        }
      }
    }
    return sites.sort(byPathLine((s) => s.path));
  }

  return {
    files,
    dependencies: (path) => [...(forward.get(path) ?? [])].sort(byPathLine((e) => e.to)),
    dependents: (path) => [...(reverse.get(path) ?? [])].sort(byPathLine((e) => e.from)),
    unresolved: (path) => [...(missing.get(path) ?? [])],
    impact,
    findSymbol,
  };
}
