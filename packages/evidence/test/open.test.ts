import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Level } from "level";
import { afterEach, describe, expect, it } from "vitest";
import { createMemoryStore, type OpenStoreOptions, openStore, type Store, TOKENS } from "../src/index.js";
import { ensureBuilt, tempDir, withRawLevel } from "./helpers/tmp.js";

const HOLD = new URL("./fixtures/hold-store.mjs", import.meta.url).pathname;
const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function expectRefused(dir: string, code: string, options: OpenStoreOptions = {}): Promise<unknown> {
  const error = await openStore(dir, options).then(
    (s) => {
      open.push(s);
      return undefined;
    },
    (e: unknown) => e,
  );
  expect(error).toMatchObject({ code });
  // The error names the path, so an operator knows which directory to look at.
  expect((error as { data: { path: string } }).data.path).toBe(dir);
  return error;
}

const listing = (dir: string): string[] => readdirSync(dir).sort();

async function madeStore(): Promise<string> {
  const dir = join(tempDir(), "store");
  const store = await openStore(dir);
  await store.log.append([{ kind: "note", record: { keep: "me" } }]);
  await store.close();
  return dir;
}

describe("openStore", () => {
  describe("when the directory is missing or empty", () => {
    it("creates a store and reopens it with the same id", async () => {
      const base = tempDir();
      const empty = join(base, "empty");
      mkdirSync(empty);
      for (const dir of [join(base, "missing/nested"), empty]) {
        const store = await openStore(dir);
        const id = store.id;
        await store.close();
        const again = await openStore(dir);
        expect(again.id).toBe(id);
        await again.close();
      }
    });

    it("finishes a creation interrupted after the marker was written", async () => {
      const dir = join(tempDir(), "store");
      mkdirSync(dir);
      writeFileSync(
        join(dir, "ASP-EVIDENCE-STORE.json"),
        JSON.stringify({ format: "@asp/evidence-store", version: 1 }),
      );
      const store = await openStore(dir);
      open.push(store);
      expect(await store.log.verify()).toMatchObject({ ok: true });
    });
  });

  describe("when the directory is not ours", () => {
    it("refuses a non-empty foreign directory, naming it, and leaves it untouched", async () => {
      const dir = tempDir();
      writeFileSync(join(dir, "notes.txt"), "mine");
      await expectRefused(dir, "ASP_EVIDENCE_NOT_A_STORE");
      expect(listing(dir)).toEqual(["notes.txt"]);
      expect(readFileSync(join(dir, "notes.txt"), "utf8")).toBe("mine");
    });

    it("refuses a plain level database without the marker", async () => {
      const dir = join(tempDir(), "db");
      const db = new Level(dir);
      await db.put("k", "v");
      await db.close();
      const before = listing(dir);
      await expectRefused(dir, "ASP_EVIDENCE_NOT_A_STORE");
      expect(listing(dir)).toEqual(before);
    });

    it("refuses a level database with data but no format record, even with a marker", async () => {
      const dir = join(tempDir(), "db");
      const db = new Level(dir);
      await db.put("k", "v");
      await db.close();
      writeFileSync(
        join(dir, "ASP-EVIDENCE-STORE.json"),
        JSON.stringify({ format: "@asp/evidence-store", version: 1 }),
      );
      await expectRefused(dir, "ASP_EVIDENCE_NOT_A_STORE");
    });

    it("refuses a path that is a file", async () => {
      const file = join(tempDir(), "file");
      writeFileSync(file, "x");
      await expectRefused(file, "ASP_EVIDENCE_NOT_A_STORE");
    });

    it("refuses a store written by a newer format", async () => {
      const dir = await madeStore();
      writeFileSync(
        join(dir, "ASP-EVIDENCE-STORE.json"),
        JSON.stringify({ format: "@asp/evidence-store", version: 99 }),
      );
      await expectRefused(dir, "ASP_EVIDENCE_UNSUPPORTED_FORMAT");
    });
  });

  describe("when the store is corrupted", () => {
    it("refuses a store whose CURRENT file is gone, never re-creating it", async () => {
      const dir = await madeStore();
      rmSync(join(dir, "CURRENT"));
      const before = listing(dir);
      await expectRefused(dir, "ASP_EVIDENCE_STORE_CORRUPT");
      expect(listing(dir)).toEqual(before);
    });

    it("refuses a store whose manifest pointer is garbage", async () => {
      const dir = await madeStore();
      writeFileSync(join(dir, "CURRENT"), "garbage");
      await expectRefused(dir, "ASP_EVIDENCE_STORE_CORRUPT");
    });

    it("refuses a store whose marker is unreadable", async () => {
      const dir = await madeStore();
      writeFileSync(join(dir, "ASP-EVIDENCE-STORE.json"), "{not json");
      await expectRefused(dir, "ASP_EVIDENCE_STORE_CORRUPT");
    });

    it("keeps the data of a refused store: fixing the fault makes it open with its records", async () => {
      const dir = await madeStore();
      const current = readFileSync(join(dir, "CURRENT"));
      writeFileSync(join(dir, "CURRENT"), "garbage");
      await expectRefused(dir, "ASP_EVIDENCE_STORE_CORRUPT");
      writeFileSync(join(dir, "CURRENT"), current);
      const store = await openStore(dir);
      open.push(store);
      expect((await store.log.read(1)).record).toEqual({ keep: "me" });
    });
  });

  describe("when the store is already open", () => {
    it("gives a second handle in the same process STORE_LOCKED once its wait runs out, naming this pid", async () => {
      const dir = await madeStore();
      const first = await openStore(dir);
      open.push(first);
      const error = await expectRefused(dir, "ASP_EVIDENCE_STORE_LOCKED", { waitMs: 0 });
      expect(error).toMatchObject({ data: { pid: process.pid } });
    });

    it("gives a second process STORE_LOCKED while the first holds it, and opens once it is released", async () => {
      const entry = ensureBuilt();
      const dir = await madeStore();
      const child = spawn(process.execPath, [HOLD, entry, dir], { stdio: ["pipe", "pipe", "inherit"] });
      const exited = new Promise<number | null>((r) => child.on("exit", r));
      let out = "";
      await new Promise<void>((resolve, reject) => {
        child.stdout.on("data", (d: Buffer) => {
          out += d.toString();
          if (out.includes("\n")) resolve();
        });
        child.on("exit", () => reject(new Error(`child exited: ${out}`)));
      });
      expect(out).toBe("opened\n");
      const error = await expectRefused(dir, "ASP_EVIDENCE_STORE_LOCKED", { waitMs: 0 });
      expect(error).toMatchObject({ data: { pid: child.pid } });
      child.stdin.end();
      expect(await exited).toBe(0);
      const store = await openStore(dir);
      open.push(store);
      expect(await store.log.verify()).toMatchObject({ ok: true, entries: 1 });
    });
  });
});

