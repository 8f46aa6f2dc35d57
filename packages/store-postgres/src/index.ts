/**
 * `@asp/store-postgres`: the evidence store (hash-chained fact log and content-addressed object
 * store of `@asp/evidence`) on PostgreSQL, so many CI runners and workers share one host's
 * verifiable history. Same contracts, chain format and digests as the embedded level store;
 * appends from many processes serialize on one chain; the schema is versioned and migrated
 * explicitly.
 *
 * @packageDocumentation
 */

export type { PgConnectionOptions } from "./connection.js";
export { isPostgresUrl, redactStoreLocation } from "./connection.js";
export type { PgStoreErrorCode } from "./errors.js";
export { PGSTORE_ERROR_CODES, PgStoreError } from "./errors.js";
export type { HoldOptions } from "./hold.js";
export type { PostgresStoreOptions } from "./open.js";
export { openPostgresStore } from "./open.js";
export type { MigrateOptions, MigrateResult } from "./schema.js";
export { DEFAULT_SCHEMA, migrateStore, SCHEMA_VERSION } from "./schema.js";
