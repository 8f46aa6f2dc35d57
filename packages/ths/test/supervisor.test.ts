import { mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { validate } from "@asp/contracts";
import { createStreamConnection } from "@asp/protocol";
import { describe, expect, it } from "vitest";
import { launchEnvironment, serveHost } from "../src/index.js";
import { FIXTURES, manifest, policyFor, tempRepo, testHost } from "./helpers.js";

describe("supervisor", () => {
  describe("when a provider keeps failing", () => {
    it("H1b.7 H8.2 H10.2 quarantines it after budgets.quarantineAfterFailures and surfaces quarantine as degraded coverage (host §8)", async () => {
      const m = manifest("fake-crash-mid");
      const { host } = await testHost({ policy: policyFor([m], { quarantineAfterFailures: 2 }), providers: [m] });
      try {
        const repo = tempRepo();
        const first = await host.gate({ repo });
        expect(first.envelope.coverage.degraded[0]?.reason).toBe("crashed");
        await host.gate({ repo });
        const third = await host.gate({ repo });
        expect(third.envelope.decision).not.toBe("allow");
        expect(third.envelope.coverage.degraded[0]).toMatchObject({
          reason: "quarantined",
          providerState: "quarantined",
        });
        const status = host.status();
        expect(validate("host-status", status).ok).toBe(true);
        expect(status.providers[0]).toMatchObject({
          state: "quarantined",
          health: { quarantined: true },
          families: { check: "quarantined" },
        });
        expect(status.capabilities.check).toEqual([]);
      } finally {
        await host.close();
      }
    });

    it("H2a.1 H2a.5 restarts a crashed provider (restarts counted) and it serves the next request", async () => {
      const m = manifest("fake-crash-mid");
      const honest = manifest("fake-honest-ts", { source: "ts" });
      const { host } = await testHost({ policy: policyFor([honest]), providers: [m, honest] });
      try {
        const repo = tempRepo();
        await host.gate({ repo });
        await host.gate({ repo });
        const crashed = host.status().providers.find((p) => p.id === m.id);
        expect(crashed?.health.restarts).toBeGreaterThanOrEqual(1);
        const ok = host.status().providers.find((p) => p.id === honest.id);
        expect(ok).toMatchObject({ state: "initialized", coverage: { ran: 2, degraded: 0 }, latency: { samples: 2 } });
        expect(ok?.latency.p50Ms).toBeGreaterThan(0);
      } finally {
        await host.close();
      }
    });
  });

  describe("when a provider answers with a status other than a complete run (host §2, §8)", () => {
    // Each status kind is its own kind in state, metrics and coverage; none is a successful run.
    const table = [
      { fixture: "fake-honest-ts", kind: "complete", reason: null, family: "initialized", towardQuarantine: 0 },
      { fixture: "fake-error", kind: "error", reason: "errored", family: "degraded", towardQuarantine: 1 },
      {
        fixture: "fake-unsupported",
        kind: "unsupported",
        reason: "unsupported",
        family: "degraded",
        towardQuarantine: 0,
      },
      { fixture: "fake-incomplete", kind: "incomplete", reason: "incomplete", family: "degraded", towardQuarantine: 0 },
      { fixture: "fake-partial", kind: "partial", reason: "incomplete", family: "degraded", towardQuarantine: 0 },
    ] as const;
    for (const row of table) {
      it(`H2.3 H2.5 H2a.6 host §2: status kind ${row.kind} (${row.fixture}) is counted as ${row.kind}${row.kind === "complete" ? "" : ", never as a successful run"}`, async () => {
        const m = manifest(row.fixture);
        const { host } = await testHost({ policy: policyFor([m]), providers: [m] });
        try {
          const { envelope } = await host.gate({ repo: tempRepo() });
          const status = host.status();
          expect(validate("host-status", status).ok).toBe(true);
          const p = status.providers[0];
          const complete = row.kind === "complete";
          expect(p?.outcomes?.[row.kind]).toBe(1);
          expect(Object.values(p?.outcomes ?? {}).reduce((a, b) => a + b, 0)).toBe(1);
          expect(p?.coverage).toEqual({ ran: complete ? 1 : 0, degraded: complete ? 0 : 1 });
          expect(p?.latency.samples).toBe(complete ? 1 : 0);
          expect(p?.health.consecutiveFailures).toBe(row.towardQuarantine);
          expect(p?.families.check).toBe(row.family);
          if (row.reason === null) {
            expect(envelope.decision).toBe("allow");
            expect(envelope.coverage.degraded).toEqual([]);
          } else {
            expect(envelope.decision).toBe("indeterminate");
            expect(envelope.coverage.degraded).toEqual([
              expect.objectContaining({ provider: m.id, reason: row.reason }),
            ]);
          }
        } finally {
          await host.close();
        }
      });
    }

    it("H8.2 host §8: status error counts toward quarantine; the provider is quarantined after N errors in a row", async () => {
      const m = manifest("fake-error");
      const { host } = await testHost({ policy: policyFor([m], { quarantineAfterFailures: 2 }), providers: [m] });
      try {
        const repo = tempRepo();
        expect((await host.gate({ repo })).envelope.coverage.degraded[0]?.reason).toBe("errored");
        await host.gate({ repo });
        expect(host.status().providers[0]).toMatchObject({
          state: "quarantined",
          health: { consecutiveFailures: 2, quarantined: true },
        });
        const third = await host.gate({ repo });
        expect(third.envelope.decision).toBe("indeterminate");
        expect(third.envelope.coverage.degraded[0]).toMatchObject({
          reason: "quarantined",
          providerState: "quarantined",
        });
        expect(host.status().providers[0]?.outcomes).toMatchObject({ error: 2, failed: 1, complete: 0 });
      } finally {
        await host.close();
      }
    });

    /** Gate `runs` times on one host over fake-status-cycle; the provider's status after each run. */
    async function cycleStatuses(cycle: string, runs: number) {
      const m = manifest("fake-status-cycle", { args: ["--cycle", cycle] });
      const { host } = await testHost({ policy: policyFor([m], { quarantineAfterFailures: 2 }), providers: [m] });
      try {
        const repo = tempRepo();
        const out = [];
        for (let i = 0; i < runs; i++) {
          await host.gate({ repo });
          out.push(host.status().providers[0]);
        }
        return out;
      } finally {
        await host.close();
      }
    }

    it("H8.2 H2.3 host §8: a capability gap or an incomplete answer between two errors does not reset the failure count", async () => {
      const statuses = await cycleStatuses("error,unsupported,partial", 4);
      expect(statuses[2]?.health).toMatchObject({ consecutiveFailures: 1, quarantined: false });
      expect(statuses[3]).toMatchObject({
        state: "quarantined",
        health: { consecutiveFailures: 2, quarantined: true },
        outcomes: { error: 2, unsupported: 1, partial: 1, complete: 0 },
      });
    });

    it("only a complete run resets the failure count", async () => {
      const statuses = await cycleStatuses("error,complete", 4);
      expect(statuses[3]).toMatchObject({
        health: { consecutiveFailures: 0, quarantined: false },
        outcomes: { error: 2, complete: 2 },
        latency: { samples: 2 },
        coverage: { ran: 2, degraded: 2 },
      });
    });
  });

  describe("when the caller cancels", () => {
    it("H2a.1 H2a.5 sends $/cancelRequest and degrades the provider as cancelled", async () => {
      const m = manifest("fake-hang");
      const { host } = await testHost({ policy: policyFor([m], { timeoutMs: 10_000 }), providers: [m] });
      try {
        const abort = new AbortController();
        const pending = host.gate({ repo: tempRepo(), signal: abort.signal });
        setTimeout(() => abort.abort(), 300);
        const { envelope } = await pending;
        expect(envelope.decision).toBe("indeterminate");
        expect(envelope.coverage.degraded[0]).toMatchObject({ provider: m.id, reason: "cancelled" });
      } finally {
        await host.close();
      }
    });
  });

  describe("H2a.3 H2a.4 launch (host §2)", () => {
    it("passes only PATH and the manifest's envPassthrough names", () => {
      const env = launchEnvironment(
        { ...manifest("fake-honest-ts"), envPassthrough: ["HOME"] },
        { PATH: "/bin", HOME: "/home/x", SECRET_TOKEN: "nope", NODE_OPTIONS: "--require evil" },
      );
      expect(env).toEqual({ PATH: "/bin", HOME: "/home/x" });
    });

    it("refuses a provider whose cwd is inside the candidate repository", async () => {
      const repo = tempRepo();
      const m = { ...manifest("fake-honest-ts"), cwd: repo };
      const { host } = await testHost({ policy: policyFor([m]), providers: [m], warm: false });
      try {
        const { envelope } = await host.gate({ repo });
        expect(envelope.coverage.degraded[0]).toMatchObject({ provider: m.id, reason: "unavailable" });
        expect(envelope.coverage.degraded[0]?.detail).toMatch(/inside the candidate repository/);
      } finally {
        await host.close();
      }
    });

    it.each([
      ["a cwd in a folder named ..x", (repo: string) => ({ cwd: join(repo, "..x") })],
      ["a script argument inside the repository", (repo: string) => ({ args: [join(repo, "evil.mjs")] })],
      ["a cwd reached through a symlink into the repository", (repo: string) => ({ cwd: linkTo(repo) })],
    ])("host §2: refuses a provider launched with %s (never runs it)", async (_what, launch) => {
      const repo = tempRepo({ "a.ts": "ok\n", "..x/keep": "", "evil.mjs": "process.exit(0);\n" });
      const m = { ...manifest("fake-honest-ts"), ...launch(repo) };
      const { host } = await testHost({ policy: policyFor([m]), providers: [m], warm: false });
      try {
        const { envelope } = await host.gate({ repo });
        expect(envelope.decision).toBe("indeterminate");
        expect(envelope.coverage.degraded[0]).toMatchObject({ provider: m.id, reason: "unavailable" });
        expect(envelope.coverage.degraded[0]?.detail).toMatch(/inside the candidate repository/);
      } finally {
        await host.close();
      }
    });

    it("an executable that does not exist is unavailable, never a pass", async () => {
      const m = { ...manifest("fake-honest-ts"), executable: "/nonexistent/node" };
      const { host } = await testHost({ policy: policyFor([m]), providers: [m] });
      try {
        const { envelope } = await host.gate({ repo: tempRepo() });
        expect(envelope.decision).toBe("indeterminate");
        expect(envelope.coverage.degraded[0]?.reason).toMatch(/unavailable|crashed/);
      } finally {
        await host.close();
      }
    });
  });

  describe("serveHost", () => {
    it("H0.1 H2a.6 answers host/status and host/capabilities over JSON-RPC", async () => {
      const m = manifest("fake-honest-ts", { source: "ts" });
      const { host } = await testHost({ policy: policyFor([m]), providers: [m] });
      const toHost = new PassThrough();
      const fromHost = new PassThrough();
      const server = serveHost(host, toHost, fromHost);
      const client = createStreamConnection(fromHost, toHost);
      client.listen();
      try {
        const status = await client.sendRequest("host/status");
        expect(validate("host-status", status).ok).toBe(true);
        expect(await client.sendRequest("host/capabilities")).toEqual({
          inspect: [],
          check: [{ id: m.id, state: "initialized" }],
          edit: [],
        });
      } finally {
        client.dispose();
        server.dispose();
        await host.close();
      }
    });
  });

  it("keeps fixtures outside any repository it evaluates", () => {
    expect(FIXTURES).toMatch(/test\/fixtures\/$/);
  });
});

/** A symlink outside `target` that points at it. */
function linkTo(target: string): string {
  const link = join(mkdtempSync(join(tmpdir(), "asp-ths-link-")), "via");
  symlinkSync(target, link);
  return link;
}
