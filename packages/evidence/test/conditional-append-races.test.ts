import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type FactEntry, type FactLog, openStore, type Store } from "../src/index.js";
import { ensureBuilt, tempDir } from "./helpers/tmp.js";

// Two writers race on one state key K: a "promoter" reads K's head (a candidate), works, then
// appends a Verified entry for it only if K still has that head; a "producer" appends newer
// candidates under K at any time. The invariant, whatever the interleaving: a Verified entry
// always directly follows (under K) the candidate it verifies, so a newer candidate is never
// superseded by a Verified of an older one.

const GATE = new URL("./fixtures/gate-like.mjs", import.meta.url).pathname;
const K = "gate/latest";

const opened: Store[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
});

const candidate = (n: number) => ({ kind: "gate.decision", record: { n }, state: [K] });
const verified = (of: number) => ({ kind: "run.verified", record: { of }, state: [K] });

/** Every Verified entry directly follows, under K, the candidate it names. */
async function assertNeverSuperseded(log: FactLog): Promise<number> {
  const underK = (await log.list()).filter((e) => e.state.includes(K));
  let verifiedCount = 0;
  underK.forEach((e, i) => {
    if (e.kind !== "run.verified") return;
    verifiedCount++;
    const before = underK[i - 1] as FactEntry;
    expect(before.kind, `verified seq ${e.seq}`).toBe("gate.decision");
    expect((e.record as { of: number }).of, `verified seq ${e.seq}`).toBe(before.seq);
  });
  return verifiedCount;
}

const hops = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await Promise.resolve();
};

/**
 * The promoter: read K's head, tell `onRead`, work `turns` microtask hops (between its check and
 * its append), append Verified on the head it read.
 */
async function promote(
  log: FactLog,
  turns: number,
  onRead = (): void => {},
): Promise<FactEntry[] | { refused: unknown }> {
  const seq = await log.latestSeq(K);
  onRead();
  await hops(turns);
  return log.append([verified(seq ?? 0)], { expect: [{ key: K, seq }] }).catch((refused: unknown) => ({ refused }));
}

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

describe("conditional append races (level)", () => {
  describe("when a promoter and a producer append under one key through one handle, concurrently", () => {
    it("20 rounds: a Verified never supersedes a newer candidate, and every refusal names a newer head", async () => {
      const store = await openStore(join(tempDir(), "store"));
      opened.push(store);
      const { log } = store;
      await log.append([candidate(0)]);
      let refusals = 0;
      for (let round = 1; round <= 20; round++) {
        // The producer appends while the promoter works between its check and its append: before
        // or after the promoter's append, by how many hops each takes (no I/O in between).
        let read: () => void = () => {};
        const hasRead = new Promise<void>((r) => {
          read = r;
        });
        const produce = async (): Promise<FactEntry[]> => {
          await hasRead;
          await hops(round % 4);
          return log.append([candidate(round)]);
        };
        const [promoted, produced] = await Promise.all([promote(log, (round * 3) % 5, read), produce()]);
        expect(produced).toHaveLength(1);
        if ("refused" in promoted) {
          refusals++;
          const data = (promoted.refused as { code: string; data: { expected: number; actual: number } }).data;
          expect(promoted.refused).toMatchObject({ code: "ASP_EVIDENCE_CONDITION_FAILED", data: { key: K } });
          expect(data.actual).toBeGreaterThan(data.expected);
        }
      }
      const promotions = await assertNeverSuperseded(log);
      expect(promotions + refusals).toBe(20);
      // Both sides of the race were run (the order is fixed by the hop counts, not by time).
      expect(promotions).toBeGreaterThan(0);
      expect(refusals).toBeGreaterThan(0);
      expect(await log.verify()).toMatchObject({ ok: true });
    });

    it("20 rounds: two promoters of the same head, exactly one commits", async () => {
      const store = await openStore(join(tempDir(), "store"));
      opened.push(store);
      const { log } = store;
      for (let round = 1; round <= 20; round++) {
        const [c] = await log.append([candidate(round)]);
        // Both read the same head, then append on it after different amounts of work.
        const seq = await log.latestSeq(K);
        expect(seq).toBe(c?.seq);
        const outcomes = await Promise.allSettled(
          [round % 3, (round + 1) % 3].map(async (n) => {
            await hops(n);
            return log.append([verified(seq ?? 0)], { expect: [{ key: K, seq }] });
          }),
        );
        expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
        expect(outcomes.find((o) => o.status === "rejected")).toMatchObject({
          reason: { code: "ASP_EVIDENCE_CONDITION_FAILED", data: { expected: seq, actual: (seq ?? 0) + 1 } },
        });
      }
      expect(await assertNeverSuperseded(log)).toBe(20);
    });
  });

  describe("when the producer is another process (level's lock passes the store between them)", () => {
    it("a promoter that read the head before the other process appended is refused after it reopens", {
      timeout: 120_000,
    }, async () => {
      const entry = ensureBuilt();
      const dir = join(tempDir(), "store");
      const first = await openStore(dir);
      await first.log.append([candidate(0)]);
      await first.close();
      for (let round = 1; round <= 3; round++) {
        // The promoter reads K's head, then lets go of the store (its work takes a while).
        const a = await openStore(dir);
        const seen = await a.log.latestSeq(K);
        await a.close();
        // Another process takes the store and appends a newer candidate under K.
        const child = await run([GATE, entry, dir, `p${round}`, "60000", "1"]);
        expect(child, child.err).toMatchObject({ code: 0 });
        const newer = Number(child.out.trim().split(" ")[1]);
        // The promoter comes back and appends on the head it saw: refused, nothing written.
        const again = await openStore(dir, { waitMs: 60_000 });
        opened.push(again);
        const head = await again.log.head();
        const error = await again.log
          .append([verified(seen ?? 0)], { expect: [{ key: K, seq: seen }] })
          .catch((e: unknown) => e);
        expect(error).toMatchObject({
          code: "ASP_EVIDENCE_CONDITION_FAILED",
          data: { key: K, expected: seen, actual: newer },
        });
        expect(await again.log.head()).toEqual(head);
        // On the head it reads now, it may promote.
        await again.log.append([verified(newer)], { expect: [{ key: K, seq: newer }] });
        await again.close();
        opened.pop();
      }
      const last = await openStore(dir);
      opened.push(last);
      expect(await assertNeverSuperseded(last.log)).toBe(3);
      expect(await last.log.verify()).toMatchObject({ ok: true, entries: 7 });
    });
  });
});
