/**
 * One writer process of the `store-pg` suite. argv: the store URL, the raw table. Reads commands
 * on stdin, one per line: `append N` (N receipt-sized appends through `openPostgresStore`, each
 * acknowledged before the next) or `raw N` (N `INSERT …; COMMIT` of a row of the same size into a
 * table of the same shape); prints `done` after each, `ready` once connected.
 */
import { createInterface } from "node:readline";
import { openPostgresStore } from "@asp/store-postgres";
import pg from "pg";
import { receiptFact, receiptRowBytes } from "./suites/store-pg-shape.js";

const [url, rawTable] = process.argv.slice(2) as [string, string];
const store = await openPostgresStore(url, { maxConnections: 1 });
const client = new pg.Client({ connectionString: url });
await client.connect();
await client.query("SET synchronous_commit = on");
const row = Buffer.from(receiptRowBytes());
let n = 0;
process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) {
  const [verb, count] = line.split(" ");
  for (let i = 0; i < Number(count); i++) {
    n++;
    if (verb === "append") await store.log.append([receiptFact(n)]);
    else {
      await client.query("BEGIN");
      await client.query(`INSERT INTO ${rawTable} (space, key, value) VALUES ('log', $1, $2)`, [
        Buffer.from(`${process.pid}:${n}`),
        row,
      ]);
      await client.query("COMMIT");
    }
  }
  process.stdout.write("done\n");
}
await store.close();
await client.end();
