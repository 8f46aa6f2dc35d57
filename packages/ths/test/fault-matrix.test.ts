import {
  CALL_SITES,
  type CallSite,
  type DegradationReason,
  degradationReasonOf,
  type FailClass,
  validate,
} from "@asp/contracts";
import { parsePolicy } from "@asp/policy";
import { describe, expect, it } from "vitest";
import { failCell } from "../src/index.js";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

// The proof (issue 5): every fault fixture, against every call-site, through a real host and
// real subprocesses. host §2: the gate is never allow; degraded coverage names the provider and
// the right reason; interactive follows the policy's fail-policy table; every fail-open is logged.

interface Row {
  readonly fixture: string;
  readonly failClass: FailClass;
  readonly args?: string[];
}

const MATRIX: readonly Row[] = [
  { fixture: "fake-crash-start", failClass: "crashed" },
  { fixture: "fake-crash-mid", failClass: "crashed" },
  { fixture: "fake-hang", failClass: "timed_out" },
  { fixture: "fake-late", failClass: "timed_out", args: ["--delay", "4000"] },
  { fixture: "fake-non-json", failClass: "malformed" },
  { fixture: "fake-schema-invalid", failClass: "malformed" },
  { fixture: "fake-host-owned", failClass: "malformed" },
  { fixture: "fake-oversize", failClass: "malformed", args: ["--bytes", String(512 * 1024)] },
  { fixture: "fake-callback-flood", failClass: "incomplete" },
  { fixture: "fake-read-outside", failClass: "stale" },
  { fixture: "fake-stale", failClass: "stale" },
  { fixture: "fake-undeclared-source", failClass: "malformed" },
  { fixture: "fake-unsupported", failClass: "unsupported" },
  { fixture: "fake-error", failClass: "errored" },
  { fixture: "fake-incompatible", failClass: "incompatible" },
];

// Interactive cells the matrix policy sets itself, so the test proves the policy is followed
// (not only the built-in table): the other cells come from the built-in table.
const FAIL_POLICY = {
  timed_out: { interactive: "indeterminate" },
  errored: { interactive: "deny" },
  unsupported: { interactive: "open" },
  crashed: { interactive: "open", gate: "indeterminate" },
} as const;

const expected = { open: "allow", indeterminate: "indeterminate", deny: "deny" } as const;

// Bounded concurrency: real subprocesses on a 2-core CI machine; the budget must not measure load.
const SLOTS = 3;
let free = SLOTS;
const waiting: Array<() => void> = [];
async function slot<T>(fn: () => Promise<T>): Promise<T> {
  if (free === 0) await new Promise<void>((r) => waiting.push(r));
  else free--;
  try {
    return await fn();
  } finally {
    const next = waiting.shift();
    if (next) next();
    else free++;
  }
}

