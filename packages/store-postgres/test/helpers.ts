import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startPostgres, type ThrowawayPostgres } from "@asp/test-utils";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import { migrateStore } from "../src/index.js";

/** One throwaway cluster for the calling test file (started before its tests, removed after). */
export function useCluster(): { readonly pg: ThrowawayPostgres } {
  const holder: { pg: ThrowawayPostgres } = {} as { pg: ThrowawayPostgres };
  beforeAll(async () => {
    holder.pg = await startPostgres({ prefix: "asp-pgstore-" });
  }, 60_000);
  afterAll(async () => {
    await holder.pg?.stop();
  });
  return holder;
}

/** A URL on `base`'s server naming another database. */
export function withDatabase(base: string, name: string): string {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A new, empty database on the cluster; its URL. */
export async function createDatabase(base: string): Promise<string> {
  const name = `t_${randomBytes(6).toString("hex")}`;
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  return withDatabase(base, name);
}

/** A new database with the store's schema migrated in; its URL. */
export async function migratedDatabase(base: string): Promise<string> {
  const url = await createDatabase(base);
  await migrateStore(url);
  return url;
}

/** Run SQL against `url` with a short-lived client. */
export async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(
  url: string,
  text: string,
  params: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, params)).rows;
  } finally {
    await client.end();
  }
}

const PACKAGE_DIR = fileURLToPath(new URL("../", import.meta.url));

/**
 * Child processes run the BUILT package (plain Node cannot run the TS sources): build it (and
 * what it references) when `dist/` is missing or older than `src/`.
 */
export function ensureBuilt(): string {
  const entry = join(PACKAGE_DIR, "dist", "index.js");
  const newest = Math.max(
    ...readdirSync(join(PACKAGE_DIR, "src")).map((f) => statSync(join(PACKAGE_DIR, "src", f)).mtimeMs),
  );
  if (existsSync(entry) && statSync(entry).mtimeMs >= newest) return entry;
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-b", PACKAGE_DIR], { stdio: "inherit" });
  return entry;
}
