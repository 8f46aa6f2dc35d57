import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openStore } from "../src/index.js";
import { dumpSpace, ensureBuilt, parseAcks, tempDir, withRawLevel } from "./helpers/tmp.js";

const CHILD = new URL("./fixtures/append-loop.mjs", import.meta.url).pathname;
const KILLS = 50;

/** Small deterministic PRNG, so a failing run can be replayed with the same kill moments. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

interface Run {
  readonly acks: Array<[number, string]>;
  readonly signal: NodeJS.Signals | null;
}

/**
 * Spawn the appender and SIGKILL it: `afterReady` ms after it reports the store open, or, when
 * `fromSpawn` is set, that many ms after spawning (so some kills land while it starts or opens).
 * Returns the complete ack lines it printed.
 */
function runAndKill(entry: string, dir: string, when: { afterReady: number } | { fromSpawn: number }): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, entry, dir], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    let timer: NodeJS.Timeout | undefined;
    const kill = (): void => {
      child.kill("SIGKILL");
    };
    if ("fromSpawn" in when) timer = setTimeout(kill, when.fromSpawn);
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString("utf8");
      if (timer === undefined && "afterReady" in when && out.includes("ready "))
        timer = setTimeout(kill, when.afterReady);
    });
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (signal !== "SIGKILL") {
        reject(new Error(`appender exited by itself (code ${code}): ${err}`));
        return;
      }
      const acks = parseAcks(out).map(({ seq, digest }) => [seq, digest] as [number, string]);
      resolve({ acks, signal });
    });
  });
}

/**
 * One lane: a store, and KILLS / LANES appender processes killed one after another. After each
 * kill the store is reopened and checked. Returns how many kills landed mid-append.
 */
async function lane(
  entry: string,
  dir: string,
  kills: number,
  seed: number,
): Promise<{ midAppend: number; acked: number }> {
  const random = prng(seed);
  const acknowledged = new Map<number, string>();
  let midAppend = 0;
  for (let i = 0; i < kills; i++) {
    // One kill in six lands while the child starts or opens the store; the rest mid-append.
    const when =
      random() < 1 / 6 ? { fromSpawn: Math.floor(random() * 700) } : { afterReady: Math.floor(random() * 80) };
    const run = await runAndKill(entry, dir, when);
    if (run.acks.length > 0) midAppend++;
    for (const [seq, digest] of run.acks) acknowledged.set(seq, digest);

    const store = await openStore(dir);
    try {
      const where = `seed ${seed}, kill ${i} (${JSON.stringify(when)})`;
      expect(await store.log.verify(), where).toMatchObject({ ok: true });
      const entries = await store.log.list({ kind: "crash.tick" });
      const committed = new Map(entries.map((e) => [e.seq, e.digest]));
      for (const [seq, digest] of acknowledged)
        expect(committed.get(seq), `${where}: acknowledged seq ${seq}`).toBe(digest);
      // State rows were committed with their entries: each key's latest is its last entry.
      for (let k = 0; k < 5; k++) {
        const last = entries.filter((e) => e.state.includes(`k${k}`)).at(-1);
        expect((await store.log.latest(`k${k}`))?.seq, where).toBe(last?.seq);
      }
    } finally {
      await store.close();
    }
  }
  return { midAppend, acked: acknowledged.size };
}

describe("FactLog crash consistency", () => {
  describe("when an appending process is killed with SIGKILL at random moments", () => {
    it(`H1b.11 keeps a verifying chain holding every acknowledged append, over ${KILLS} kills`, {
      timeout: 240_000,
    }, async () => {
      const entry = ensureBuilt();
      const seed = Number(process.env.ASP_CRASH_SEED ?? 20261130);
      // Two stores killed in parallel: child start-up dominates, so this halves the wall time.
      const dirs = [join(tempDir(), "store-a"), join(tempDir(), "store-b")];
      const results = await Promise.all(dirs.map((dir, i) => lane(entry, dir, KILLS / dirs.length, seed + i)));
      const midAppend = results.reduce((n, r) => n + r.midAppend, 0);
      expect(midAppend, "most kills should land mid-append").toBeGreaterThan(KILLS / 2);
      expect(results.every((r) => r.acked > 0)).toBe(true);

      // The index rows written by crash-interrupted batches equal a rebuild from the log.
      const dir = dirs[0] as string;
      const spaces = ["idx", "state", "digest"];
      const dump = () => withRawLevel(dir, (db) => Promise.all(spaces.map((s) => dumpSpace(db, s))));
      const incremental = await dump();
      const store = await openStore(dir);
      await store.log.rebuildIndexes();
      await store.close();
      expect(await dump()).toEqual(incremental);
    });
  });
});
