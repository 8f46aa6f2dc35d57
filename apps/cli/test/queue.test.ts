import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startPostgres, type ThrowawayPostgres } from "@asp/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobId } from "../src/queue/jobs.js";
import { runInProcess } from "./helpers.js";
import {
  factsOfKind,
  freshDatabase,
  jobKeyOf,
  queueSetup,
  receiptFacts,
  runAsp,
  sql,
  startAsp,
  until,
} from "./queue-fixture.js";

/** How many repositories the crash test sweeps (the Done-when: ASP_QUEUE_TEST_REPOS=50). */
const REPOS = Number(process.env.ASP_QUEUE_TEST_REPOS ?? "4");

let cluster: ThrowawayPostgres;
let databases = 0;
const newDatabase = () => freshDatabase(cluster.url, `queue_${++databases}`);

beforeAll(async () => {
  cluster = await startPostgres({ prefix: "asp-queue-pg-" });
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
});

/**
 * `asp store migrate` (the receipt store is the queue's database) and `asp worker --migrate` with
 * small retry and expiry settings, so a test sees them act. Both explicit: nothing migrates itself.
 */
async function migrate(config: string, args: string[] = []): Promise<void> {
  const store = await runAsp(["store", "migrate", "--config", config, "--json"]);
  expect(store.code, store.stderr).toBe(0);
  const r = await runAsp(["worker", "--migrate", "--config", config, "--json", ...args]);
  expect(r.code, r.stderr).toBe(0);
}

