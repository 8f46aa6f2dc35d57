/**
 * Where a resolved value came from. `asp config show` prints one of these next to every stage
 * flag, selection value and budget, so an operator can see why a value is what it is.
 */

/** The kinds of source a value can come from. */
export const VALUE_SOURCE_KINDS = [
  "built_in",
  "env",
  "deployment",
  "project",
  "frame",
  "legacy_review_auto",
  "imported_quarantine",
] as const;
/** One of {@link VALUE_SOURCE_KINDS}. */
export type ValueSourceKind = (typeof VALUE_SOURCE_KINDS)[number];

/** One value's provenance. */
export interface ValueSource {
  /** Which kind of source supplied the value. */
  readonly kind: ValueSourceKind;
  /** The variable name or setting path (`OPENAI4S_AUTO_WALL_TIME_S`, `budgets.wall_time_s`); null for built-ins. */
  readonly key: string | null;
  /** The file or label the caller named for a configuration object (`deploy.json`); otherwise null. */
  readonly origin: string | null;
}

/** The built-in default's source. */
export const BUILT_IN: ValueSource = Object.freeze({ kind: "built_in", key: null, origin: null });

/** Build a {@link ValueSource}. */
export function sourceOf(kind: ValueSourceKind, key: string | null = null, origin: string | null = null): ValueSource {
  return Object.freeze({ kind, key, origin });
}

/** `deployment (deploy.json) budgets.wall_time_s`, `env OPENAI4S_STAGE1_TRUSTED_DELIVERY`, `built-in default`. */
export function formatSource(source: ValueSource): string {
  if (source.kind === "built_in") return "built-in default";
  const origin = source.origin === null ? "" : ` (${source.origin})`;
  const key = source.key === null ? "" : ` ${source.key}`;
  return `${source.kind}${origin}${key}`;
}
