import { AspError } from "@asp/contracts";

/**
 * Every error code `@asp/store-postgres` throws (besides the `ASP_EVIDENCE_*` codes of the
 * evidence store contracts). Stable: callers and tests branch on these, never on message text.
 * No error ever contains the password: URLs in messages and `data` are redacted.
 */
export type PgStoreErrorCode =
  /** The store URL is not a `postgres://` or `postgresql://` URL. */
  | "ASP_PGSTORE_BAD_URL"
  /** `passwordFile` cannot be read. */
  | "ASP_PGSTORE_CREDENTIALS"
  /** The server cannot be reached, refused the login, or the connection broke (`data.pgCode`). */
  | "ASP_PGSTORE_UNAVAILABLE"
  /** The database has no evidence schema yet, or an older one: run `asp store migrate`. */
  | "ASP_PGSTORE_NOT_MIGRATED"
  /** The database has a newer schema than this package knows: upgrade `@asp/store-postgres`. */
  | "ASP_PGSTORE_SCHEMA_NEWER"
  /** The database's tables hold something that is not an evidence store. */
  | "ASP_PGSTORE_NOT_A_STORE";

/** Every {@link PgStoreErrorCode}, for table tests and documentation. */
export const PGSTORE_ERROR_CODES: readonly PgStoreErrorCode[] = [
  "ASP_PGSTORE_BAD_URL",
  "ASP_PGSTORE_CREDENTIALS",
  "ASP_PGSTORE_UNAVAILABLE",
  "ASP_PGSTORE_NOT_MIGRATED",
  "ASP_PGSTORE_SCHEMA_NEWER",
  "ASP_PGSTORE_NOT_A_STORE",
];

/** The one error class `@asp/store-postgres` throws; `category` is `input` unless said otherwise. */
export class PgStoreError extends AspError<PgStoreErrorCode> {}
