import { afterEach, describe, expect, it } from "vitest";
import { seqKey } from "../src/fact-log.js";
import { openStore, type Store } from "../src/index.js";
import { rawSpace, tempDir, withRawLevel } from "./helpers/tmp.js";

// Reads in the same process as the writer (a server answering while a run commits) see a
// consistent view: never an entry of a batch that is landing, never a broken chain for it.

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

describe("reads while this handle appends", () => {
  it("list, latest, read and readByDigest never fail on a batch that is landing, and list sees nothing past its head", async () => {
    const store = await openStore(tempDir());
    open.push(store);
    const { log } = store;
    const appends: Promise<unknown>[] = [];
    for (let i = 0; i < 120; i += 1) {
      appends.push(
        log.append([
          { kind: "t.a", record: { i }, index: [{ name: "n", value: "v" }], state: ["key"] },
          { kind: "t.b", record: { i } },
        ]),
      );
    }
    let writing = true;
    const done = Promise.all(appends).finally(() => {
      writing = false;
    });
    const problems: string[] = [];
    let reads = 0;
    while (writing) {
      try {
        const [all, kinds, index, newest, latest] = await Promise.all([
          log.list({}),
          log.list({ kind: "t.a" }),
          log.list({ index: { name: "n", value: "v" }, reverse: true, limit: 3 }),
          log.list({ reverse: true, limit: 2 }),
          log.latest("key"),
        ]);
        // Each list is one view: seqs 1..n without gaps.
        expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i + 1));
        for (const e of [...kinds, ...index, ...newest]) expect(e.seq).toBeLessThanOrEqual(all.length + 240);
        if (latest !== undefined) {
          await log.read(latest.seq);
          await log.readByDigest(latest.digest);
        }
        reads += 1;
      } catch (error) {
        problems.push(`${(error as { code?: string }).code}: ${(error as Error).message}`);
      }
    }
    await done;
    expect(problems).toEqual([]);
    expect(reads).toBeGreaterThan(0);
    expect(await log.list({ kind: "t.a" })).toHaveLength(120);
    expect((await log.verify()).ok).toBe(true);
  });

  it("attack: an entry written past the head around the log is refused when the store opens, never listed", async () => {
    const dir = tempDir();
    const store = await openStore(dir);
    await store.log.append([{ kind: "t.a", record: { i: 1 } }]);
    await store.log.append([{ kind: "t.a", record: { i: 2 } }]);
    await store.close();
    await withRawLevel(dir, async (db) => {
      const log = rawSpace(db, "log");
      await log.put(seqKey(3), (await log.get(seqKey(2))) as Uint8Array);
    });
    await expect(openStore(dir)).rejects.toThrowWithCode("ASP_EVIDENCE_STORE_CORRUPT");
  });
});
