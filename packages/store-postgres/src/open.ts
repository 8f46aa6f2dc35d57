import {
  type Clock,
  createKvFactLog,
  createKvObjectStore,
  defaultHasher,
  parseCanonical,
  type Store,
  type StoreOptions,
} from "@asp/evidence";
import pg from "pg";
import { type PgConnectionOptions, poolConfig, redactStoreLocation, unavailable } from "./connection.js";
import { PgStoreError } from "./errors.js";
import { type HoldOptions, holdKeys } from "./hold.js";
import { createPgShared } from "./kv.js";
import { assertSchemaCurrent, checkSchemaName, DEFAULT_SCHEMA, PG_STORE_FORMAT } from "./schema.js";

/** Options of {@link openPostgresStore}. */
export interface PostgresStoreOptions extends StoreOptions, PgConnectionOptions {
  /** The PostgreSQL schema holding the store (default `asp_evidence`); several stores may share a database. */
  readonly schema?: string;
  /** Refuse appends and puts (`ASP_EVIDENCE_READ_ONLY`); reads see the live, shared chain. */
  readonly readOnly?: boolean;
  /**
   * Hold these keys until `close()` (ADR 0003 across hosts): a gate holds its repository's
   * trusted-base key for its whole evaluation, so two hosts gating one repository never decide
   * against a base the other moved. Waits bounded, like a level store held by another process.
   */
  readonly hold?: HoldOptions;
}

const systemClock: Clock = { now: () => new Date() };

/**
 * Open the evidence store in the PostgreSQL database at `url`: the same `FactLog` and
 * `ObjectStore` contracts, chain format and digests as a level store (a receipt verifies the same
 * whichever store holds it), for many hosts at once. Every append reads the head and writes the
 * next entries in one transaction holding the chain's advisory lock, committed with
 * `synchronous_commit = on`: N processes make one chain, with no fork, gap or duplicated seq.
 *
 * Credentials come from the URL, `passwordFile`, or `PGPASSWORD` / `PG*` variables; they are
 * never echoed (`store.location` and every error carry the URL through {@link redactStoreLocation}).
 * The schema is never created or upgraded here: run {@link migrateStore} (`asp store migrate`).
 *
 * @throws EvidenceError `ASP_EVIDENCE_STORE_LOCKED` (a `hold` key held elsewhere past `waitMs`).
 * @throws PgStoreError `ASP_PGSTORE_BAD_URL`, `ASP_PGSTORE_CREDENTIALS`, `ASP_PGSTORE_UNAVAILABLE`,
 *   `ASP_PGSTORE_NOT_MIGRATED` (no or an older schema: run `asp store migrate`),
 *   `ASP_PGSTORE_SCHEMA_NEWER`, `ASP_PGSTORE_NOT_A_STORE`.
 * @example
 * ```ts
 * await migrateStore(process.env.ASP_STORE_URL!); // once, by an operator
 * const store = await openPostgresStore(process.env.ASP_STORE_URL!);
 * await store.log.append([{ kind: "note", record: { hello: "world" } }]);
 * await store.close();
 * ```
 */
export async function openPostgresStore(url: string, options: PostgresStoreOptions = {}): Promise<Store> {
  const schema = checkSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const { config, secrets } = poolConfig(url, options);
  const location = redactStoreLocation(url);
  const pool = new pg.Pool(config);
  // An idle connection dropped by a server restart must not crash the process: the next query
  // on a fresh connection reports it.
  pool.on("error", () => {});
  let closed = false;
  let closing: Promise<void> | undefined;
  let unhold: (() => Promise<void>) | undefined;
  const close = (): Promise<void> => {
    closed = true;
    closing ??= pool
      .end()
      .catch(() => {})
      .then(() => unhold?.());
    return closing;
  };
  try {
    try {
      await assertSchemaCurrent(pool, schema, location);
    } catch (error) {
      if (error instanceof PgStoreError) throw error;
      throw unavailable(error, location, secrets);
    }
    if (options.hold !== undefined) unhold = await holdKeys(config, schema, options.hold, location, secrets);
    const ctx = { schema, location, secrets, isClosed: () => closed };
    const { kv, shared } = createPgShared(ctx, pool);
    const id = await storeId(await kv.get("meta", "format"), location);
    const hasher = options.hasher ?? defaultHasher();
    const readOnly = options.readOnly === true;
    const log = await createKvFactLog(kv, hasher, options.clock ?? systemClock, close, { shared, readOnly });
    return { location, id, readOnly, log, objects: createKvObjectStore(kv, hasher, { readOnly }), hasher, close };
  } catch (error) {
    await close();
    throw error;
  }
}

function storeId(raw: Uint8Array | undefined, location: string): string {
  const notAStore = (): PgStoreError =>
    new PgStoreError("ASP_PGSTORE_NOT_A_STORE", `the database at ${location} holds no evidence store format record`, {
      data: { url: location },
    });
  if (raw === undefined) throw notAStore();
  let v: { format?: unknown; id?: unknown };
  try {
    v = parseCanonical(raw, "store format record") as typeof v;
  } catch {
    throw notAStore();
  }
  if (v?.format !== PG_STORE_FORMAT || typeof v.id !== "string") throw notAStore();
  return v.id;
}
