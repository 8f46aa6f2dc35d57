import { createHash } from "node:crypto";

/** What a fingerprint is computed from: nothing positional. */
export interface FingerprintInput {
  /** The namespaced code, e.g. `ts/2322`. */
  readonly code: string;
  /** The file the diagnostic is in (relative path), or `null` for a global / options one. */
  readonly path: string | null;
  /**
   * The offending text: the diagnostic's span when it is short and on one line, else the
   * text of its first line. Whitespace is normalized before hashing.
   */
  readonly text: string;
  /** Index among diagnostics with equal code, path and normalized text, in file order. */
  readonly occurrence: number;
}

/** Collapse runs of whitespace and trim, so re-indentation does not change a fingerprint. */
export function normalizeText(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

/**
 * A stable, content-based identity for a diagnostic within the `ts` source: sha256 over the
 * code, the path, the whitespace-normalized offending text and the occurrence index among equal
 * ones. No line or column goes in, so inserting unrelated lines above leaves it unchanged,
 * while a second identical error in the same file gets a distinct fingerprint.
 *
 * @example
 * ```ts
 * fingerprintDiagnostic({ code: "ts/2322", path: "src/a.ts", text: "const n: number = 'x';", occurrence: 0 });
 * // "ts1:5f0c…" (64 hex digits)
 * ```
 */
export function fingerprintDiagnostic(input: FingerprintInput): string {
  const h = createHash("sha256");
  // Length-prefixed fields: no two different inputs concatenate to the same bytes.
  for (const field of [input.code, input.path ?? "", normalizeText(input.text), String(input.occurrence)]) {
    h.update(`${field.length}:${field}\n`);
  }
  return `ts1:${h.digest("hex")}`;
}
