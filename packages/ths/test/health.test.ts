import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type Assessment,
  FAIL_CLASSES,
  type ProviderManifest,
  type ProviderRunOutcome,
  validate,
} from "@asp/contracts";
import { EvidenceError, type FactLog, openStore, TOKENS } from "@asp/evidence";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  HEALTH_FACT_KIND,
  healthStateKey,
  LATENCY_SAMPLES,
  ProviderHealth,
  parseHealthRecord,
  QUARANTINE_FAILURES,
  readHealthStatus,
} from "../src/health.js";
import { composeHost, FACT_KINDS, HOST_INFO } from "../src/index.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

const ID = { id: "p", version: "1.0.0", digest: `sha256:${"a".repeat(64)}` };

function assessment(status: Assessment["status"], missing?: string[]): Assessment {
  return {
    provider: { id: "p", version: "1.0.0" },
    requestId: "r1",
    status,
    validAsOf: { baseline: `sha256:${"b".repeat(64)}`, changeset: null, reads: [] },
    diagnostics: [],
    coverage: { sources: ["fake"], ...(missing === undefined ? {} : { missing }) },
    ...(status === "error" ? { error: { code: "E", message: "boom" } } : {}),
  };
}

/** A temp folder for one real level store. */
const storeDir = (): string => join(mkdtempSync(join(tmpdir(), "asp-ths-health-")), "store");

/** A provider manifest whose every launch appends a line to a launch log. */
function logged(file: string, options: Parameters<typeof manifest>[1] = {}): { m: ProviderManifest; log: string } {
  const log = join(mkdtempSync(join(tmpdir(), "asp-ths-launch-")), "launches.log");
  return { m: manifest(file, { ...options, args: [...(options.args ?? []), "--launch-log", log] }), log };
}

const launches = (log: string): number =>
  existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean).length : 0;

/** One `asp gate`-like run: compose on the store, gate once, close. Nothing survives but the store. */
async function oneShotGate(store: string, m: ProviderManifest, quarantineAfterFailures: number, repo: string) {
  const host = await composeHost({
    store,
    policy: policyFor([m], { quarantineAfterFailures }),
    providers: [m],
    clock: fakeClock,
    timings: { restartBackoffMs: 20, restartBackoffMaxMs: 200 },
    failOpenSink: { log: () => {} },
  });
  try {
    const { envelope } = await host.gate({ repo });
    return { envelope, status: host.status().providers[0] };
  } finally {
    await host.close();
  }
}

