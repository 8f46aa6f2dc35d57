import { EvidenceError, type WaitProgress } from "@asp/evidence";
import type pg from "pg";
import { connectClient, unavailable } from "./connection.js";

/**
 * What a writer holds for its whole evaluation (ADR 0003 on a shared database): session-scoped
 * advisory locks on `keys`, e.g. the trusted-base state key of the repository it gates, so two
 * hosts gating one repository serialize their read-decide-append while other repositories go on.
 */
export interface HoldOptions {
  /** The keys to hold (any strings; sorted and taken in order, so holders never deadlock). */
  readonly keys: readonly string[];
  /** How long to wait for a key another process holds, in ms (default 30,000; 0 fails at once). */
  readonly waitMs?: number;
  /** Called about once a second while waiting. */
  readonly onWait?: (progress: WaitProgress) => void;
}

const HOLD_CLASS = 0x41535048; // "ASPH"

/**
 * Take every key on one dedicated session, waiting bounded; resolves to its release.
 * @throws EvidenceError `ASP_EVIDENCE_STORE_LOCKED` once the wait runs out (`data.pid` is the
 *   holder's server backend pid when known); PgStoreError `ASP_PGSTORE_UNAVAILABLE`.
 */
export async function holdKeys(
  config: pg.ClientConfig,
  schema: string,
  hold: HoldOptions,
  location: string,
  secrets: readonly string[],
): Promise<() => Promise<void>> {
  const client = await connectClient(config, location, secrets);
  const release = (): Promise<void> => client.end().catch(() => {});
  const timeoutMs = hold.waitMs ?? 30_000;
  const started = Date.now();
  let reported = started;
  try {
    for (const key of [...new Set(hold.keys)].sort()) {
      const id = `${schema}/${key}`;
      for (;;) {
        const r = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok", [
          HOLD_CLASS,
          id,
        ]);
        if (r.rows[0]?.ok === true) break;
        const waitedMs = Date.now() - started;
        if (waitedMs >= timeoutMs) {
          const who = await client.query<{ pid: number }>(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::bigint::oid AND objid = (hashtext($2)::bigint & 4294967295)::oid AND granted LIMIT 1",
            [HOLD_CLASS, id],
          );
          throw new EvidenceError(
            "ASP_EVIDENCE_STORE_LOCKED",
            `another host holds ${key} in the evidence store at ${location} (waited ${Math.round(waitedMs / 1000)} s)`,
            { data: { path: location, key, pid: who.rows[0]?.pid ?? null, waitedMs } },
          );
        }
        if (hold.onWait !== undefined && Date.now() - reported >= 1000) {
          reported = Date.now();
          hold.onWait({ pid: null, waitedMs, timeoutMs });
        }
        await new Promise((r) => setTimeout(r, 50 + Math.floor(Math.random() * 100)));
      }
    }
  } catch (error) {
    await release();
    if (error instanceof EvidenceError) throw error;
    throw unavailable(error, location, secrets);
  }
  return release;
}
