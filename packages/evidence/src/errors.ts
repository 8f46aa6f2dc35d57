import { AspError, type AspErrorOptions } from "@asp/contracts";

/**
 * Every code `@asp/evidence` throws. Stable public API: callers and tests switch on these, never
 * on message text.
 *
 * - `ASP_EVIDENCE_NON_CANONICAL_VALUE`: a value has no RFC 8785 form (NaN, Infinity, lone
 *   surrogate, `undefined`, bigint, function, symbol, cycle, sparse array, non-plain object).
 * - `ASP_EVIDENCE_BAD_DIGEST`: a string is not `sha256:<64 lowercase hex>`.
 * - `ASP_EVIDENCE_BAD_PATH`: a path is absolute, contains `..`, `.`, empty segments, a backslash
 *   or NUL, or is not a single name where one is required.
 * - `ASP_EVIDENCE_BAD_OBJECT`: a tree, changeset, snapshot or fact entry is malformed (bad mode,
 *   duplicate name, unsorted entries, empty kind, bytes that do not decode as the object).
 * - `ASP_EVIDENCE_NOT_FOUND`: no object, record or seq with that id in the store.
 * - `ASP_EVIDENCE_INTEGRITY`: stored bytes do not hash to their id (category `integrity`).
 * - `ASP_EVIDENCE_CHAIN_BROKEN`: a fact log entry does not link to its neighbours (category
 *   `integrity`).
 * - `ASP_EVIDENCE_UNRESOLVED_REF`: an evidence snapshot names a ref the store cannot resolve.
 * - `ASP_EVIDENCE_NOT_A_STORE`: a directory exists, is not empty, and is not an evidence store.
 * - `ASP_EVIDENCE_STORE_CORRUPT`: an evidence store is damaged: the database fails to open, or
 *   its log no longer reaches the anchored head (entries dropped, a log that ends early, a chain
 *   that restarted, a missing or unreadable anchor); `data.reason` names what is missing
 *   (category `integrity`).
 * - `ASP_EVIDENCE_STORE_LOCKED`: another process (or another open handle) holds the store, and
 *   the wait for it ran out; `data.pid` is the holder's pid when known.
 * - `ASP_EVIDENCE_READ_ONLY`: a write through a store opened read-only.
 * - `ASP_EVIDENCE_WRITE_FAILED`: an append could not be made durable (no space, I/O error); the
 *   handle takes no more appends (category `internal`), `data.errno` names the cause when known.
 * - `ASP_EVIDENCE_BAD_HEAD`: a head is not `SEQ:DIGEST` (a positive seq and a digest).
 * - `ASP_EVIDENCE_TARGET_NOT_EMPTY`: a backup or salvage target exists and is not empty.
 * - `ASP_EVIDENCE_STORE_CLOSED`: the store was used after `close()`.
 * - `ASP_EVIDENCE_UNSUPPORTED_FORMAT`: the store was written by a newer, unknown format version.
 * - `ASP_EVIDENCE_GIT_FAILED`: the `git` binary failed or the revision does not exist.
 * - `ASP_EVIDENCE_UNREPRESENTABLE_NAME`: a file name in the judged tree is not valid UTF-8 (or
 *   names `.git` inside a commit): the host cannot hold it, so the snapshot fails rather than
 *   leave the file out (THREAT-MODEL invariant 11; the gate is then indeterminate).
 * - `ASP_EVIDENCE_IO`: a filesystem operation failed while snapshotting (category `internal`).
 * - `ASP_EVIDENCE_CONDITION_FAILED`: a conditional append (`append(entries, { expect })`) found a
 *   state key at another seq than expected when it came to commit (another writer appended
 *   under it first): nothing of that call was written (category `internal`, like a held store:
 *   re-read the state and decide again). `data: { key, expected, actual }`, each seq or `null`.
 */