describe("health", () => {
  describe("ProviderHealth", () => {
    it.each<readonly [string, ProviderRunOutcome, Assessment, number]>([
      ["complete", "complete", assessment("complete"), 0],
      ["complete with coverage.missing", "partial", assessment("complete", ["src/a.ts"]), 0],
      ["incomplete", "incomplete", assessment("incomplete"), 0],
      ["unsupported", "unsupported", assessment("unsupported"), 0],
      ["error", "error", assessment("error"), 1],
    ])("H2.3 host §2: an assessment with status %s is counted as %s", (_why, outcome, a, failures) => {
      const h = new ProviderHealth(ID, 3);
      h.assessed(a, 12.5);
      const f = h.figures();
      expect(f.outcomes?.[outcome]).toBe(1);
      expect(f.coverage).toEqual(outcome === "complete" ? { ran: 1, degraded: 0 } : { ran: 0, degraded: 1 });
      expect(f.latency.samples).toBe(outcome === "complete" ? 1 : 0);
      expect(f.health.consecutiveFailures).toBe(failures);
    });

    it.each(FAIL_CLASSES.map((c) => [c] as const))(
      "H8.2 host §8: fail class %s counts toward quarantine only when it is a health or budget failure",
      (failClass) => {
        const h = new ProviderHealth(ID, 1);
        const quarantined = h.failed(failClass);
        expect(quarantined).toBe(QUARANTINE_FAILURES.has(failClass));
        expect(h.figures().coverage).toEqual({ ran: 0, degraded: 1 });
        const kind = failClass === "errored" ? "error" : failClass === "unsupported" ? "unsupported" : "failed";
        expect(h.figures().outcomes?.[kind]).toBe(1);
      },
    );

    it("keeps the latest LATENCY_SAMPLES successful latencies, and a stored record round-trips", () => {
      const h = new ProviderHealth(ID, 3);
      for (let i = 0; i < LATENCY_SAMPLES + 10; i++) h.assessed(assessment("complete"), i);
      h.failed("crashed");
      const record = h.toRecord();
      expect(record.latencyMs).toHaveLength(LATENCY_SAMPLES);
      expect(record.latencyMs[0]).toBe(10);
      const again = new ProviderHealth(ID, 3);
      again.restore(parseHealthRecord(JSON.parse(JSON.stringify(record)), ID) ?? record);
      expect(again.toRecord()).toEqual(record);
      expect(h.toFact()).toMatchObject({ kind: HEALTH_FACT_KIND, state: [healthStateKey(ID)] });
    });

    it("keys health by the pinned identity: another version or digest is another key", () => {
      expect(healthStateKey(ID)).not.toBe(healthStateKey({ ...ID, version: "1.0.1" }));
      expect(healthStateKey(ID)).not.toBe(healthStateKey({ ...ID, digest: `sha256:${"c".repeat(64)}` }));
    });

    it("parseHealthRecord is total: any JSON value gives a record of this identity or null", () => {
      const record = new ProviderHealth(ID, 3).toRecord();
      expect(parseHealthRecord(record, ID)).toEqual(record);
      expect(parseHealthRecord(record, { ...ID, digest: `sha256:${"c".repeat(64)}` })).toBeNull();
      expect(parseHealthRecord({ ...record, consecutiveFailures: -1 }, ID)).toBeNull();
      expect(parseHealthRecord({ ...record, version: 2 }, ID)).toBeNull();
      fc.assert(
        fc.property(fc.jsonValue(), (v) => {
          expect(parseHealthRecord(v, ID)).toBeNull();
        }),
      );
    });
  });

  describe("with a real level store and one-shot hosts", () => {
    it("H8.2 host §8: an erroring provider is quarantined on the Nth one-shot run, and the next run never launches it", async () => {
      const store = storeDir();
      const repo = tempRepo();
      const { m, log } = logged("fake-error");
      for (let run = 1; run <= 3; run++) {
        const { envelope, status } = await oneShotGate(store, m, 3, repo);
        expect(envelope.decision).toBe("indeterminate");
        expect(envelope.coverage.degraded[0]).toMatchObject({ provider: m.id, reason: "errored" });
        expect(status?.health).toMatchObject({ consecutiveFailures: run, quarantined: run === 3 });
      }
      expect(launches(log)).toBe(3);
      const fourth = await oneShotGate(store, m, 3, repo);
      expect(fourth.envelope.decision).toBe("indeterminate");
      expect(fourth.envelope.coverage.degraded[0]).toMatchObject({
        provider: m.id,
        reason: "quarantined",
        providerState: "quarantined",
      });
      expect(fourth.status).toMatchObject({
        state: "quarantined",
        families: { check: "quarantined" },
        outcomes: { error: 3, failed: 1, complete: 0 },
      });
      expect(launches(log)).toBe(3);

      // A new pinned version is a new identity: it starts with a clean record.
      const next = { ...m, version: "1.0.1", args: [...m.args, "--version", "1.0.1"] };
      const fresh = await oneShotGate(store, next, 3, repo);
      expect(fresh.envelope.coverage.degraded[0]).toMatchObject({ reason: "errored" });
      expect(fresh.status?.health).toMatchObject({ consecutiveFailures: 1, quarantined: false });
      expect(launches(log)).toBe(4);
    });

    it("host §8: an operator's resetQuarantine lifts a stored quarantine, recorded with who asked; the provider launches again", async () => {
      const store = storeDir();
      const repo = tempRepo();
      const { m, log } = logged("fake-error");
      for (let run = 1; run <= 2; run++) await oneShotGate(store, m, 2, repo);
      expect(launches(log)).toBe(2);
      const host = await composeHost({
        store,
        policy: policyFor([m], { quarantineAfterFailures: 2 }),
        providers: [m],
        clock: fakeClock,
        failOpenSink: { log: () => {} },
      });
      try {
        await expect(host.resetQuarantine("no.such.provider", "ops")).rejects.toMatchObject({
          code: "ASP_THS_UNKNOWN_PROVIDER",
          data: { known: [m.id] },
        });
        // The stored quarantine is lifted even before this host read it.
        const reset = await host.resetQuarantine(m.id, "ops");
        expect(reset).toMatchObject({ provider: m.id, lifted: true, clearedFailures: 2 });
        const entry = await host.store.log.read(reset.seq as number);
        expect(entry).toMatchObject({
          kind: "ths.quarantine-reset",
          record: { provider: { id: m.id }, by: "ops", clearedFailures: 2 },
        });
        // The cleared health is in the same batch: the next entry.
        expect(await host.store.log.read((reset.seq as number) + 1)).toMatchObject({
          kind: HEALTH_FACT_KIND,
          record: { quarantined: false, consecutiveFailures: 0, outcomes: { error: 2 } },
        });
        expect(host.status().providers[0]?.state).not.toBe("quarantined");
        // Not quarantined any more: a second reset changes nothing and writes nothing.
        const head = await host.store.log.head();
        expect(await host.resetQuarantine(m.id, "ops")).toEqual({
          provider: m.id,
          lifted: false,
          clearedFailures: null,
          seq: null,
        });
        expect(await host.store.log.head()).toEqual(head);
      } finally {
        await host.close();
      }
      // A later one-shot run launches it again, and counts from zero.
      const again = await oneShotGate(store, m, 2, repo);
      expect(again.envelope.coverage.degraded[0]).toMatchObject({ provider: m.id, reason: "errored" });
      expect(again.status?.health).toMatchObject({ consecutiveFailures: 1, quarantined: false });
      expect(launches(log)).toBe(3);
    });

    it("H2.3 host §2: unsupported, incomplete and partial answers accumulate as their own kinds and never quarantine", async () => {
      const store = storeDir();
      const repo = tempRepo();
      const m = manifest("fake-status-cycle", { args: ["--cycle", "unsupported"] });
      for (let run = 0; run < 3; run++) await oneShotGate(store, m, 1, repo);
      const incomplete = manifest("fake-incomplete");
      const partial = manifest("fake-partial");
      for (let run = 0; run < 2; run++) {
        await oneShotGate(store, incomplete, 1, repo);
        await oneShotGate(store, partial, 1, repo);
      }
      const opened = await openStore(store);
      try {
        const status = await readHealthStatus({
          log: opened.log,
          providers: [m, incomplete, partial],
          hostVersion: HOST_INFO.version,
          policyDigest: null,
          now: fakeClock.now(),
        });
        expect(validate("host-status", status).ok).toBe(true);
        expect(status.providers.map((p) => [p.id, p.state, p.health.quarantined, p.outcomes])).toEqual([
          [m.id, "exited", false, { complete: 0, partial: 0, incomplete: 0, unsupported: 3, error: 0, failed: 0 }],
          [
            incomplete.id,
            "exited",
            false,
            { complete: 0, partial: 0, incomplete: 2, unsupported: 0, error: 0, failed: 0 },
          ],
          [
            partial.id,
            "exited",
            false,
            { complete: 0, partial: 2, incomplete: 0, unsupported: 0, error: 0, failed: 0 },
          ],
        ]);
        expect(status.providers.every((p) => p.coverage.ran === 0 && p.latency.samples === 0)).toBe(true);
      } finally {
        await opened.close();
      }
    });

    it("H8.5 latency of successful runs accumulates across one-shot hosts, in the same batch as the decision", async () => {
      const store = storeDir();
      const repo = tempRepo();
      const m = manifest("fake-honest-ts", { source: "ts" });
      await oneShotGate(store, m, 3, repo);
      const second = await oneShotGate(store, m, 3, repo);
      expect(second.status).toMatchObject({ latency: { samples: 2 }, coverage: { ran: 2, degraded: 0 } });
      const opened = await openStore(store);
      try {
        const [receipt] = await opened.log.list({ kind: FACT_KINDS.receipt, reverse: true, limit: 1 });
        const health = await opened.log.latest(healthStateKey(m));
        // Durable with the decision: the health fact directly follows the receipt of its evaluation.
        expect(health?.seq).toBe((receipt?.seq ?? 0) + 1);
        expect(health?.kind).toBe(HEALTH_FACT_KIND);
      } finally {
        await opened.close();
      }
    });

    it("H8.2 host §8: when stored health cannot be read, the provider is not launched and nothing is overwritten", async () => {
      const store = storeDir();
      const repo = tempRepo();
      const { m, log } = logged("fake-honest-ts", { source: "ts" });
      const opened = await openStore(store);
      const broken: FactLog = Object.assign(Object.create(opened.log) as FactLog, {
        latest: async (key: string) => {
          if (key === healthStateKey(m)) throw new EvidenceError("ASP_EVIDENCE_CHAIN_BROKEN", "simulated");
          return opened.log.latest(key);
        },
      });
      const host = await composeHost({
        store: opened,
        policy: policyFor([m]),
        providers: [m],
        clock: fakeClock,
        failOpenSink: { log: () => {} },
        register: (c) => c.register(TOKENS.FactLog, { useValue: broken }),
      });
      try {
        const { envelope } = await host.gate({ repo });
        expect(envelope.decision).toBe("indeterminate");
        expect(envelope.coverage.degraded[0]).toMatchObject({ provider: m.id, reason: "unavailable" });
        expect(launches(log)).toBe(0);
        expect(await opened.log.list({ kind: HEALTH_FACT_KIND })).toEqual([]);
      } finally {
        await host.close();
        await opened.close();
      }
    });
  });
});
