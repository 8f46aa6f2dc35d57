import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ObjectStore, TOKENS } from "@asp/evidence";
import { afterEach, describe, expect, it } from "vitest";
import { type ComposedHost, composeHost } from "../src/index.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

// issue 32 audit, host §8 (H8.3): the interactive budget is ONE ceiling for the whole host, from
// the snapshot to the durable receipt, even when several providers all launch cold. Each of three
// providers needs INIT ms to start and ASSESS ms to answer: alone, each fits in the budget (the
// gate, which bounds each provider's call, shows it), but after a SNAPSHOT ms snapshot the rest of
// the one interactive ceiling cannot hold them. The host's deadlines read `performance.now()` and
// take no clock port, so the test asserts what the host recorded (failure classes, the receipt,
// the deadline it handed each provider), never how long anything took: a loaded machine only
// makes each of these outcomes more certain.

const BUDGET = 4000;
const SNAPSHOT = 1500;
const INIT = 1200;
const ASSESS = 1200;
const PROVIDERS = ["cold-a", "cold-b", "cold-c"];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Fault injection: every object write of the snapshot waits `ms` first (as in budget.test.ts). */
function fakeSlowObjects(real: ObjectStore, ms: number): ObjectStore {
  return new Proxy(real, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      const slow = prop === "putMany" || prop === "putBlob" || prop === "putTree";
      return async (...args: unknown[]) => {
        if (slow) await sleep(ms);
        return value.apply(target, args);
      };
    },
  });
}

async function coldHost(): Promise<{ host: ComposedHost; repo: string; deadlines: () => number[] }> {
  const dir = mkdtempSync(join(tmpdir(), "asp-ceiling-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, "deadlines");
  const providers = PROVIDERS.map((id) =>
    manifest("fake-cold", {
      id,
      source: id,
      args: ["--init-delay", String(INIT), "--assess-delay", String(ASSESS), "--out", out],
    }),
  );
  const host = await composeHost({
    store: "memory:",
    policy: policyFor(providers, { timeoutMs: BUDGET }),
    providers,
    clock: fakeClock,
    failOpenSink: { log() {} },
    // Cold: nothing is launched before the evaluation starts.
    warm: false,
    timings: { initializeTimeoutMs: 30_000, shutdownTimeoutMs: 2000, restartBackoffMs: 20, restartBackoffMaxMs: 200 },
    register: (c) => {
      const objects = c.resolve<ObjectStore>(TOKENS.ObjectStore);
      c.register(TOKENS.ObjectStore, { useValue: fakeSlowObjects(objects, SNAPSHOT) });
    },
  });
  cleanups.push(() => host.close());
  const repo = tempRepo({ "src/a.ts": "export const a = 1;\n" });
  cleanups.push(() => rmSync(repo, { recursive: true, force: true }));
  const deadlines = () =>
    existsSync(out)
      ? readFileSync(out, "utf8")
          .trim()
          .split("\n")
          .filter((l) => l !== "")
          .map(Number)
      : [];
  return { host, repo, deadlines };
}

describe("H8.3 the interactive ceiling on a cold host with several providers", () => {
  it("H8.3 host §8: snapshot, three cold starts and their answers share one ceiling: each provider is timed out, recorded in a durable receipt", async () => {
    const { host, repo, deadlines } = await coldHost();
    const r = await host.check({ repo });
    expect(r.envelope.callSite).toBe("interactive");
    expect(r.envelope.coverage.ran).toEqual([]);
    expect(r.envelope.coverage.degraded.map((d) => [d.provider, d.reason]).sort()).toEqual(
      PROVIDERS.map((id) => [id, "timed-out"]),
    );
    // Interactive fails open on a timeout, never silently: each one is in the receipt.
    expect(r.receipt.failOpens.map((f) => [f.provider, f.failClass]).sort()).toEqual(
      PROVIDERS.map((id) => [id, "timed_out"]),
    );
    // The receipt is durable, and it is the one returned.
    const stored = await host.log.list({ index: { name: "receiptId", value: r.receipt.receiptId } });
    expect(stored.map((e) => e.record)).toEqual([r.receipt]);
    // Whatever share reached a provider was what was left of the one ceiling after the snapshot
    // and its own cold start, never a fresh per-provider allowance.
    for (const d of deadlines()) expect(d).toBeLessThanOrEqual(BUDGET - SNAPSHOT - INIT);
  });

  it("H8.3 H8.1 host §8: the same cold providers each fit at the gate, which bounds each provider's call (so the ceiling above is the whole host's)", async () => {
    const { host, repo, deadlines } = await coldHost();
    const r = await host.gate({ repo });
    expect(r.envelope.coverage.ran.sort()).toEqual(PROVIDERS.map((id) => `req-${id}`));
    expect(r.envelope.decision).toBe("allow");
    // Each got its own budget, less only its own cold start: not cut by the snapshot.
    const got = deadlines();
    expect(got).toHaveLength(PROVIDERS.length);
    for (const d of got) expect(d).toBeLessThanOrEqual(BUDGET - INIT);
  });
});
