import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type FactLogHead, formatHead, openStore, parseHead, type Store } from "../src/index.js";
import { tempDir } from "./helpers/tmp.js";

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});
const digestOf = (c: string): string => `sha256:${c.repeat(64)}`;

describe("heads kept elsewhere", () => {
  describe("when a head is written and read as SEQ:DIGEST", () => {
    it("round-trips", () => {
      const head = { seq: 12, digest: digestOf("a") } as FactLogHead;
      expect(formatHead(head)).toBe(`12:${digestOf("a")}`);
      expect(parseHead(formatHead(head))).toEqual(head);
      expect(parseHead(` 12:${digestOf("a")}\n`)).toEqual(head);
    });

    it.each([
      ["empty", ""],
      ["seq 0", `0:${digestOf("a")}`],
      ["leading zero", `012:${digestOf("a")}`],
      ["negative", `-1:${digestOf("a")}`],
      ["no digest", "12:"],
      ["upper-case hex", `12:sha256:${"A".repeat(64)}`],
      ["short digest", "12:sha256:abc"],
      ["no seq", digestOf("a")],
      ["beyond a safe integer", `99999999999999999:${digestOf("a")}`],
    ])("refuses %s with BAD_HEAD", (_name, text) => {
      expect(() => parseHead(text)).toThrowWithCode("ASP_EVIDENCE_BAD_HEAD");
    });
  });

  describe("when the chain is verified against a head recorded earlier", () => {
    it("passes for every head the store ever had, and fails for a head it never had", async () => {
      const store = await openStore(join(tempDir(), "store"));
      open.push(store);
      const heads: FactLogHead[] = [];
      for (let i = 0; i < 4; i++) {
        await store.log.append([{ kind: "note", record: { i } }]);
        heads.push((await store.log.head()) as FactLogHead);
      }
      for (const h of heads) expect(await store.log.verify({ expectHead: h })).toMatchObject({ ok: true, entries: 4 });
      expect(
        await store.log.verify({ expectHead: { seq: 2, digest: heads[2]?.digest as string } as FactLogHead }),
      ).toMatchObject({
        ok: false,
        seq: 2,
      });
      expect(
        await store.log.verify({ expectHead: { seq: 9, digest: heads[0]?.digest as string } as FactLogHead }),
      ).toMatchObject({
        ok: false,
        seq: 5,
      });
    });

    it("catches a store deleted and rebuilt from scratch, though its own chain verifies", async () => {
      const dir = join(tempDir(), "store");
      let store = await openStore(dir);
      await store.log.append([{ kind: "gate.decision", record: { decision: "deny" } }]);
      const recorded = formatHead((await store.log.head()) as FactLogHead);
      await store.close();
      rmSync(dir, { recursive: true });
      store = await openStore(dir);
      open.push(store);
      await store.log.append([{ kind: "gate.decision", record: { decision: "allow" } }]);
      expect(await store.log.verify()).toMatchObject({ ok: true, entries: 1 });
      expect(await store.log.verify({ expectHead: parseHead(recorded) })).toMatchObject({ ok: false, seq: 1 });
    });
  });
});
