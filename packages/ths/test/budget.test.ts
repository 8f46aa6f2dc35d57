import { type FactLog, type ObjectStore, TOKENS } from "@asp/evidence";
import { describe, expect, it } from "vitest";
import { type ComposedHost, composeHost } from "../src/index.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

// host §8: the interactive budget is one ceiling for the whole evaluation, from the snapshot to
// the durable receipt. Slow parts are injected with fakes named as such (fault injection only):
// a slow object store makes the snapshot slow, a slow fact log makes the durable append slow.

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Fault injection: every object write waits `ms` first. */
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

/** Fault injection: every durable append waits `ms` first. */
function fakeSlowLog(real: FactLog, ms: number): FactLog {
  return new Proxy(real, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        if (prop === "append") await sleep(ms);
        return value.apply(target, args);
      };
    },
  });
}

async function hostWith(
  provider: ReturnType<typeof manifest>,
  budgetMs: number,
  slow: { objectsMs?: number; appendMs?: number },
): Promise<ComposedHost> {
  const policy = policyFor([provider], { timeoutMs: budgetMs });
  return composeHost({
    store: "memory:",
    policy,
    providers: [provider],
    clock: fakeClock,
    failOpenSink: { log() {} },
    register: (c) => {
      const objects = c.resolve<ObjectStore>(TOKENS.ObjectStore);
      const log = c.resolve<FactLog>(TOKENS.FactLog);
      if (slow.objectsMs !== undefined)
        c.register(TOKENS.ObjectStore, { useValue: fakeSlowObjects(objects, slow.objectsMs) });
      if (slow.appendMs !== undefined) c.register(TOKENS.FactLog, { useValue: fakeSlowLog(log, slow.appendMs) });
    },
  });
}

describe("the interactive budget", () => {
  it("H8.3 host §8: time spent on the snapshot comes out of the providers' share", async () => {
    const honest = manifest("fake-honest-ts", { source: "ts" });
    // The snapshot alone (one slow object batch of 1.2 s) outlasts the 1 s budget.
    const host = await hostWith(honest, 1000, { objectsMs: 1200 });
    try {
      const r = await host.check({ repo: tempRepo({ "a.ts": "ok\n" }) });
      const entry = r.envelope.coverage.degraded.find((d) => d.provider === honest.id);
      expect(entry).toMatchObject({ reason: "timed-out" });
      expect(r.envelope.coverage.ran).toEqual([]);
    } finally {
      await host.close();
    }
  });

  it("H8.3 host §8: a slow durable append shortens the providers' share of later evaluations", async () => {
    // The provider answers after 600 ms; the store takes 600 ms to make a receipt durable.
    const late = manifest("fake-late", { source: "ts", args: ["--delay", "600"] });
    const host = await hostWith(late, 1000, { appendMs: 600 });
    try {
      const repo = tempRepo({ "a.ts": "ok\n" });
      await host.check({ repo }); // learns how long the tail after the providers takes
      const second = await host.check({ repo });
      // 600 ms of provider + 600 ms of store do not fit in 1 s: the provider's share is cut, it
      // times out, and the evaluation ends within the ceiling instead of overrunning it.
      expect(second.envelope.coverage.degraded.find((d) => d.provider === late.id)).toMatchObject({
        reason: "timed-out",
      });
    } finally {
      await host.close();
    }
  });

  it("H8.1 host §8: gate and sweep keep a per-provider bound (a slow snapshot does not time a provider out)", async () => {
    const honest = manifest("fake-honest-ts", { source: "ts" });
    const host = await hostWith(honest, 1000, { objectsMs: 1200 });
    try {
      const r = await host.gate({ repo: tempRepo({ "a.ts": "ok\n" }) });
      expect(r.envelope.coverage.ran).toEqual([`req-${honest.id}`]);
    } finally {
      await host.close();
    }
  });
});