describe("H1.7 H1b.7 H2.1 H2.4 H2.5 H5.2 H8.1 H8.4 fault matrix (each fixture × each call-site)", () => {
  it.concurrent.each(MATRIX.map((r) => [r.fixture, r] as const))(
    "%s",
    (_name, row) =>
      slot(async () => {
        const m = manifest(row.fixture, row.args === undefined ? {} : { args: row.args });
        const policy = policyFor([m], { timeoutMs: 2500, failPolicy: FAIL_POLICY });
        const { host, failOpens } = await testHost({ policy, providers: [m] });
        try {
          const repo = tempRepo({ "src/a.ts": "export const a = 1;\n", "README.md": "# demo\n" });
          for (const callSite of CALL_SITES as readonly CallSite[]) {
            const { envelope, receipt } = await host.evaluate(callSite, { repo });
            expect(validate("verdict", envelope).ok, `${callSite}: envelope validates`).toBe(true);
            const reason: DegradationReason = degradationReasonOf(row.failClass);
            const entry = envelope.coverage.degraded.find((d) => d.provider === m.id);
            expect(entry, `${callSite}: degraded names ${m.id}`).toBeDefined();
            expect(entry?.reason, `${callSite}: reason (${entry?.detail})`).toBe(reason);
            expect(entry?.requirement).toBe(`req-${m.id}`);
            expect(entry?.capability).toBe("check");
            expect(envelope.coverage.ran).not.toContain(`req-${m.id}`);
            if (callSite === "gate") expect(envelope.decision, "gate never allows").not.toBe("allow");
            const cell = failCell(parsePolicy(policy), row.failClass, callSite);
            expect(envelope.decision, `${callSite} follows the fail table (${cell})`).toBe(expected[cell]);
            const opened = failOpens.filter((f) => f.decisionId === envelope.decisionId);
            if (cell === "open") {
              expect(entry?.failOpen).toBe(true);
              expect(opened).toEqual([
                expect.objectContaining({
                  provider: m.id,
                  failClass: row.failClass,
                  callSite,
                  decisionId: envelope.decisionId,
                }),
              ]);
              expect(receipt.failOpens).toEqual([{ provider: m.id, failClass: row.failClass, callSite }]);
            } else {
              expect(entry?.failOpen).toBe(false);
              expect(opened).toEqual([]);
              expect(receipt.failOpens).toEqual([]);
            }
          }
          expect(validate("host-status", host.status()).ok).toBe(true);
        } finally {
          await host.close();
        }
      }),
    60_000,
  );

  it("H2.3 unsupported and errored stay distinct in coverage, state and metrics", async () => {
    const u = manifest("fake-unsupported", { source: "u" });
    const e = manifest("fake-error", { source: "e" });
    const { host } = await testHost({ policy: policyFor([u, e]), providers: [u, e] });
    try {
      const { envelope } = await host.gate({ repo: tempRepo() });
      const reasons = Object.fromEntries(envelope.coverage.degraded.map((d) => [d.provider, d.reason]));
      expect(reasons).toEqual({ "fake-unsupported": "unsupported", "fake-error": "errored" });
    } finally {
      await host.close();
    }
  });

  it("H2a.1 an exit during shutdown is recorded and closing does not hang", async () => {
    const m = manifest("fake-exit-on-shutdown");
    const { host } = await testHost({ policy: policyFor([m]), providers: [m] });
    const { envelope } = await host.gate({ repo: tempRepo() });
    expect(envelope.decision).toBe("allow");
    const started = Date.now();
    await host.close();
    expect(Date.now() - started).toBeLessThan(2000);
    expect(host.status().providers[0]?.state).toBe("exited");
  });
});

describe("required and optional providers together", () => {
  const ts = manifest("fake-honest-ts", { source: "ts" });
  const secrets = manifest("fake-honest-secrets", { source: "secrets" });
  const failing = manifest("fake-crash-mid", { source: "lint" });

  it("H1.8 two honest providers plus one failing REQUIRED provider: not allow at any call-site", async () => {
    const { host } = await testHost({ policy: policyFor([ts, secrets, failing]), providers: [ts, secrets, failing] });
    try {
      for (const callSite of ["gate", "sweep"] as const) {
        const { envelope } = await host.evaluate(callSite, { repo: tempRepo() });
        expect(envelope.decision).not.toBe("allow");
        expect([...envelope.coverage.ran].sort()).toEqual(["req-fake-honest-secrets", "req-fake-honest-ts"]);
        expect(envelope.coverage.degraded).toEqual([
          expect.objectContaining({ provider: failing.id, requirement: `req-${failing.id}`, reason: "crashed" }),
        ]);
      }
    } finally {
      await host.close();
    }
  });

  it("H2.7 the failing provider OPTIONAL (no grant): allow, with its degradation visible", async () => {
    const { host, failOpens } = await testHost({ policy: policyFor([ts, secrets]), providers: [ts, secrets, failing] });
    try {
      const { envelope } = await host.gate({ repo: tempRepo() });
      expect(envelope.decision).toBe("allow");
      expect([...envelope.coverage.required].sort()).toEqual(["req-fake-honest-secrets", "req-fake-honest-ts"]);
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ provider: failing.id, reason: "crashed", failOpen: false }),
      ]);
      expect(envelope.coverage.degraded[0]?.requirement).toBeUndefined();
      expect(failOpens).toEqual([]);
    } finally {
      await host.close();
    }
  });
});
