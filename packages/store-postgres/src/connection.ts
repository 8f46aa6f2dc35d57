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

/** What a redacted credential is printed as. */
const REDACTED = "***";

/**
 * Keys whose value is a credential, in a URL's query or fragment and in a libpq `key=value`
 * connection string (matched case-insensitively, on the percent-decoded key): `password`,
 * `sslpassword`, `passfile`, and any key ending in `password`, `passwd`, `secret` or `token`.
 */
const CREDENTIAL_KEY = /(?:password|passwd|passfile|secret|token)$/i;

function decodeKey(raw: string): string {
  try {
    return decodeURIComponent(raw.replaceAll("+", " ")).trim();
  } catch {
    return raw;
  }
}

/** `a=1&password=x` with every credential value replaced (the other parts kept byte for byte). */
function redactParams(params: string): string {
  return params
    .split("&")
    .map((part) => {
      const eq = part.indexOf("=");
      if (eq < 0) return part;
      return CREDENTIAL_KEY.test(decodeKey(part.slice(0, eq))) ? `${part.slice(0, eq)}=${REDACTED}` : part;
    })
    .join("&");
}

/** A libpq `key=value` string (`host=db password='a b'`) with every credential value replaced. */
function redactConninfo(text: string): string {
  return text.replace(
    /(^|\s)([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)/g,
    (whole, lead: string, key: string, eq: string) =>
      CREDENTIAL_KEY.test(key) ? `${lead}${key}${eq}${REDACTED}` : whole,
  );
}

/**
 * A store location made safe to print, log or record: the one redaction every output of the
 * host goes through (`store.location`, messages, error `data`, CLI lines, `--json`).
 *
 * - a URL (`scheme://…`): the userinfo password (raw or percent-encoded) and the value of every
 *   credential key in the query and the fragment (`password`, `sslpassword`, `passfile`, any key
 *   ending in `password`, `passwd`, `secret` or `token`; case-insensitive, percent-decoded
 *   first, so `?pass%77ord=` counts) become `***`; the user name, host, port and database stay.
 *   A URL that does not parse is reduced to its scheme.
 * - a libpq connection string (`host=db password=…`): the same keys' values become `***`.
 * - anything else (a level store folder) is returned as it is.
 *
 * @example
 * ```ts
 * redactStoreLocation("postgres://ci@db/evidence?sslmode=require&password=s3cret");
 * // "postgres://ci@db/evidence?sslmode=require&password=***"
 * ```
 */
export function redactStoreLocation(location: string): string {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(location);
  if (scheme === null) return redactConninfo(location);
  let u: URL;
  try {
    u = new URL(location);
  } catch {
    return `${scheme[1]}://(unparseable URL)`;
  }
  if (u.password !== "") u.password = REDACTED;
  if (u.search !== "") u.search = `?${redactParams(u.search.slice(1))}`;
  if (u.hash !== "") u.hash = `#${redactParams(u.hash.slice(1))}`;
  return u.toString();
}

/**
 * Every credential `url` carries (the userinfo password and the credential keys' values of its
 * query), decoded, for {@link scrub}bing driver messages.
 */
function urlSecrets(parsed: URL): string[] {
  const found: string[] = [];
  if (parsed.password !== "") found.push(safeDecode(parsed.password));
  for (const [key, value] of parsed.searchParams) {
    if (CREDENTIAL_KEY.test(key.trim()) && value !== "") found.push(value);
  }
  return found;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Remove every occurrence of each secret (raw and percent-encoded) from `text` (messages of
 * driver errors, to be safe).
 */
export function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    for (const form of new Set([secret, encodeURIComponent(secret)])) {
      if (form !== "") out = out.split(form).join(REDACTED);
    }
  }
  return out;
}

/** The pool configuration for `url`; the password never leaves this object. */
export function poolConfig(
  url: string,
  options: PgConnectionOptions,
): { config: PoolConfig; secrets: readonly string[] } {
  if (!isPostgresUrl(url)) {
    throw new PgStoreError(
      "ASP_PGSTORE_BAD_URL",
      `the store URL must start with postgres:// (got ${redactStoreLocation(url)})`,
      {
        data: { url: redactStoreLocation(url) },
      },
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new PgStoreError("ASP_PGSTORE_BAD_URL", `the store URL ${redactStoreLocation(url)} does not parse`, {
      data: { url: redactStoreLocation(url) },
    });
  }
  const secrets = urlSecrets(parsed);
  let secret = parsed.password === "" ? undefined : safeDecode(parsed.password);
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
  if (secret !== undefined) {
    config.password = secret;
    if (!secrets.includes(secret)) secrets.push(secret);
  }
  return { config, secrets };
}

/** Map a driver error to `ASP_PGSTORE_UNAVAILABLE`, naming the redacted URL and the SQLSTATE. */
export function unavailable(error: unknown, location: string, secrets: readonly string[]): PgStoreError {
  const e = error as { code?: unknown; message?: unknown } | null;
  const pgCode = typeof e?.code === "string" ? e.code : null;
  const why = scrub(String(e?.message ?? "unknown error"), secrets);
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
  secrets: readonly string[],
): Promise<pg.Client> {
  const client = new pg.Client(config);
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (error) {
    throw unavailable(error, location, secrets);
  }
  return client;
}
