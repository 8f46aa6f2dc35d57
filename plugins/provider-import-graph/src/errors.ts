import { AspError } from "@asp/contracts";

/**
 * Every code `@asp/provider-import-graph` raises. Stable public API: switch on these, never on
 * message text.
 *
 * - `ASP_IMPORTS_BAD_QUERY`: an `inspect/query` lacks what its kind needs (a `path` for
 *   `dependents` / `dependencies`, a `symbol` for `symbol`, a changeset or path for `impact`).
 * - `ASP_IMPORTS_BAD_OPTIONS`: the plugin's command line has an unknown argument (only `--check`).
 */
export type ImportGraphErrorCode = "ASP_IMPORTS_BAD_QUERY" | "ASP_IMPORTS_BAD_OPTIONS";

/** Thrown by `@asp/provider-import-graph`. */
export class ImportGraphError extends AspError<ImportGraphErrorCode> {}
