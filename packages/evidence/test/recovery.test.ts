import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkStore, type FactLogHead, openStore, SALVAGE_KIND, type Store, salvageStore } from "../src/index.js";
import { fingerprint } from "./helpers/damage.js";
import { fakeClock } from "./helpers/stores.js";
import { ensureBuilt, tempDir } from "./helpers/tmp.js";

const HOLD = new URL("./fixtures/hold-store.mjs", import.meta.url).pathname;
const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function healthy(n = 5): Promise<string> {
  const dir = join(tempDir(), "store");
  const store = await openStore(dir, { clock: fakeClock() });
  for (let i = 1; i <= n; i++) await store.log.append([{ kind: "note", record: { i }, state: ["last"] }]);
  await store.objects.putBlob(new TextEncoder().encode("evidence"));
  await store.close();
  return dir;
}

describe("checkStore", () => {
  describe("when the store is healthy and a writer holds it", () => {
    it("reports ok at once, without the lock and without touching a file", { timeout: 60_000 }, async () => {
      const entry = ensureBuilt();
      const dir = await healthy();
      const child = spawn(process.execPath, [HOLD, entry, dir], { stdio: ["pipe", "pipe", "inherit"] });
      const exited = new Promise((r) => child.on("exit", r));
      await new Promise<void>((resolve) => child.stdout.on("data", () => resolve()));
      try {
        const before = fingerprint(dir);
        const check = await checkStore(dir);
        expect(check).toMatchObject({ ok: true, path: dir, verified: 5, stranded: 0, recovered: 0, damage: [] });
        expect(check.anchored).toEqual(check.head);
        expect(fingerprint(dir)).toEqual(before);
      } finally {
        child.stdin.end();
        await exited;
      }
    });
  });

  describe("when the directory is not a store", () => {
    it("refuses with NOT_A_STORE", async () => {
      await expect(checkStore(tempDir())).rejects.toThrowWithCode("ASP_EVIDENCE_NOT_A_STORE");
    });
  });
});

describe("salvageStore", () => {
  describe("when the store is healthy", () => {
    it("copies every entry byte for byte and every object, records no loss, under a new id", async () => {
      const dir = await healthy();
      const source = await openStore(dir, { readOnly: true });
      const heads = await source.log.head();
      const id = source.id;
      await source.close();
      const result = await salvageStore(dir, join(tempDir(), "a", "salvaged"), { clock: fakeClock() });
      expect(result).toMatchObject({ kept: 5, lost: [], carried: 0, objects: { copied: 1, skipped: 0 } });
      const store = await openStore(result.path);
      open.push(store);
      expect(store.id).toBe(result.storeId);
      expect(store.id).not.toBe(id);
      expect(await store.log.verify({ expectHead: heads as FactLogHead })).toMatchObject({
        ok: true,
        entries: 6,
      });
      const record = (await store.log.latest(SALVAGE_KIND))?.record;
      expect(record).toMatchObject({ source: { path: dir, storeId: id }, lost: [], kept: { from: 1, to: 5 } });
      expect((await store.log.latest("last"))?.seq).toBe(5);
    });
  });

  describe("when the target is not empty", () => {
    it("refuses with TARGET_NOT_EMPTY", async () => {
      const dir = await healthy(1);
      await expect(salvageStore(dir, dir)).rejects.toThrowWithCode("ASP_EVIDENCE_TARGET_NOT_EMPTY");
    });
  });
});
