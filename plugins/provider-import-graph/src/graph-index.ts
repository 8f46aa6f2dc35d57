import { type ContentSource, TextCache, TreeLister } from "@asp/sdk";
import { buildImportGraph, type ImportGraph } from "./graph.js";
import { isSourcePath, type ParsedModule, parseModule } from "./parse.js";

/** A graph of one tree, and what could not be read to build it. */
export interface TreeGraph {
  readonly graph: ImportGraph;
  /** Paths (or folders) that could not be read; non-empty means the graph is partial. */
  readonly missing: readonly string[];
  /** Every file path of the tree. */
  readonly paths: ReadonlySet<string>;
}

const SKIP_DIRS = new Set([".git", ".hg", ".svn", "node_modules"]);

/**
 * Builds import graphs of trees through a {@link ContentSource} and keeps what it learnt:
 * subtree listings and parsed modules by digest (content-addressed, valid in every request) and
 * the last complete graphs by tree digest. A second query on the same tree reads nothing; a
 * query after a one-file change reads that one blob and the folders on its path.
 */
export class ImportGraphIndex {
  readonly #lister = new TreeLister();
  readonly #texts = new TextCache();
  readonly #parsed = new Map<string, ParsedModule>();
  readonly #graphs = new Map<string, TreeGraph>();
  /** Files parsed since creation (cache misses), for tests. */
  parsedFiles = 0;

  /** Every file path of `tree`, and the folders that could not be listed. */
  async pathsOf(tree: string, source: ContentSource): Promise<{ paths: Set<string>; unreadable: string[] }> {
    const hit = this.#graphs.get(tree);
    if (hit !== undefined) return { paths: new Set(hit.paths), unreadable: [] };
    const listing = await this.#lister.list(tree, source, (name) => SKIP_DIRS.has(name));
    return { paths: new Set(listing.files.keys()), unreadable: [...listing.unreadable.keys()] };
  }

  /** The graph of `tree` (`node_modules` and VCS folders are left out). */
  async graphOf(tree: string, source: ContentSource): Promise<TreeGraph> {
    const hit = this.#graphs.get(tree);
    if (hit !== undefined) return hit;
    const listing = await this.#lister.list(tree, source, (name) => SKIP_DIRS.has(name));
    const sources = [...listing.files].filter(([p]) => isSourcePath(p));
    const keyOf = (path: string, digest: string): string => `${path.slice(path.lastIndexOf("."))}|${digest}`;
    const failures = await this.#texts.fetch(
      sources.filter(([p, d]) => !this.#parsed.has(keyOf(p, d))).map(([, d]) => d),
      source,
    );
    const missing = [...listing.unreadable.keys()];
    const modules = new Map<string, ParsedModule>();
    for (const [path, digest] of sources) {
      const key = keyOf(path, digest);
      let mod = this.#parsed.get(key);
      if (mod === undefined) {
        const text = this.#texts.get(digest);
        if (text === undefined) {
          if (failures.has(digest)) missing.push(path);
          continue;
        }
        mod = parseModule(path, text);
        this.parsedFiles++;
        if (this.#parsed.size >= 200_000) this.#parsed.clear();
        this.#parsed.set(key, mod);
      }
      modules.set(path, mod);
    }
    const paths = new Set(listing.files.keys());
    const result: TreeGraph = { graph: buildImportGraph(modules, paths), missing: missing.sort(), paths };
    if (result.missing.length === 0) {
      if (this.#graphs.size >= 8) this.#graphs.delete(this.#graphs.keys().next().value as string);
      this.#graphs.set(tree, result);
    }
    return result;
  }
}
