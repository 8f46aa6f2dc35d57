import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type FactEntry, openStore, type Store } from "@asp/evidence";
import { isPostgresUrl, openPostgresStore } from "@asp/store-postgres";
import { git } from "@asp/test-utils";
import pg from "pg";
import { EXAMPLE_PLUGINS } from "./example-copy.js";
import { BIN, REPO_ROOT } from "./helpers.js";

/** A fresh database in a throwaway cluster (one per test: each gets its own queue schema). */
export async function freshDatabase(clusterUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: clusterUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const u = new URL(clusterUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Run one SQL statement against `url`. */
export async function sql<T extends pg.QueryResultRow = pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Where the workers write their receipts: the queue's own PostgreSQL database, as the host
 * configuration's `"store": "postgres://…"`, so every worker appends to ONE chain (issue 15
 * Done-when) and the queue uses the same database.
 */
export function receiptStore(_root: string, queueUrl: string): string {
  return queueUrl;
}

/** Open the receipt store read-only: a PostgreSQL URL or a level folder. */
async function openReceipts(store: string): Promise<Store> {
  return isPostgresUrl(store) ? openPostgresStore(store, { readOnly: true }) : openStore(store, { readOnly: true });
}

/** Every `ths.receipt` fact in the store, read-only. */
export async function receiptFacts(store: string): Promise<FactEntry[]> {
  return factsOfKind(store, "ths.receipt");
}

/** Every fact of `kind` in the store, read-only. */
export async function factsOfKind(store: string, kind: string): Promise<FactEntry[]> {
  const s = await openReceipts(store);
  try {
    return await s.log.list({ kind });
  } finally {
    await s.close();
  }
}

/** The queue job key a receipt fact names (its `queueJob` index), or null. */
export function jobKeyOf(fact: FactEntry): string | null {
  return fact.index.find((i) => i.name === "queueJob")?.value ?? null;
}

/** A temp folder with `n` small git repositories, a repositories file and a host configuration. */
export interface QueueSetup {
  readonly root: string;
  readonly repos: readonly string[];
  readonly reposFile: string;
  readonly config: string;
  readonly store: string;
}

/**
 * `n` generated repositories (one commit, one trivial file each), the file listing them, and a
 * trusted host configuration outside them: the example policy, trust root and signed example
 * plugins (as apps/cli/test/example-copy.ts), the store from {@link receiptStore}, and `queue`.
 */
export function queueSetup(n: number, queueUrl: string): QueueSetup {
  const root = mkdtempSync(join(tmpdir(), "asp-queue-"));
  const repos: string[] = [];
  for (let i = 0; i < n; i++) {
    const repo = join(root, "repos", `r${i}`);
    mkdirSync(repo, { recursive: true });
    writeFileSync(join(repo, "README.md"), `repository ${i}\n`);
    git(repo, "init", "-q", "-b", "main");
    git(repo, "add", "-A");
    git(repo, "commit", "-q", "-m", "base");
    repos.push(repo);
  }
  const reposFile = join(root, "repos.txt");
  writeFileSync(reposFile, `${repos.join("\n")}\n`);
  const examples = join(REPO_ROOT, "examples");
  const store = receiptStore(root, queueUrl);
  const config = join(root, "asp.host.json");
  writeFileSync(
    config,
    JSON.stringify({
      store,
      ...(store === queueUrl ? {} : { queue: queueUrl }),
      policy: join(examples, "asp.policy.json"),
      trustRoots: [join(examples, "keys", "example.key.pub")],
      plugins: EXAMPLE_PLUGINS.map((p) => join(REPO_ROOT, "plugins", p, "dist", "plugin")),
      providers: [],
    }),
  );
  return { root, repos, reposFile, config, store };
}

/** A running `asp` process (the built binary) with what it printed so far. */
export interface AspProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>;
}

/** Start the built `asp` as a real subprocess. */
export function startAsp(argv: readonly string[]): AspProcess {
  const child = spawn(process.execPath, [BIN, ...argv], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout?.on("data", (b: Buffer) => {
    out += b.toString("utf8");
  });
  child.stderr?.on("data", (b: Buffer) => {
    err += b.toString("utf8");
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Run the built `asp` to its end. */
export async function runAsp(
  argv: readonly string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = startAsp(argv);
  const code = await p.exited;
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}

/** Wait until `test()` holds, polling; throws after `timeoutMs` with `what`. */
export async function until(test: () => boolean, what: string, timeoutMs = 120_000): Promise<void> {
  const start = Date.now();
  while (!test()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
