import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openStore, type Store, type WaitProgress } from "../src/index.js";
import { ensureBuilt, tempDir } from "./helpers/tmp.js";

const GATE = new URL("./fixtures/gate-like.mjs", import.meta.url).pathname;
const HOLD = new URL("./fixtures/hold-store.mjs", import.meta.url).pathname;

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

function run(args: readonly string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString("utf8");
    });
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out, err }));
  });
}

/** A child holding the store open until its stdin closes. */
async function holder(entry: string, dir: string): Promise<{ pid: number; release: () => Promise<number | null> }> {
  const child = spawn(process.execPath, [HOLD, entry, dir], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise<number | null>((r) => child.on("exit", r));
  await new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("opened\n")) resolve();
    });
    child.on("exit", () => reject(new Error(`holder exited: ${out}`)));
  });
  return {
    pid: child.pid as number,
    release: () => {
      child.stdin.end();
      return exited;
    },
  };
}

describe("concurrent use of one store", () => {
  describe("when another process holds the store", () => {
    it("waits with progress naming the holder's pid, and opens once it is released", { timeout: 60_000 }, async () => {
      const entry = ensureBuilt();
      const dir = join(tempDir(), "store");
      (await openStore(dir)).close();
      const held = await holder(entry, dir);
      const progress: WaitProgress[] = [];
      const opening = openStore(dir, { waitMs: 60_000, onWait: (p) => progress.push(p) });
      // Released only once the waiter has reported at least once: it really waited.
      while (progress.length === 0) await new Promise((r) => setTimeout(r, 50));
      expect(progress[0]).toMatchObject({ pid: held.pid, timeoutMs: 60_000 });
      expect(await held.release()).toBe(0);
      const store = await opening;
      open.push(store);
      expect(await store.log.verify()).toMatchObject({ ok: true });
    });

    it("gives up after its bound with STORE_LOCKED naming the holder's pid", { timeout: 60_000 }, async () => {
      const entry = ensureBuilt();
      const dir = join(tempDir(), "store");
      await (await openStore(dir)).close();
      const held = await holder(entry, dir);
      try {
        const error = await openStore(dir, { waitMs: 300 }).catch((e: unknown) => e);
        expect(error).toMatchObject({ code: "ASP_EVIDENCE_STORE_LOCKED", data: { pid: held.pid, path: dir } });
        expect((error as { data: { waitedMs: number } }).data.waitedMs).toBeGreaterThanOrEqual(300);
      } finally {
        await held.release();
      }
    });

    it("opens read-only at once, without the lock, seeing what was durable", { timeout: 60_000 }, async () => {
      const entry = ensureBuilt();
      const dir = join(tempDir(), "store");
      const s = await openStore(dir);
      const [e] = await s.log.append([{ kind: "note", record: { n: 1 } }]);
      await s.close();
      const held = await holder(entry, dir);
      try {
        const reader = await openStore(dir, { readOnly: true });
        open.push(reader);
        expect(reader.readOnly).toBe(true);
        expect(reader.location).toBe(dir);
        expect(await reader.log.verify()).toMatchObject({
          ok: true,
          entries: 1,
          anchored: { seq: 1, digest: e?.digest },
        });
        await expect(reader.log.append([{ kind: "note", record: {} }])).rejects.toThrowWithCode(
          "ASP_EVIDENCE_READ_ONLY",
        );
        await expect(reader.objects.putBlob(new Uint8Array([1]))).rejects.toThrowWithCode("ASP_EVIDENCE_READ_ONLY");
        await reader.close();
        open.pop();
        // The private snapshot is gone once the reader closes.
        expect(readdirSync(join(dir, "..")).filter((n) => n.includes(".snapshot-"))).toEqual([]);
      } finally {
        await held.release();
      }
    });
  });

  describe("when eight processes gate on one store at once", () => {
    it("every one completes and the chain verifies with all their entries", { timeout: 240_000 }, async () => {
      const entry = ensureBuilt();
      // A new store: the eight also race to create it.
      const dir = join(tempDir(), "store");
      const runs = await Promise.all(
        Array.from({ length: 8 }, (_, i) => run([GATE, entry, dir, `g${i}`, "200000", "3"])),
      );
      for (const [i, r] of runs.entries()) expect(r, `child g${i}: ${r.err}`).toMatchObject({ code: 0 });
      expect(runs.some((r) => r.out.includes("waiting "))).toBe(true);
      const store = await openStore(dir);
      open.push(store);
      expect(await store.log.verify()).toMatchObject({ ok: true, entries: 24, anchored: { seq: 24 } });
      for (let i = 0; i < 8; i++) {
        const mine = await store.log.list({ index: { name: "tag", value: `g${i}` } });
        expect(mine.map((e) => (e.record as { i: number }).i)).toEqual([0, 1, 2]);
        // Each held the store for its whole evaluation: its three entries are consecutive.
        expect(mine.map((e) => e.seq - (mine[0]?.seq ?? 0))).toEqual([0, 1, 2]);
      }
      expect(readdirSync(join(dir, "..")).filter((n) => n !== "store")).toEqual([]);
    });
  });
});
