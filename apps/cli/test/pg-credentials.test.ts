// issue 32 hole 10: a PostgreSQL credential in any part of the store URL (userinfo, raw or
// percent-encoded; `?password=`, a percent-encoded key, `sslpassword`, `passfile`) never reaches
// stdout, stderr, `--json`, an error's data, or the store's records.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startPostgres, type ThrowawayPostgres } from "@asp/test-utils";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exampleCopy } from "./example-copy.js";
import { runBinary } from "./helpers.js";

/** The role's password: `@`, `#`, `/` and a space force percent-encoding in every URL form. */
const SECRET = "zq7f3c9e1@p w#/X";
/** What any form of SECRET (raw, percent-encoded, `+` for space) still spells. */
const CORE = "zq7f3c9e1";
const ROLE = "aspwriter";
/** A second credential (libpq's client-key passphrase): a password too. */
const SSL_SECRET = "kk4d2b8a0sslpw";
const PASSFILE_MARK = "pf9c1e7a3dir";

let cluster: ThrowawayPostgres;
let db = "";

async function superuser<R extends pg.QueryResultRow>(text: string, database = "postgres"): Promise<R[]> {
  const u = new URL(cluster.url);
  u.pathname = `/${database}`;
  const client = new pg.Client({ connectionString: u.toString() });
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  cluster = await startPostgres({ prefix: "asp-cli-pgcred-" });
  // A password-protected role: the server refuses it without the password (scram), so a CLI
  // run that works proves the credential in that URL form was really used.
  const hba = join(cluster.dir, "data", "pg_hba.conf");
  writeFileSync(hba, `host all ${ROLE} 127.0.0.1/32 scram-sha-256\n${readFileSync(hba, "utf8")}`);
  await superuser(`SELECT pg_reload_conf()`);
  await superuser(`CREATE ROLE ${ROLE} LOGIN PASSWORD '${SECRET.replaceAll("'", "''")}'`);
  db = "credstore";
  await superuser(`CREATE DATABASE ${db} OWNER ${ROLE}`);
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

const base = (): string => `127.0.0.1:${cluster.port}/${db}`;
const enc = encodeURIComponent;

/** Every URL form that carries the credential (each authenticates as the password role). */
const FORMS: ReadonlyArray<readonly [string, () => string]> = [
  ["a percent-encoded userinfo password", () => `postgres://${ROLE}:${enc(SECRET)}@${base()}`],
  ["?password=", () => `postgres://${ROLE}@${base()}?password=${enc(SECRET)}`],
  [
    "a percent-encoded key (?pass%77ord=)",
    () => `postgresql://${ROLE}@${base()}?application_name=x&pass%77ord=${enc(SECRET)}`,
  ],
  [
    "?sslpassword= and ?passfile= beside ?password=",
    () =>
      `postgres://${ROLE}@${base()}?sslpassword=${SSL_SECRET}&passfile=/etc/${PASSFILE_MARK}/pgpass&password=${enc(SECRET)}`,
  ],
];

/** No credential, in any encoding: raw, percent-encoded, and the parts no encoding changes. */
function expectNoCredential(text: string, what: string): void {
  for (const needle of [SECRET, enc(SECRET), CORE, SSL_SECRET, PASSFILE_MARK]) {
    expect(text, `${what} carries ${needle}`).not.toContain(needle);
  }
}

function pgConfig(url: string): { repo: string; config: string; root: string } {
  const copy = exampleCopy();
  const json = JSON.parse(readFileSync(copy.config, "utf8")) as Record<string, unknown>;
  writeFileSync(copy.config, JSON.stringify({ ...json, store: url }));
  return copy;
}

describe("a PostgreSQL store URL carrying a credential", () => {
  describe.each(FORMS)("when the password is given as %s", (_name, url) => {
    it("asp store migrate, asp status and asp gate work with it and never print it", { timeout: 180_000 }, async () => {
      const copy = pgConfig(url());
      try {
        for (const argv of [
          ["store", "migrate", "--config", copy.config],
          ["store", "migrate", "--json", "--config", copy.config],
          ["store", "migrate", "--store", url()],
          ["status", "--config", copy.config],
          ["status", "--json", "--config", copy.config],
        ]) {
          const r = runBinary(argv);
          expect(r.code, `${argv.join(" ")}: ${r.stdout}${r.stderr}`).toBe(0);
          expectNoCredential(r.stdout + r.stderr, argv.join(" "));
        }
        const gate = runBinary(["gate", "--config", copy.config, "--repo", copy.repo, "--base", "HEAD"]);
        // A decision either way is recorded (exit 2 if a starved provider made it indeterminate).
        expect([0, 2], gate.stdout + gate.stderr).toContain(gate.code);
        expect(gate.stdout).toMatch(/receipt {2}\S+ stored in postgres(ql)?:\/\//);
        expectNoCredential(gate.stdout + gate.stderr, "asp gate");
      } finally {
        rmSync(copy.root, { recursive: true, force: true });
      }
    });
  });

  it("a refused login and an unreachable server fail with a coded error that carries no credential", {
    timeout: 60_000,
  }, () => {
    const wrong = runBinary([
      "store",
      "migrate",
      "--json",
      "--store",
      `postgres://${ROLE}@${base()}?password=${CORE}-wrong`,
    ]);
    expect(wrong.code).toBe(75);
    expect(wrong.stdout + wrong.stderr).toContain("ASP_PGSTORE_UNAVAILABLE");
    expectNoCredential(wrong.stdout + wrong.stderr, "a refused login");
    const unreachable = `postgres://${ROLE}@127.0.0.1:1/${db}?sslpassword=${SSL_SECRET}&password=${enc(SECRET)}`;
    const closed = runBinary(["store", "migrate", "--json", "--store", unreachable]);
    expect(closed.code).toBe(75);
    expect(closed.stdout + closed.stderr).toContain("ASP_PGSTORE_UNAVAILABLE");
    expectNoCredential(closed.stdout + closed.stderr, "an unreachable server");
    // Without a host configuration `status` only names the store it was given.
    for (const argv of [
      ["status", "--store", unreachable],
      ["status", "--json", "--store", unreachable],
    ]) {
      const r = runBinary(argv);
      expectNoCredential(r.stdout + r.stderr, argv.join(" "));
    }
  });

  it("the store's records never hold the credential", { timeout: 30_000 }, async () => {
    const rows = await superuser<{ space: string; key: Buffer; value: Buffer }>(
      "SELECT space, key, value FROM asp_evidence.kv",
      db,
    );
    expect(rows.length).toBeGreaterThan(1);
    const dump = rows.map((r) => `${r.space} ${r.key.toString("latin1")} ${r.value.toString("latin1")}`).join("\n");
    expectNoCredential(dump, "the store's kv rows");
    expect(dump).not.toContain(Buffer.from(CORE).toString("hex"));
    expect(dump).not.toContain(Buffer.from(CORE).toString("base64").slice(0, 12));
  });
});
