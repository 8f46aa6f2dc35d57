import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { migrateStore } from "@asp/store-postgres";
import pg from "pg";
import { compare } from "../measure.js";
import { benchPostgres } from "../postgres.js";
import type { Suite } from "../suite.js";

const WORKER = fileURLToPath(new URL("../../dist/store-pg-worker.js", import.meta.url));

interface Worker {
  send(command: string): Promise<void>;
  stop(): void;
}

function startWorker(url: string, rawTable: string): Promise<Worker> {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [WORKER, url, rawTable]);
  let buffered = "";
  let waiting: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  let stderr = "";
  child.on("exit", (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`store-pg worker exited ${code}: ${stderr}`));
  });
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  child.stdout.on("data", (d: Buffer) => {
    buffered += d.toString();
    let nl = buffered.indexOf("\n");
    while (nl >= 0) {
      buffered = buffered.slice(nl + 1);
      waiting.shift()?.resolve();
      nl = buffered.indexOf("\n");
    }
  });
  const line = (): Promise<void> =>
    new Promise((resolve, reject) => {
      waiting.push({ resolve, reject });
    });
  const worker: Worker = {
    send: (command) => {
      const done = line();
      child.stdin.write(`${command}\n`);
      return done;
    },
    stop: () => {
      waiting = [];
      child.stdin.end();
      child.kill();
    },
  };
  return line().then(() => worker);
}

const suite: Suite = {
  name: "store-pg",
  description:
    "receipt appends into one PostgreSQL evidence chain from 1, 2 and 4 writer processes against the same processes' raw INSERT …; COMMIT loop (same table shape, same row size)",
  async run(ctx) {
    const smoke = ctx.size === "smoke";
    const perRound = smoke ? 3 : 100;
    ctx.progress("starting a throwaway PostgreSQL cluster");
    const cluster = await benchPostgres();
    const workers: Worker[] = [];
    try {
      const url = cluster.url;
      await migrateStore(url);
      const rawTable = "public.raw_kv";
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(
        `CREATE TABLE ${rawTable} (space text NOT NULL, key bytea NOT NULL, value bytea NOT NULL, PRIMARY KEY (space, key))`,
      );
      await client.end();
      for (const writers of [1, 2, 4]) {
        while (workers.length < writers) workers.push(await startWorker(url, rawTable));
        const active = workers.slice(0, writers);
        ctx.progress(`${writers} writer process(es), ${perRound} appends each per round`);
        const r = await compare({
          name: `${writers} writer process${writers === 1 ? "" : "es"}: openPostgresStore append (one chain)`,
          baselineName: "raw INSERT …; COMMIT loop, same processes",
          baseline: () => Promise.all(active.map((w) => w.send(`raw ${perRound}`))),
          subject: () => Promise.all(active.map((w) => w.send(`append ${perRound}`))),
          rounds: smoke ? 1 : 5,
          warmup: smoke ? 0 : 1,
          headline: writers === 4,
        });
        const total = writers * perRound;
        ctx.report({
          ...r,
          details: {
            writers,
            appendsPerRound: total,
            receiptsPerSecond: Math.round(total / (r.subjectMedianMs / 1000)),
            rawCommitsPerSecond: Math.round(total / (r.baselineMedianMs / 1000)),
          },
        });
      }
    } finally {
      for (const w of workers) w.stop();
      cluster.stop();
    }
  },
};

export default suite;
