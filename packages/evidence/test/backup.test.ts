import { spawn } from "node:child_process";
import { cpSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { backupStore, checkStore, type FactLogHead, openStore, type Store } from "../src/index.js";
import { fileOf, fingerprint, flipBytes } from "./helpers/damage.js";
import { ensureBuilt, tempDir } from "./helpers/tmp.js";

const APPENDER = new URL("./fixtures/append-loop.mjs", import.meta.url).pathname;
const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

describe("backupStore", () => {
  describe("while a writer appends to the store", () => {
    it("makes consistent, verified copies; a restore verifies against the backup's head", {
      timeout: 120_000,
    }, async () => {
      const entry = ensureBuilt();
      const dir = join(tempDir(), "store");
      const child = spawn(process.execPath, [APPENDER, entry, dir], { stdio: ["ignore", "pipe", "inherit"] });
      const exited = new Promise((r) => child.on("exit", r));
      let acks = 0;
      const acked = new Promise<void>((resolve) => {
        child.stdout.on("data", (d: Buffer) => {
          acks += d
            .toString()
            .split("\n")
            .filter((l) => l.startsWith("ack ")).length;
          if (acks >= 30) resolve();
        });
      });
      try {
        await acked;
        const backups = [];
        for (let i = 0; i < 3; i++) backups.push(await backupStore(dir, join(tempDir(), `backup-${i}`)));
        for (const [i, b] of backups.entries()) {
          expect(b.head?.seq, `backup ${i}`).toBeGreaterThanOrEqual(b.anchored?.seq ?? 1);
          if (i > 0) expect(b.head?.seq).toBeGreaterThanOrEqual(backups[i - 1]?.head?.seq as number);
          expect(b.storeId).toBe(backups[0]?.storeId);
        }
        const last = backups.at(-1);
        // Restore: copy the backup where a store should be, open it, verify against its head.
        const restored = join(tempDir(), "restored");
        cpSync(last?.path as string, restored, { recursive: true });
        const store = await openStore(restored);
        open.push(store);
        expect(await store.log.verify({ expectHead: last?.head as FactLogHead })).toMatchObject({
          ok: true,
          entries: last?.entries,
        });
        expect(await store.log.head()).toEqual(last?.head);
      } finally {
        child.kill("SIGKILL");
        await exited;
      }
      // The live store went on: the backups were taken without its lock.
      const after = await openStore(dir);
      open.push(after);
      expect(await after.log.verify()).toMatchObject({ ok: true });
    });
  });

  describe("when the target is not empty", () => {
    it("refuses with TARGET_NOT_EMPTY and leaves it as it was", async () => {
      const dir = join(tempDir(), "store");
      await (await openStore(dir)).close();
      const out = join(tempDir(), "out");
      mkdirSync(out);
      writeFileSync(join(out, "keep.txt"), "mine");
      const before = fingerprint(out);
      await expect(backupStore(dir, out)).rejects.toThrowWithCode("ASP_EVIDENCE_TARGET_NOT_EMPTY");
      expect(fingerprint(out)).toEqual(before);
      await expect(backupStore(dir, dir)).rejects.toThrowWithCode("ASP_EVIDENCE_TARGET_NOT_EMPTY");
    });
  });

  describe("when the store is damaged", () => {
    it("refuses with STORE_CORRUPT naming the store (salvage it instead), leaving no backup behind", async () => {
      const dir = join(tempDir(), "store");
      const s = await openStore(dir);
      await s.log.append([{ kind: "note", record: { n: 1 } }]);
      await s.close();
      flipBytes(fileOf(dir, "wal"), -40);
      const out = join(tempDir(), "out-parent", "backup");
      const error = await backupStore(dir, out).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "ASP_EVIDENCE_STORE_CORRUPT", data: { path: dir } });
      expect(readdirSync(dirname(out))).toEqual([]);
      expect((await checkStore(dir)).ok).toBe(false);
    });
  });
});
