import { isAspError } from "@asp/contracts";
import { EvidenceError, type Kv, type KvOp, type KvRange, type KvSpace, type SharedKv } from "@asp/evidence";
import type pg from "pg";
import { unavailable } from "./connection.js";

type Queryable = Pick<pg.ClientBase, "query">;

/** Where one Kv's statements go, and how a failure is reported. */
export interface KvContext {
  readonly schema: string;
  /** The redacted URL. */
  readonly location: string;
  readonly secrets: readonly string[];
  readonly isClosed: () => boolean;
}

const PAGE = 1000;
const utf8 = (s: string): Buffer => Buffer.from(s, "utf8");

function closed(location: string): EvidenceError {
  return new EvidenceError("ASP_EVIDENCE_STORE_CLOSED", `the evidence store at ${location} is closed`, {
    data: { path: location },
  });
}

/** Last-wins puts and deletes of one batch, in order (one row is touched once per statement). */
function runs(ops: readonly KvOp[]): Array<{ type: "put" | "del"; ops: Map<string, KvOp> }> {
  const out: Array<{ type: "put" | "del"; ops: Map<string, KvOp> }> = [];
  for (const op of ops) {
    let last = out[out.length - 1];
    if (last === undefined || last.type !== op.type) {
      last = { type: op.type, ops: new Map() };
      out.push(last);
    }
    last.ops.set(`${op.space}\0${op.key}`, op);
  }
  return out;
}

/**
 * A Kv over one table (`<schema>.kv`). `tx` runs a function in one transaction (a pool's
 * batch) or, inside one already, on that transaction's client.
 */
export function createPgKv(ctx: KvContext, q: Queryable, tx: <T>(fn: (q: Queryable) => Promise<T>) => Promise<T>): Kv {
  const table = `${ctx.schema}.kv`;
  const guard = async <T>(fn: () => Promise<T>): Promise<T> => {
    if (ctx.isClosed()) throw closed(ctx.location);
    try {
      return await fn();
    } catch (error) {
      if (ctx.isClosed()) throw closed(ctx.location);
      if (isAspError(error)) throw error;
      throw unavailable(error, ctx.location, ctx.secrets);
    }
  };
  async function* page(space: KvSpace, range: KvRange, withValues: boolean): AsyncGenerator<[string, Uint8Array]> {
    let { gt, gte, lt, lte } = range;
    let left = range.limit ?? Number.POSITIVE_INFINITY;
    const reverse = range.reverse === true;
    while (left > 0) {
      const params: unknown[] = [space];
      const where = ["space = $1"];
      for (const [op, v] of [
        [">", gt],
        [">=", gte],
        ["<", lt],
        ["<=", lte],
      ] as const) {
        if (v === undefined) continue;
        params.push(utf8(v));
        where.push(`key ${op} $${params.length}`);
      }
      const n = Math.min(left, PAGE);
      const rows = await guard(async () => {
        const r = await q.query<{ key: Buffer; value: Buffer | null }>(
          `SELECT key, ${withValues ? "value" : "NULL::bytea AS value"} FROM ${table} WHERE ${where.join(" AND ")} ORDER BY key ${reverse ? "DESC" : "ASC"} LIMIT ${n}`,
          params,
        );
        return r.rows;
      });
      for (const row of rows) yield [row.key.toString("utf8"), new Uint8Array(row.value ?? [])];
      if (rows.length < n) return;
      left -= rows.length;
      const last = (rows[rows.length - 1] as { key: Buffer }).key.toString("utf8");
      if (reverse) {
        lt = last;
        lte = undefined;
      } else {
        gt = last;
        gte = undefined;
      }
    }
  }
  const kv: Kv = {
    location: ctx.location,
    get: (space, key) =>
      guard(async () => {
        const r = await q.query<{ value: Buffer }>(`SELECT value FROM ${table} WHERE space = $1 AND key = $2`, [
          space,
          utf8(key),
        ]);
        const v = r.rows[0]?.value;
        return v === undefined ? undefined : new Uint8Array(v);
      }),
    hasMany: (space, keys) =>
      guard(async () => {
        if (keys.length === 0) return [];
        const r = await q.query<{ key: Buffer }>(
          `SELECT key FROM ${table} WHERE space = $1 AND key = ANY($2::bytea[])`,
          [space, keys.map(utf8)],
        );
        const present = new Set(r.rows.map((row) => row.key.toString("utf8")));
        return keys.map((k) => present.has(k));
      }),
    batch: (ops) =>
      guard(() =>
        tx(async (t) => {
          for (const run of runs(ops)) {
            const all = [...run.ops.values()];
            if (run.type === "put") {
              await t.query(
                `INSERT INTO ${table} (space, key, value) SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[]) ON CONFLICT (space, key) DO UPDATE SET value = EXCLUDED.value`,
                [
                  all.map((o) => o.space),
                  all.map((o) => utf8(o.key)),
                  all.map((o) => Buffer.from(o.value ?? new Uint8Array())),
                ],
              );
            } else {
              await t.query(
                `DELETE FROM ${table} t USING unnest($1::text[], $2::bytea[]) AS d(space, key) WHERE t.space = d.space AND t.key = d.key`,
                [all.map((o) => o.space), all.map((o) => utf8(o.key))],
              );
            }
          }
        }),
      ),
    entries: (space, range = {}) => page(space, range, true),
    async *keys(space, range = {}) {
      for await (const [k] of page(space, range, false)) yield k;
    },
    clear: (space) =>
      guard(async () => {
        await q.query(`DELETE FROM ${table} WHERE space = $1`, [space]);
      }),
    hasAnyKey: () =>
      guard(async () => {
        const r = await q.query(`SELECT 1 FROM ${table} LIMIT 1`);
        return r.rows.length > 0;
      }),
    close: async () => {},
  };
  return kv;
}

