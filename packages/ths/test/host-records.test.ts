import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type FactInput, openStore } from "@asp/evidence";
import { afterAll, describe, expect, it } from "vitest";
import { type ComposedHost, composeHost, FACT_KINDS, trustedBaseKey, verifyReceipts } from "../src/index.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

// Issue 32 hole 1 / hole 13, THREAT-MODEL invariant 13: the host's memory is written by the host
// alone. The attack of the issue: a writer other than the host (there, a provider holding the
// level store's write-ahead log through an inherited descriptor) appends one hash-chained batch
// whose entry carries the `ths.trustedBase:<repo>` state key and names the denied after-tree,
// so the next gate without --base measures the change from that tree and ALLOWS. Here the
// writer appends through the store API between two host processes, which is what the forged
// WAL batch amounts to once level has replayed it.

const secrets = manifest("fake-honest-secrets", { source: "secrets" });
const timings = { initializeTimeoutMs: 5000, shutdownTimeoutMs: 500, restartBackoffMs: 20, restartBackoffMaxMs: 200 };
const tmp = mkdtempSync(join(tmpdir(), "asp-ths-host-records-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let stores = 0;

function host(store: string): Promise<ComposedHost> {
  return composeHost({
    store,
    policy: policyFor([secrets]),
    providers: [secrets],
    clock: fakeClock,
    timings,
    failOpenSink: { log() {} },
  });
}

/** Gate once (deny), then let `forge(after)` append entries as another writer would. */
async function deniedThenForged(
  forge: (after: string, repo: string) => FactInput[],
): Promise<{ dir: string; repo: string }> {
  const repo = tempRepo({ "creds.env": "KEY=ASP-SECRET\n" });
  const dir = join(tmp, `store-${stores++}`);
  const first = await host(dir);
  const denied = await first.gate({ repo });
  expect(denied.envelope.decision).toBe("deny");
  await first.close();
  const store = await openStore(dir);
  try {
    await store.log.append(forge(denied.envelope.baseline, repo));
  } finally {
    await store.close();
  }
  return { dir, repo };
}

async function gateAgain(dir: string, repo: string): Promise<{ decision: string; problems: string[] }> {
  const second = await host(dir);
  try {
    const r = await second.gate({ repo });
    return { decision: r.envelope.decision, problems: [] };
  } finally {
    await second.close();
  }
}

async function problemsIn(dir: string): Promise<string[]> {
  const store = await openStore(dir, { readOnly: true });
  try {
    return (await verifyReceipts(store.log)).problems.map((p) => p.problem);
  } finally {
    await store.close();
  }
}

describe("host-only state (the trusted base)", () => {
  describe("when another writer appends an entry of its own kind under the trusted-base key", () => {
    it("inv. 13: the next gate still denies, and receipts verify names the entry", async () => {
      const { dir, repo } = await deniedThenForged((after, r) => [
        {
          kind: "provider.note",
          record: { baseline: after, decision: "allow", callSite: "gate" },
          state: [trustedBaseKey(r)],
        },
      ]);
      // Before the fix: ALLOW (the base was read from any entry under the key).
      expect((await gateAgain(dir, repo)).decision).toBe("deny");
      const problems = await problemsIn(dir);
      expect(problems.some((p) => p.includes("provider.note") && p.includes("ths.trustedBase:"))).toBe(true);
    });
  });

  describe("when the forged entry claims to be a receipt", () => {
    it("inv. 13: a ths.receipt naming no recorded envelope never becomes the base, and is reported", async () => {
      const { dir, repo } = await deniedThenForged((after, r) => [
        {
          kind: FACT_KINDS.receipt,
          record: {
            receiptId: "rcpt-forged",
            decisionId: "dec-forged",
            decision: "allow",
            callSite: "gate",
            baseline: after,
          },
          state: [trustedBaseKey(r)],
        },
      ]);
      expect((await gateAgain(dir, repo)).decision).toBe("deny");
      expect((await problemsIn(dir)).length).toBeGreaterThan(0);
    });
  });

  describe("when the forged entry re-files a real receipt (of the deny) under the key", () => {
    it("inv. 13: a receipt that is not a gate allow never becomes the base, and is reported", async () => {
      const repo = tempRepo({ "creds.env": "KEY=ASP-SECRET\n" });
      const dir = join(tmp, `store-${stores++}`);
      const first = await host(dir);
      const denied = await first.gate({ repo });
      await first.close();
      const store = await openStore(dir);
      try {
        await store.log.append([
          { kind: FACT_KINDS.receipt, record: denied.receipt as never, state: [trustedBaseKey(repo)] },
        ]);
      } finally {
        await store.close();
      }
      expect((await gateAgain(dir, repo)).decision).toBe("deny");
      expect((await problemsIn(dir)).some((p) => p.includes("not a gate allow"))).toBe(true);
    });
  });

  describe("when only the host wrote", () => {
    it("an allow still becomes the base, and the store verifies clean", async () => {
      const repo = tempRepo({ "a.txt": "fine\n" });
      const dir = join(tmp, `store-${stores++}`);
      const h = await host(dir);
      try {
        expect((await h.gate({ repo })).envelope.decision).toBe("allow");
        const again = await h.gate({ repo });
        expect(again.receipt.validAsOf[0]?.validAsOf.reads).toEqual([]); // measured from the allowed tree
      } finally {
        await h.close();
      }
      expect(await problemsIn(dir)).toEqual([]);
    });
  });
});
