import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type FactInput, type FactLog, openStore, type Store, TOKENS } from "@asp/evidence";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { readTrustedBase } from "../src/host-records.js";
import { type ComposedHost, composeHost, FACT_KINDS, trustedBaseKey, verifyReceipts } from "../src/index.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

// Two hosts share one store (as two hosts share one PostgreSQL store) and gate one repository.
// Host A binds its gate on the trusted base it reads; while its providers work, host B allows a
// newer tree and records it as the trusted base. A's allow, decided on the older view, must not
// replace B's trusted base: it is refused with a code and nothing of it is written.

const secrets = manifest("fake-honest-secrets", { source: "secrets" });
const timings = { initializeTimeoutMs: 5000, shutdownTimeoutMs: 500, restartBackoffMs: 20, restartBackoffMaxMs: 200 };
const tmp = mkdtempSync(join(tmpdir(), "asp-ths-base-race-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const closing: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const c of closing.splice(0).reverse()) await c.close();
});

/**
 * Fault injection: a FactLog that runs `interleave` (the other host's work) right before the
 * first append that records a receipt, then appends as asked (options included).
 */
function fakeInterleavedLog(real: FactLog, interleave: () => Promise<void>): FactLog {
  let done = false;
  return {
    ...real,
    append: async (entries: readonly FactInput[], options) => {
      if (!done && entries.some((e) => e.kind === FACT_KINDS.receipt)) {
        done = true;
        await interleave();
      }
      return real.append(entries, options);
    },
  };
}

async function sharedStore(): Promise<Store> {
  const store = await openStore(join(mkdtempSync(join(tmp, "s-")), "store"), { clock: fakeClock });
  closing.push(store);
  return store;
}

async function hostOn(store: Store, interleave?: () => Promise<void>): Promise<ComposedHost> {
  const host = await composeHost({
    store,
    policy: policyFor([secrets]),
    providers: [secrets],
    clock: fakeClock,
    timings,
    failOpenSink: { log() {} },
    ...(interleave === undefined
      ? {}
      : {
          register: (c) => c.register(TOKENS.FactLog, { useValue: fakeInterleavedLog(store.log, interleave) }),
        }),
  });
  closing.push(host);
  return host;
}

/** The after-tree the repository's trusted base names now (the receipt's baseline), or null. */
async function trustedTree(log: FactLog, repo: string): Promise<string | null> {
  const e = await log.latest(trustedBaseKey(repo));
  return e === undefined ? null : (e.record as { baseline: string }).baseline;
}

describe("the trusted base on a store two hosts share", () => {
  describe("when another host records a trusted base while a gate is evaluating", () => {
    it("the gate's allow is refused with ASP_THS_TRUSTED_BASE_MOVED, writes nothing, and the newer trusted base stays", {
      timeout: 60_000,
    }, async () => {
      const repo = tempRepo({ "a.ts": "export const a = 1;\n" });
      const store = await sharedStore();
      const b = await hostOn(store);
      const first = await b.gate({ repo });
      expect(first.envelope.decision).toBe("allow");
      const bound = await store.log.latestSeq(trustedBaseKey(repo));

      let newer: string | null = null;
      let newerSeq: number | null = null;
      let headAfterB: unknown = null;
      // While A's evaluation is between its bind and its record, B gates a newer tree (what a
      // second machine with a newer checkout would do) and records it as the trusted base.
      const a = await hostOn(store, async () => {
        writeFileSync(join(repo, "a.ts"), "export const a = 2;\n");
        const other = await b.gate({ repo });
        expect(other.envelope.decision).toBe("allow");
        newer = other.envelope.baseline;
        newerSeq = await store.log.latestSeq(trustedBaseKey(repo));
        headAfterB = await store.log.head();
        writeFileSync(join(repo, "a.ts"), "export const a = 1;\n");
      });
      const error = await a.gate({ repo }).catch((e: unknown) => e);
      expect(error).toMatchObject({
        code: "ASP_THS_TRUSTED_BASE_MOVED",
        category: "internal",
        data: { key: trustedBaseKey(repo), expected: bound, actual: newerSeq },
      });
      expect(newerSeq).toBeGreaterThan(bound ?? 0);
      // Nothing of A's evaluation was written: the head is B's, and so is the trusted base.
      expect(await store.log.head()).toEqual(headAfterB);
      expect(newer).not.toBeNull();
      expect(await trustedTree(store.log, repo)).toBe(newer);
      // ...and it is a verified host record: the next gate without --base measures from it.
      expect((await readTrustedBase(store.log, trustedBaseKey(repo))).tree).toBe(newer);
      expect((await verifyReceipts(store.log)).ok).toBe(true);

      // Gating again binds on the new head: it decides against B's base and records its own.
      const again = await a.gate({ repo });
      expect(again.envelope.decision).toBe("allow");
      expect(await trustedTree(store.log, repo)).toBe(again.envelope.baseline);
    });

    it("a deny is still recorded: it never moves the trusted base, so it is not conditional", {
      timeout: 60_000,
    }, async () => {
      const repo = tempRepo({ "a.ts": "export const a = 1;\n" });
      const store = await sharedStore();
      const b = await hostOn(store);
      expect((await b.gate({ repo })).envelope.decision).toBe("allow");
      let newer: string | null = null;
      const a = await hostOn(store, async () => {
        writeFileSync(join(repo, "creds.env"), "");
        const other = await b.gate({ repo });
        newer = other.envelope.baseline;
        writeFileSync(join(repo, "creds.env"), "KEY=ASP-SECRET\n");
      });
      writeFileSync(join(repo, "creds.env"), "KEY=ASP-SECRET\n");
      const denied = await a.gate({ repo });
      expect(denied.envelope.decision).toBe("deny");
      const last = await store.log.list({ kind: FACT_KINDS.receipt, reverse: true, limit: 1 });
      expect(last[0]?.record).toMatchObject({ receiptId: denied.receipt.receiptId, decision: "deny" });
      expect(await trustedTree(store.log, repo)).toBe(newer);
    });
  });

  describe("when nothing else moved the trusted base", () => {
    it("the gate's allow records it on the head it was bound on", { timeout: 60_000 }, async () => {
      const repo = tempRepo({ "a.ts": "export const a = 1;\n" });
      const store = await sharedStore();
      const a = await hostOn(store, async () => {});
      const r = await a.gate({ repo });
      expect(r.envelope.decision).toBe("allow");
      expect(await trustedTree(store.log, repo)).toBe(r.envelope.baseline);
    });
  });
});
