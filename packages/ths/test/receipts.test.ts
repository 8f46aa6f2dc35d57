import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStore } from "@asp/evidence";
import { describe, expect, it } from "vitest";
import { composeHost, FACT_KINDS, listReceipts, showReceipt, verifyReceipts } from "../src/index.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

describe("receipts", () => {
  describe("with a real level store", () => {
    it("H1b.11 appends decision + receipt together before returning, survives reopen, and verifies the chain", async () => {
      const dir = join(mkdtempSync(join(tmpdir(), "asp-ths-store-")), "store");
      const m = manifest("fake-honest-ts", { source: "ts" });
      const repo = tempRepo({ "a.ts": "ok\n" });
      const host = await composeHost({ store: dir, policy: policyFor([m]), providers: [m], clock: fakeClock });
      const { envelope, receipt } = await host.gate({ repo });
      // host §1: durable before the envelope is returned: the receipt is readable right now.
      const entries = await host.store.log.list({ index: { name: "decisionId", value: envelope.decisionId } });
      expect(entries.map((e) => e.kind)).toEqual([FACT_KINDS.decision, FACT_KINDS.receipt]);
      expect(entries[1]?.seq).toBe((entries[0]?.seq ?? 0) + 1);
      await host.close();

      const store = await openStore(dir);
      try {
        const shown = await showReceipt(store.log, receipt.receiptId);
        expect(shown.envelope).toEqual(envelope);
        expect((await showReceipt(store.log, envelope.decisionId)).receipt.receiptId).toBe(receipt.receiptId);
        expect((await listReceipts(store.log)).map((r) => r.receipt.receiptId)).toEqual([receipt.receiptId]);
        expect(await verifyReceipts(store.log)).toMatchObject({ ok: true, receipts: 1, problems: [] });
        await expect(showReceipt(store.log, "nope")).rejects.toThrowWithCode("ASP_THS_RECEIPT_NOT_FOUND");

        // A receipt that does not match its envelope is found by verify.
        await store.log.append([
          {
            kind: FACT_KINDS.receipt,
            record: {
              ...receipt,
              receiptId: "rcpt-forged",
              decision: "allow",
              envelopeDigest: `sha256:${"0".repeat(64)}`,
            },
          },
        ]);
        const v = await verifyReceipts(store.log);
        expect(v.ok).toBe(false);
        expect(v.problems).toEqual([
          expect.objectContaining({ receiptId: "rcpt-forged", problem: expect.stringMatching(/envelopeDigest/) }),
        ]);
      } finally {
        await store.close();
      }
    });
  });
});
