import { readFileSync } from "node:fs";
import pg, { type PoolConfig } from "pg";
import { PgStoreError } from "./errors.js";

/** How {@link openPostgresStore} and {@link migrateStore} reach the database. */
export interface PgConnectionOptions {
  /**
   * A file holding the password (its first line), used when the URL carries none. Else the
   * password comes from the URL, or from `PGPASSWORD` / `~/.pgpass` as libpq does.
   */
  readonly passwordFile?: string;
  /** Most connections this handle opens at once (default 4). */
  readonly maxConnections?: number;
  /** How long to wait for a connection, in ms (default 10,000). */
  readonly connectTimeoutMs?: number;
}

/** True for a `postgres://` or `postgresql://` store URL (what the host config's `store` selects on). */
export function isPostgresUrl(value: string): boolean {
  return /^postgres(?:ql)?:\/\//i.test(value);
}

/**
 * The URL with its password replaced by `***`, safe to print or log (never echo a credential).
 * A string that does not parse as a URL is reduced to its scheme.
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== "") u.password = "***";
    return u.toString();
  } catch {
    return `${url.split(":")[0] ?? "postgres"}://(unparseable URL)`;
  }
}

/** Remove every occurrence of `secret` from `text` (messages of driver errors, to be safe). */
export function scrub(text: string, secret: string | undefined): string {
  return secret === undefined || secret === "" ? text : text.split(secret).join("***");
}

/** The pool configuration for `url`; the password never leaves this object. */
export function poolConfig(
  url: string,
  options: PgConnectionOptions,
): { config: PoolConfig; secret: string | undefined } {
  if (!isPostgresUrl(url)) {
    throw new PgStoreError("ASP_PGSTORE_BAD_URL", `the store URL must start with postgres:// (got ${redactUrl(url)})`, {
      data: { url: redactUrl(url) },
    });
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new PgStoreError("ASP_PGSTORE_BAD_URL", `the store URL ${redactUrl(url)} does not parse`, {
      data: { url: redactUrl(url) },
    });
  }
  let secret = parsed.password === "" ? undefined : decodeURIComponent(parsed.password);
  if (secret === undefined && options.passwordFile !== undefined) {
    try {
      secret = (readFileSync(options.passwordFile, "utf8").split(/\r?\n/)[0] ?? "").trim();
    } catch (error) {
      throw new PgStoreError("ASP_PGSTORE_CREDENTIALS", `cannot read the password file ${options.passwordFile}`, {
        data: { passwordFile: options.passwordFile, errno: (error as NodeJS.ErrnoException).code ?? null },
      });
    }
  }
  const config: PoolConfig = {
    connectionString: url,
    max: options.maxConnections ?? 4,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    application_name: "asp-evidence",
  };
  if (secret !== undefined) config.password = secret;
  return { config, secret };
}

/** Map a driver error to `ASP_PGSTORE_UNAVAILABLE`, naming the redacted URL and the SQLSTATE. */
export function unavailable(error: unknown, location: string, secret: string | undefined): PgStoreError {
  const e = error as { code?: unknown; message?: unknown } | null;
  const pgCode = typeof e?.code === "string" ? e.code : null;
  const why = scrub(String(e?.message ?? "unknown error"), secret);
  return new PgStoreError(
    "ASP_PGSTORE_UNAVAILABLE",
    `the evidence store at ${location} is unavailable (${pgCode ?? "error"}: ${why})`,
    { data: { url: location, pgCode, reason: why }, category: "internal" },
  );
}

/**
 * One dedicated connection (for migrations and held keys); a server that drops it later never
 * crashes the process (the next query on it rejects).
 * @throws PgStoreError `ASP_PGSTORE_UNAVAILABLE`.
 */
export async function connectClient(
  config: pg.ClientConfig,
  location: string,
  secret: string | undefined,
): Promise<pg.Client> {
  const client = new pg.Client(config);
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (error) {
    throw unavailable(error, location, secret);
  }
  return client;
}
