import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Policy } from "@asp/contracts";
import { afterEach, describe, expect, it } from "vitest";
import type { ComposedHost } from "../src/index.js";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// issue 32 audit, host §8 (H8.4): callbacks are bounded per request AND per session. A provider
// that stays under the per-request bound on every request, but keeps calling back request after
// request, is refused once its session total passes `callbacksPerSession`: that request is
// degraded `incomplete` (a gate never allows on it), and so is every later one of the session.

const PER_REQUEST = 50;
const PER_SESSION = 120;
const CALLS = 40; // per request: under PER_REQUEST; the 4th request crosses PER_SESSION (121 > 120)

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function floodHost(
  perSession: number,
): Promise<{ host: ComposedHost; repo: string; id: string; launches: () => number }> {
  const logDir = mkdtempSync(join(tmpdir(), "asp-callback-session-"));
  cleanups.push(() => rmSync(logDir, { recursive: true, force: true }));
  const launchLog = join(logDir, "launches");
  const flood = manifest("fake-callback-flood", {
    source: "ts",
    args: ["--calls", String(CALLS), "--launch-log", launchLog],
  });
  const base = policyFor([flood], { timeoutMs: 10_000 });
  const policy: Policy = {
    ...base,
    budgets: { ...base.budgets, callbacksPerRequest: PER_REQUEST, callbacksPerSession: perSession },
  };
  const { host } = await testHost({ policy, providers: [flood] });
  const repo = tempRepo({ "src/a.ts": "export const a = 1;\n" });
  cleanups.push(() => rmSync(repo, { recursive: true, force: true }));
  cleanups.push(() => host.close());
  const launches = () => readFileSync(launchLog, "utf8").trim().split("\n").length;
  return { host, repo, id: flood.id, launches };
}

describe("H8.4 the per-session callback bound", () => {
  it("H8.4 host §8: under the per-request bound each time, the request that crosses callbacksPerSession and every later one are incomplete, never allow", async () => {
    const { host, repo, id, launches } = await floodHost(PER_SESSION);
    const outcomes: Array<{ decision: string; reason: string | null; detail: string }> = [];
    for (let i = 0; i < 5; i++) {
      const { envelope } = await host.gate({ repo });
      const d = envelope.coverage.degraded.find((e) => e.provider === id);
      outcomes.push({ decision: envelope.decision, reason: d?.reason ?? null, detail: d?.detail ?? "" });
    }
    // 40, 80, 120 callbacks: within the session bound, the provider ran.
    expect(outcomes.slice(0, 3).map((o) => [o.decision, o.reason])).toEqual([
      ["allow", null],
      ["allow", null],
      ["allow", null],
    ]);
    // The 121st callback of the session is refused: that request and the next are incomplete.
    for (const o of outcomes.slice(3)) {
      expect(o.decision).not.toBe("allow");
      expect(o.reason).toBe("incomplete");
      expect(o.detail).toContain("callback budget exceeded");
    }
    // One process served all five requests: the bound is the session's, not a fresh launch's.
    expect(launches()).toBe(1);
    expect(host.status().providers[0]).toMatchObject({ families: { check: "degraded" }, outcomes: { complete: 3 } });
  });

  it("H8.4 host §8: the same five requests under a large session bound all run (the refusal above is the session bound's)", async () => {
    const { host, repo } = await floodHost(100_000);
    for (let i = 0; i < 5; i++) {
      const { envelope } = await host.gate({ repo });
      expect(envelope.decision).toBe("allow");
      expect(envelope.coverage.degraded).toEqual([]);
    }
  });
});