/** The chain's write lock: one per store schema, held for the append's transaction. */
const CHAIN_LOCK_CLASS = 0x41535043; // "ASPC"

/**
 * The pool-level Kv and the {@link SharedKv} over it: `exclusive` is one transaction holding a
 * transaction-scoped advisory lock with `synchronous_commit = on`, so appends from every process
 * serialize and a COMMIT that returned is on disk; `snapshot` is one repeatable-read transaction.
 */
export function createPgShared(ctx: KvContext, pool: pg.Pool): { kv: Kv; shared: SharedKv } {
  const inTx = async <T>(begin: string, lock: boolean, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> => {
    if (ctx.isClosed()) throw closed(ctx.location);
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      if (ctx.isClosed()) throw closed(ctx.location);
      throw unavailable(error, ctx.location, ctx.secrets);
    }
    let broken: Error | undefined;
    // A checked-out connection the server drops emits 'error' (the pool handles idle ones only):
    // without a listener that kills the process; the pending query rejects on its own.
    const onError = (error: Error): void => {
      broken = error;
    };
    client.on("error", onError);
    try {
      await client.query(begin);
      if (lock) {
        await client.query("SET LOCAL synchronous_commit = on");
        await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [CHAIN_LOCK_CLASS, ctx.schema]);
      }
      const out = await fn(client);
      await client.query("COMMIT");
      return out;
    } catch (error) {
      try {
        await client.query("ROLLBACK");
      } catch (e) {
        broken = e as Error;
      }
      if (isAspError(error)) throw error;
      if (ctx.isClosed()) throw closed(ctx.location);
      throw unavailable(error, ctx.location, ctx.secrets);
    } finally {
      client.off("error", onError);
      // A connection that broke or could not roll back is dropped, never reused.
      client.release(broken);
    }
  };
  const txKv = (client: Queryable): Kv => createPgKv(ctx, client, (fn) => fn(client));
  const kv = createPgKv(ctx, pool, (fn) => inTx("BEGIN", false, fn));
  return {
    kv,
    shared: {
      exclusive: (fn) => inTx("BEGIN", true, (c) => fn(txKv(c))),
      snapshot: (fn) => inTx("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", false, (c) => fn(txKv(c))),
    },
  };
}
