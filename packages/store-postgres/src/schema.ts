import { randomUUID } from "node:crypto";
import { canonicalize } from "@asp/evidence";
import type pg from "pg";
import { connectClient, type PgConnectionOptions, poolConfig, redactStoreLocation, unavailable } from "./connection.js";
import { PgStoreError } from "./errors.js";

/** The PostgreSQL schema (namespace) a store lives in unless told otherwise. */
export const DEFAULT_SCHEMA = "asp_evidence";
/** The format record's `format` of a PostgreSQL evidence store. */
export const PG_STORE_FORMAT = "asp-evidence-postgres";

const IDENT = /^[a-z_][a-z0-9_]{0,62}$/;

/** Check a schema name (it is spliced into SQL, so only plain lowercase identifiers). */
export function checkSchemaName(schema: string): string {
  if (!IDENT.test(schema)) {
    throw new PgStoreError(
      "ASP_PGSTORE_BAD_URL",
      `schema must be a lowercase SQL identifier (got ${JSON.stringify(schema)})`,
      {
        data: { schema },
      },
    );
  }
  return schema;
}

interface Migration {
  readonly version: number;
  readonly name: string;
  /** Runs inside the migration's transaction. */
  up(q: Queryable, schema: string): Promise<void>;
}

/**
 * The schema's history, oldest first. Append only: a released migration is never edited. The
 * key/value shape mirrors the level store's spaces (see `Kv` in `@asp/evidence`), so one chain
 * encoder serves both; keys are bytea so they order bytewise, as level's do.
 */
const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "kv spaces and format record",
    async up(q, s) {
      await q.query(
        `CREATE TABLE ${s}.kv (space text NOT NULL, key bytea NOT NULL, value bytea NOT NULL, PRIMARY KEY (space, key))`,
      );
      const record = canonicalize({
        format: PG_STORE_FORMAT,
        version: 1,
        id: randomUUID(),
        createdAt: new Date().toISOString(),
      });
      await q.query(`INSERT INTO ${s}.kv (space, key, value) VALUES ('meta', $1, $2)`, [
        Buffer.from("format"),
        Buffer.from(record),
      ]);
    },
  },
];

/** The newest schema version this package writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;

/** Result of {@link migrateStore}. */
export interface MigrateResult {
  /** The schema version before (0 for a database without the store). */
  readonly from: number;
  readonly to: number;
  /** Versions applied by this call (empty when already current). */
  readonly applied: readonly number[];
}

/** Options of {@link migrateStore}. */
export interface MigrateOptions extends PgConnectionOptions {
  /** The PostgreSQL schema holding the store (default `asp_evidence`). */
  readonly schema?: string;
}

const MIGRATE_LOCK = 0x41535045; // "ASPE": one migrator at a time per database

/**
 * Create or upgrade the evidence store's schema in the database at `url` (what `asp store
 * migrate` runs). Each migration runs in its own transaction and is recorded in
 * `<schema>.schema_migrations`; concurrent migrators serialize on an advisory lock. Opening a
 * store never migrates.
 *
 * @throws PgStoreError `ASP_PGSTORE_BAD_URL`, `ASP_PGSTORE_CREDENTIALS`, `ASP_PGSTORE_UNAVAILABLE`,
 *   `ASP_PGSTORE_SCHEMA_NEWER` (the database is ahead of this package: nothing is changed).
 * @example
 * ```ts
 * const { from, to } = await migrateStore("postgres://asp@db.internal/evidence");
 * ```
 */
export async function migrateStore(url: string, options: MigrateOptions = {}): Promise<MigrateResult> {
  const schema = checkSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const { config, secrets } = poolConfig(url, options);
  const location = redactStoreLocation(url);
  const client = await connectClient(config, location, secrets);
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATE_LOCK]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const from = await currentVersion(client, schema);
    if (from > SCHEMA_VERSION) throw newer(location, from);
    const applied: number[] = [];
    for (const m of MIGRATIONS) {
      if (m.version <= from) continue;
      await client.query("BEGIN");
      try {
        await m.up(client, schema);
        await client.query(`INSERT INTO ${schema}.schema_migrations (version, name) VALUES ($1, $2)`, [
          m.version,
          m.name,
        ]);
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK").catch(() => {});
        throw error;
      }
      applied.push(m.version);
    }
    return { from, to: Math.max(from, SCHEMA_VERSION), applied };
  } catch (error) {
    if (error instanceof PgStoreError) throw error;
    throw unavailable(error, location, secrets);
  } finally {
    await client.end().catch(() => {});
  }
}

type Queryable = Pick<pg.ClientBase, "query">;

async function currentVersion(q: Queryable, schema: string): Promise<number> {
  const r = await q.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${schema}.schema_migrations`);
  return r.rows[0]?.v ?? 0;
}

function newer(location: string, version: number): PgStoreError {
  return new PgStoreError(
    "ASP_PGSTORE_SCHEMA_NEWER",
    `the evidence store at ${location} has schema version ${version}, newer than this @asp/store-postgres knows (${SCHEMA_VERSION}): upgrade it`,
    { data: { url: location, version, supported: SCHEMA_VERSION } },
  );
}

/**
 * Refuse a database whose schema is missing, older or newer than {@link SCHEMA_VERSION}.
 * @throws PgStoreError `ASP_PGSTORE_NOT_MIGRATED`, `ASP_PGSTORE_SCHEMA_NEWER`.
 */
export async function assertSchemaCurrent(q: Queryable, schema: string, location: string): Promise<void> {
  const exists = await q.query<{ t: string | null }>("SELECT to_regclass($1)::text AS t", [
    `${schema}.schema_migrations`,
  ]);
  const version = exists.rows[0]?.t == null ? 0 : await currentVersion(q, schema);
  if (version > SCHEMA_VERSION) throw newer(location, version);
  if (version < SCHEMA_VERSION) {
    throw new PgStoreError(
      "ASP_PGSTORE_NOT_MIGRATED",
      `the evidence store at ${location} has schema version ${version}, this package needs ${SCHEMA_VERSION}: run \`asp store migrate --config <host config>\` (or migrateStore())`,
      { data: { url: location, version, required: SCHEMA_VERSION } },
    );
  }
}
