/**
 * `@asp/provider-import-graph`: an inspect provider answering `inspect/query` (`dependents`,
 * `dependencies`, `impact`, `symbol`) from the module import graph of a TS/JS tree read only
 * through the host's `host/readTree` / `host/readBlob` callbacks.
 *
 * @packageDocumentation
 */

// The content helpers moved to @asp/sdk; re-exported so existing imports keep working.
export type { ContentSource, TreeListing } from "@asp/sdk";
export { TextCache, TreeLister } from "@asp/sdk";
export type { ImportGraphErrorCode } from "./errors.js";
export { ImportGraphError } from "./errors.js";
export type { ImpactEntry, ImportEdge, ImportGraph, SymbolSite } from "./graph.js";
export { buildImportGraph } from "./graph.js";
export type { TreeGraph } from "./graph-index.js";
export { ImportGraphIndex } from "./graph-index.js";
export type { ExportSite, ImportSite, ParsedModule } from "./parse.js";
export { isSourcePath, parseModule, SOURCE_EXTENSIONS } from "./parse.js";
export type { ImportGraphProviderOptions } from "./provider.js";
export {
  assessWith,
  createImportGraphProvider,
  inspectWith,
  PROVIDER_ID,
  PROVIDER_VERSION,
  parseProviderArgs,
} from "./provider.js";
export type { GraphAnswer, GraphChange, GraphQuery, GraphResult } from "./query.js";
export { answerQuery, DEFAULT_LIMIT } from "./query.js";
export { normalizePath, resolveImport } from "./resolve.js";
