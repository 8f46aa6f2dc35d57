import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openStore, type Store } from "../src/index.js";
import { fileOf, flipBytes } from "./helpers/damage.js";
import { tempDir } from "./helpers/tmp.js";

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

/** A store holding one gate decision and its receipt, closed: its only copy is in the WAL. */
async function oneDecision(): Promise<string> {
  const dir = join(tempDir(), "store");
  const store = await openStore(dir);
  await store.log.append([
    {
      kind: "ths.decision",
      record: { decisionId: "dec-1", decision: "deny" },
      index: [{ name: "decisionId", value: "dec-1" }],
    },
    {
      kind: "ths.receipt",
      record: { receiptId: "rcpt-1", decisionId: "dec-1" },
      index: [{ name: "receiptId", value: "rcpt-1" }],
    },
  ]);
  await store.close();
  return dir;
}

describe("the anchored head", () => {
  describe("when the write-ahead log of a store holding one decision has a few bytes flipped", () => {
    it("refuses the next open with STORE_CORRUPT instead of silently dropping the decision", async () => {
      const dir = await oneDecision();
      flipBytes(fileOf(dir, "wal"), -40);
      const error = await openStore(dir).then(
        (s) => {
          open.push(s);
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ code: "ASP_EVIDENCE_STORE_CORRUPT" });
    });
  });
});