describe("openStore of a store written before anchors (marker version 1)", () => {
  /** A current store made to look like one from before the anchor: no anchor file, marker v1. */
  async function legacy(): Promise<string> {
    const dir = await madeStore();
    rmSync(join(dir, "ASP-EVIDENCE-HEAD"));
    writeFileSync(join(dir, "ASP-EVIDENCE-STORE.json"), JSON.stringify({ format: "@asp/evidence-store", version: 1 }));
    return dir;
  }

  describe("when its chain verifies", () => {
    it("anchors it at its head on the next writable open, and from then on requires the anchor", async () => {
      const dir = await legacy();
      const store = await openStore(dir);
      const head = await store.log.head();
      await store.close();
      expect(JSON.parse(readFileSync(join(dir, "ASP-EVIDENCE-STORE.json"), "utf8"))).toMatchObject({ version: 2 });
      const again = await openStore(dir);
      open.push(again);
      expect(await again.log.verify()).toMatchObject({ ok: true, entries: 1, anchored: head });
      await again.close();
      open.pop();
      rmSync(join(dir, "ASP-EVIDENCE-HEAD"));
      await expectRefused(dir, "ASP_EVIDENCE_STORE_CORRUPT");
    });

    it("opens read-only without anchoring it", async () => {
      const dir = await legacy();
      const store = await openStore(dir, { readOnly: true });
      open.push(store);
      expect(await store.log.verify()).toMatchObject({ ok: true, entries: 1 });
      expect(readdirSync(dir)).not.toContain("ASP-EVIDENCE-HEAD");
    });
  });

  describe("when its chain does not verify", () => {
    it("refuses with STORE_CORRUPT and does not anchor a broken chain", async () => {
      const dir = await legacy();
      await withRawLevel(dir, async (db) => {
        const log = db.sublevel<string, Uint8Array>("log", { keyEncoding: "utf8", valueEncoding: "view" });
        const key = "0000000000000001";
        const text = Buffer.from((await log.get(key)) as Uint8Array).toString("utf8");
        await log.put(key, new TextEncoder().encode(text.replace('"keep":"me"', '"keep":"it"')));
      });
      await expectRefused(dir, "ASP_EVIDENCE_STORE_CORRUPT");
      expect(readdirSync(dir)).not.toContain("ASP-EVIDENCE-HEAD");
    });
  });
});

describe("openStore read-only", () => {
  describe("when there is no store yet", () => {
    it("refuses with NOT_A_STORE and creates nothing", async () => {
      const dir = join(tempDir(), "none");
      await expectRefused(dir, "ASP_EVIDENCE_NOT_A_STORE", { readOnly: true });
      expect(readdirSync(join(dir, ".."))).toEqual([]);
    });
  });
});

describe("createMemoryStore", () => {
  describe("when created", () => {
    it("has its own id and an empty log", async () => {
      const a = await createMemoryStore();
      const b = await createMemoryStore();
      expect(a.id).not.toBe(b.id);
      expect(a.location).toBe("memory:");
      expect(await a.log.head()).toBeNull();
    });
  });
});

describe("TOKENS", () => {
  describe("when two copies of the package define them", () => {
    it("agree, because they are Symbol.for keys", () => {
      expect(TOKENS.FactLog).toBe(Symbol.for("asp.evidence.FactLog"));
      expect(new Set(Object.values(TOKENS)).size).toBe(4);
    });
  });
});