async function enqueue(config: string, file: string): Promise<{ enqueued: number; duplicate: number }> {
  const r = await runAsp(["sweep", "--queue", file, "--config", config, "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

interface Summary {
  processed: number;
  receipts: number;
  alreadyDone: number;
  retried: number;
  failed: number;
  jobs: { outcome: string; key: string | null; attempt: number; error?: { code: string } }[];
}

const WORKER = ["--until-idle", "--maintenance", "1", "--poll", "1", "--wait", "300", "--json"];

describe("asp sweep --queue and asp worker (pg-boss on a throwaway PostgreSQL)", () => {
  describe("when a worker is SIGKILLed midway", () => {
    it("every repository gets exactly one receipt: the killed worker's job is retried by the other", async () => {
      const url = await newDatabase();
      const s = queueSetup(REPOS, url);
      await migrate(s.config, ["--max-attempts", "3", "--retry-delay", "1", "--expire", "30"]);
      expect(await enqueue(s.config, s.reposFile)).toMatchObject({ enqueued: REPOS, duplicate: 0 });

      // A starts alone, so it surely takes jobs; B joins once A runs its first. A is killed the
      // moment it takes its second job, so it dies holding one (taken, not finished).
      const a = startAsp(["worker", "--config", s.config, ...WORKER]);
      const started = () => (a.stderr().match(/\(attempt \d+\)…/g) ?? []).length;
      await until(() => started() >= 1, "worker A's first job", 240_000);
      const b = startAsp(["worker", "--config", s.config, ...WORKER]);
      await until(() => started() >= 2, "worker A's second job", 240_000);
      a.child.kill("SIGKILL");
      await a.exited;
      const code = await b.exited;
      expect(code, b.stderr()).toBe(0);
      const summary = JSON.parse(b.stdout()) as Summary;
      expect(summary.failed).toBe(0);
      // The job A held when it died came back to B as a second attempt.
      expect(
        summary.jobs.some((j) => j.attempt >= 2 && j.outcome !== "retry"),
        `worker A:\n${a.stderr()}\nworker B:\n${b.stderr()}`,
      ).toBe(true);

      // host §1 (durable receipt), invariant 8 (nothing done twice): one receipt per job key.
      const receipts = await receiptFacts(s.store);
      const keys = receipts.map(jobKeyOf);
      expect(keys).not.toContain(null);
      expect(new Set(keys).size).toBe(REPOS);
      expect(receipts).toHaveLength(REPOS);
      const verify = await runAsp(["receipts", "verify", "--config", s.config, "--json"]);
      expect(verify.code, verify.stdout).toBe(0);
      const states = await sql<{ state: string; n: string }>(
        url,
        "SELECT state, count(*) AS n FROM pgboss.job WHERE name = 'asp-sweep' GROUP BY state",
      );
      expect(states).toEqual([{ state: "completed", n: String(REPOS) }]);
    }, 420_000);
  });

  describe("when a job can never succeed (its repository is gone)", () => {
    it("ends failed after the queue's maximum attempts, recorded as a fact, and the worker stops", async () => {
      const url = await newDatabase();
      const s = queueSetup(2, url);
      await migrate(s.config, ["--max-attempts", "2", "--retry-delay", "1"]);
      expect(await enqueue(s.config, s.reposFile)).toMatchObject({ enqueued: 2 });
      const gone = s.repos[1] as string;
      rmSync(gone, { recursive: true, force: true });

      const r = await runAsp(["worker", "--config", s.config, ...WORKER]);
      expect(r.code, r.stderr).toBe(0);
      const summary = JSON.parse(r.stdout) as Summary;
      expect(summary).toMatchObject({ receipts: 1, retried: 1, failed: 1, processed: 3 });
      expect(summary.jobs.filter((j) => j.error !== undefined).map((j) => j.error?.code)).toEqual([
        "ASP_CLI_BAD_INPUT",
        "ASP_CLI_BAD_INPUT",
      ]);

      const failures = await factsOfKind(s.store, "queue.job-failed");
      expect(failures).toHaveLength(1);
      expect(failures[0]?.record).toMatchObject({ repo: gone, attempts: 2, error: { code: "ASP_CLI_BAD_INPUT" } });
      const failedKey = (failures[0]?.record as { key?: string } | undefined)?.key ?? "";
      expect(await sql(url, "SELECT state FROM pgboss.job WHERE id = $1", [jobId(failedKey)])).toEqual([
        { state: "failed" },
      ]);
      expect(await receiptFacts(s.store)).toHaveLength(1);
    }, 240_000);
  });

  describe("when the same repositories are enqueued again", () => {
    it("counts duplicates, and a job run again after its receipt completes without a second one", async () => {
      const url = await newDatabase();
      const s = queueSetup(3, url);
      await migrate(s.config);
      expect(await enqueue(s.config, s.reposFile)).toEqual(expect.objectContaining({ enqueued: 3, duplicate: 0 }));
      // Enqueued twice before any worker ran: still one job each.
      expect(await enqueue(s.config, s.reposFile)).toEqual(expect.objectContaining({ enqueued: 0, duplicate: 3 }));
      const first = await runAsp(["worker", "--config", s.config, ...WORKER]);
      expect(JSON.parse(first.stdout)).toMatchObject({ receipts: 3, alreadyDone: 0 });
      // Done jobs stay in the queue: enqueued again, they are duplicates.
      expect(await enqueue(s.config, s.reposFile)).toEqual(expect.objectContaining({ enqueued: 0, duplicate: 3 }));

      // A worker killed after the receipt but before the queue heard of it: the job comes back.
      await sql(url, "UPDATE pgboss.job SET state = 'created', started_on = NULL, completed_on = NULL");
      const again = await runAsp(["worker", "--config", s.config, ...WORKER]);
      expect(again.code, again.stderr).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ processed: 3, receipts: 0, alreadyDone: 3 });
      expect(await receiptFacts(s.store)).toHaveLength(3);
    }, 240_000);
  });

  describe("when the input or the queue is not right", () => {
    it("refuses a repositories file with a bad line and enqueues nothing", async () => {
      const url = await newDatabase();
      const s = queueSetup(1, url);
      await migrate(s.config);
      const bad = join(s.root, "bad.txt");
      const notGit = join(s.root, "repos");
      writeFileSync(bad, [s.repos[0], "relative/path", join(s.root, "missing"), notGit, s.repos[0]].join("\n"));
      const r = await runInProcess(["sweep", "--queue", bad, "--config", s.config, "--json"]);
      expect(r.code).toBe(64);
      const error = JSON.parse(r.stdout).error;
      expect(error.code).toBe("ASP_CLI_QUEUE_BAD_REPOS_FILE");
      expect(error.data.problems.map((p: { line: number }) => p.line)).toEqual([2, 3, 4, 5]);
      expect(await sql(url, "SELECT id FROM pgboss.job WHERE name = 'asp-sweep'")).toEqual([]);
    }, 60_000);

    it("refuses to enqueue into a database whose queue schema was never installed (no silent migration)", async () => {
      const url = await newDatabase();
      const s = queueSetup(1, url);
      const r = await runInProcess(["sweep", "--queue", s.reposFile, "--config", s.config, "--json"]);
      expect(JSON.parse(r.stdout).error.code).toBe("ASP_CLI_QUEUE_NOT_MIGRATED");
      expect(await sql(url, "SELECT 1 FROM information_schema.schemata WHERE schema_name = 'pgboss'")).toEqual([]);
      const w = await runInProcess(["worker", "--config", s.config, "--once", "--json"]);
      expect(JSON.parse(w.stdout).error.code).toBe("ASP_CLI_QUEUE_NOT_MIGRATED");
    }, 60_000);

    it("names the missing queue database when the configuration has none", async () => {
      const s = queueSetup(1, "postgres://unused");
      writeFileSync(s.config, JSON.stringify({ store: join(s.root, "store"), policy: join(s.root, "p.json") }));
      const r = await runInProcess(["sweep", "--queue", s.reposFile, "--config", s.config, "--json"]);
      expect(JSON.parse(r.stdout).error.code).toBe("ASP_CLI_QUEUE_NO_DATABASE");
      const w = await runInProcess(["worker", "--config", s.config, "--json"]);
      expect(JSON.parse(w.stdout).error.code).toBe("ASP_CLI_QUEUE_NO_DATABASE");
    });
  });
});
