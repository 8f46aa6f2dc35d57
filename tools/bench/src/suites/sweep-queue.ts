import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { BIN, EXAMPLE_PROVIDERS, exampleHostConfig } from "../example-host.js";
import { commitAll } from "../git.js";
import { compare } from "../measure.js";
import type { Suite } from "../suite.js";

// Fan-out throughput (issue 15 item 6): `asp sweep --queue` + 1, 2 and 4 `asp worker` processes
// (`--until-idle`) over the same generated repositories, against `asp sweep` run once per
// repository, one after another, in the same run. The workers share ONE PostgreSQL evidence store
// on the queue's database (the Done-when: one chain); the sequential baseline writes a level store,
// what a single machine runs today. Every round gets a fresh database and fresh stores (untimed),
// so no job is a duplicate.
// The queue's PostgreSQL comes from ASP_BENCH_PG_URL: any server where the bench may create
// databases, e.g. a throwaway one (`initdb`, `pg_ctl start`; see docs/queue.md).

const ENV = { PATH: process.env.PATH ?? "/usr/bin:/bin" };

/** The environment variable naming the PostgreSQL server the suite creates its databases in. */
export const PG_URL_ENV = "ASP_BENCH_PG_URL";

/** A worker's configuration: the queue's database is also the shared evidence store. */
const workerConfig = (dir: string, name: string, url: string) =>
  exampleHostConfig(dir, name, EXAMPLE_PROVIDERS, { store: url });
/** The sequential baseline's configuration: a level store of its own (the queue is only for enqueueing). */
const levelConfig = (dir: string, name: string, queue: string) =>
  exampleHostConfig(dir, name, EXAMPLE_PROVIDERS, { queue });

async function createDatabase(server: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: server });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const u = new URL(server);
  u.pathname = `/${name}`;
  return u.toString();
}

function asp(argv: readonly string[]): void {
  execFileSync(process.execPath, [BIN, ...argv], { stdio: "ignore", env: ENV });
}

function worker(config: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [BIN, "worker", "--config", config, "--until-idle", "--poll", "1", "--wait", "600"],
      { stdio: "ignore", env: ENV },
    );
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`asp worker exited ${code}`))));
  });
}

const suite: Suite = {
  name: "sweep-queue",
  description: "asp sweep --queue + 1/2/4 asp worker processes vs asp sweep once per repository, sequentially",
  async run(ctx) {
    const server = process.env[PG_URL_ENV];
    if (server === undefined || server === "") {
      throw new Error(`${PG_URL_ENV} must name a PostgreSQL server where the suite may create databases`);
    }
    const smoke = ctx.size === "smoke";
    // Smoke (CI): one repository, one worker: every step runs once (migrations, enqueue, a worker
    // on the shared store, the sequential baseline), at the least cost.
    const count = smoke ? 1 : 12;
    const workerCounts = smoke ? [1] : [1, 2, 4];
    const rounds = smoke ? 1 : 2;
    const dir = mkdtempSync(join(tmpdir(), "asp-bench-queue-"));
    try {
      ctx.progress(`generating ${count} repositories`);
      const repos: string[] = [];
      for (let i = 0; i < count; i++) {
        const repo = join(dir, "repos", `r${i}`);
        mkdirSync(repo, { recursive: true });
        writeFileSync(join(repo, "README.md"), `repository ${i}\n`);
        writeFileSync(join(repo, "index.ts"), `export const n${i} = ${i};\n`);
        commitAll(repo);
        repos.push(repo);
      }
      const reposFile = join(dir, "repos.txt");
      writeFileSync(reposFile, `${repos.join("\n")}\n`);
      let round = 0;
      let configs: string[] = [];
      let baseConfig = "";
      for (const workers of workerCounts) {
        const r = await compare({
          name: `asp sweep --queue + ${workers} asp worker process${workers === 1 ? "" : "es"}, ${count} repositories`,
          baselineName: `asp sweep once per repository, sequentially, ${count} repositories`,
          rounds,
          warmup: 0,
          headline: workers === 2 || workerCounts.length === 1,
          // Untimed: a fresh database with the queue installed, fresh stores for both sides.
          before: async () => {
            const run = join(dir, `run-${++round}`);
            mkdirSync(run);
            const url = await createDatabase(server, `asp_bench_queue_${process.pid}_${round}`);
            configs = Array.from({ length: workers }, (_, i) => workerConfig(run, `w${i}`, url));
            baseConfig = levelConfig(run, "sequential", url);
            asp(["store", "migrate", "--config", configs[0] as string]);
            asp(["worker", "--migrate", "--config", baseConfig]);
          },
          baseline: () => {
            for (const repo of repos) {
              try {
                asp(["sweep", "--config", baseConfig, "--repo", repo]);
              } catch (error) {
                // A deny or indeterminate exits 1 or 2: still a sweep with its receipt.
                const status = (error as { status?: number }).status;
                if (status !== 1 && status !== 2) throw error;
              }
            }
          },
          subject: async () => {
            asp(["sweep", "--queue", reposFile, "--config", configs[0] as string]);
            await Promise.all(configs.map(worker));
          },
          details: { repositories: count, workers },
        });
        const perMin = (ms: number) => Math.round((count / (ms / 60_000)) * 10) / 10;
        const row = {
          ...r,
          details: {
            ...r.details,
            subjectReposPerMin: perMin(r.subjectMedianMs),
            baselineReposPerMin: perMin(r.baselineMedianMs),
          },
        };
        ctx.progress(
          `${workers} worker(s): ${row.details.subjectReposPerMin} repos/min; sequential asp sweep: ${row.details.baselineReposPerMin} repos/min`,
        );
        ctx.report(row);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