export type EvidenceErrorCode =
  | "ASP_EVIDENCE_NON_CANONICAL_VALUE"
  | "ASP_EVIDENCE_BAD_DIGEST"
  | "ASP_EVIDENCE_BAD_PATH"
  | "ASP_EVIDENCE_BAD_OBJECT"
  | "ASP_EVIDENCE_NOT_FOUND"
  | "ASP_EVIDENCE_INTEGRITY"
  | "ASP_EVIDENCE_CHAIN_BROKEN"
  | "ASP_EVIDENCE_UNRESOLVED_REF"
  | "ASP_EVIDENCE_NOT_A_STORE"
  | "ASP_EVIDENCE_STORE_CORRUPT"
  | "ASP_EVIDENCE_STORE_LOCKED"
  | "ASP_EVIDENCE_READ_ONLY"
  | "ASP_EVIDENCE_WRITE_FAILED"
  | "ASP_EVIDENCE_BAD_HEAD"
  | "ASP_EVIDENCE_TARGET_NOT_EMPTY"
  | "ASP_EVIDENCE_STORE_CLOSED"
  | "ASP_EVIDENCE_UNSUPPORTED_FORMAT"
  | "ASP_EVIDENCE_GIT_FAILED"
  | "ASP_EVIDENCE_UNREPRESENTABLE_NAME"
  | "ASP_EVIDENCE_IO"
  | "ASP_EVIDENCE_CONDITION_FAILED";

/** Every {@link EvidenceErrorCode}, for table tests and documentation. */
export const EVIDENCE_ERROR_CODES: readonly EvidenceErrorCode[] = [
  "ASP_EVIDENCE_NON_CANONICAL_VALUE",
  "ASP_EVIDENCE_BAD_DIGEST",
  "ASP_EVIDENCE_BAD_PATH",
  "ASP_EVIDENCE_BAD_OBJECT",
  "ASP_EVIDENCE_NOT_FOUND",
  "ASP_EVIDENCE_INTEGRITY",
  "ASP_EVIDENCE_CHAIN_BROKEN",
  "ASP_EVIDENCE_UNRESOLVED_REF",
  "ASP_EVIDENCE_NOT_A_STORE",
  "ASP_EVIDENCE_STORE_CORRUPT",
  "ASP_EVIDENCE_STORE_LOCKED",
  "ASP_EVIDENCE_READ_ONLY",
  "ASP_EVIDENCE_WRITE_FAILED",
  "ASP_EVIDENCE_BAD_HEAD",
  "ASP_EVIDENCE_TARGET_NOT_EMPTY",
  "ASP_EVIDENCE_STORE_CLOSED",
  "ASP_EVIDENCE_UNSUPPORTED_FORMAT",
  "ASP_EVIDENCE_GIT_FAILED",
  "ASP_EVIDENCE_UNREPRESENTABLE_NAME",
  "ASP_EVIDENCE_IO",
  "ASP_EVIDENCE_CONDITION_FAILED",
];

const INTEGRITY_CODES: ReadonlySet<EvidenceErrorCode> = new Set([
  "ASP_EVIDENCE_INTEGRITY",
  "ASP_EVIDENCE_CHAIN_BROKEN",
  "ASP_EVIDENCE_STORE_CORRUPT",
]);
const INTERNAL_CODES: ReadonlySet<EvidenceErrorCode> = new Set([
  "ASP_EVIDENCE_STORE_LOCKED",
  "ASP_EVIDENCE_WRITE_FAILED",
  "ASP_EVIDENCE_STORE_CLOSED",
  "ASP_EVIDENCE_GIT_FAILED",
  "ASP_EVIDENCE_IO",
  "ASP_EVIDENCE_CONDITION_FAILED",
]);

/**
 * The one error class `@asp/evidence` throws. Its category follows from the code: integrity
 * failures (`INTEGRITY`, `CHAIN_BROKEN`, `STORE_CORRUPT`) are `integrity`, environment failures
 * (`STORE_LOCKED`, `WRITE_FAILED`, `STORE_CLOSED`, `GIT_FAILED`, `IO`) and a lost race
 * (`CONDITION_FAILED`) are `internal`, everything
 * else is `input`.
 */
export class EvidenceError extends AspError<EvidenceErrorCode> {
  constructor(code: EvidenceErrorCode, message: string, options: AspErrorOptions = {}) {
    super(code, message, {
      ...options,
      category:
        options.category ?? (INTEGRITY_CODES.has(code) ? "integrity" : INTERNAL_CODES.has(code) ? "internal" : "input"),
    });
  }
}
