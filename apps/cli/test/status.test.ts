import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Policy, type ProviderManifest, validate } from "@asp/contracts";
import { loadPolicy } from "@asp/ths";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { fixtureManifest, runBinary, runInProcess } from "./helpers.js";

/** The policy pinning and granting `m` (requirement `req`) at the gate. */
function policyOf(m: ProviderManifest, quarantineAfterFailures = 3): Policy {
  const pin = { id: m.id, version: m.version, digest: m.digest };
  return {
    apiVersion: "asp.policy/v1",
    requirements: [{ id: "req", capability: "check", sources: ["fake"], callSites: ["gate"] }],
    providers: [pin],
    grants: [{ provider: m.id, version: m.version, digest: m.digest, requirement: "req", callSites: ["gate"] }],
    budgets: { timeoutMs: { interactive: 3000, gate: 3000, sweep: 3000 }, quarantineAfterFailures },
  };
}

/** A temp installation: host config (own store, not created yet) and policy, a repo, and the provider's launch log. */
function installation(file: string, policy: (m: ProviderManifest) => unknown = (m) => policyOf(m)) {
  const dir = mkdtempSync(join(tmpdir(), "asp-cli-status-"));
  const launchLog = join(dir, "launches.log");
  const m = fixtureManifest(file, "fake", ["--launch-log", launchLog]);
  writeFileSync(join(dir, "policy.json"), JSON.stringify(policy(m)));
  const config = join(dir, "host.json");
  writeFileSync(config, JSON.stringify({ store: "store", policy: "policy.json", providers: [m] }));
  const repo = mkdtempSync(join(tmpdir(), "asp-cli-status-repo-"));
  writeFileSync(join(repo, "a.ts"), "ok\n");
  const launches = () =>
    existsSync(launchLog) ? readFileSync(launchLog, "utf8").split("\n").filter(Boolean).length : 0;
  return { dir, config, repo, m, launchLog, launches };
}

describe("asp status", () => {
  describe("H8.5 provider health (host §8)", () => {
    it("H8.5 reports per-provider health from the store without launching any provider", async () => {
      const { dir, config, repo, launchLog, launches } = installation("fake-honest-ts");
      const before = await runInProcess(["status", "--json", "--config", config], { cwd: dir });
      expect(before.code).toBe(EXIT.ok);
      expect(existsSync(launchLog)).toBe(false);
      expect(existsSync(join(dir, "store"))).toBe(false); // reading health creates no store
      const empty = JSON.parse(before.stdout);
      expect(validate("host-status", empty.host.status).ok).toBe(true);
      expect(empty.host.status.providers[0]).toMatchObject({ state: "exited", coverage: { ran: 0, degraded: 0 } });

      const gate = await runInProcess(["gate", "--json", "--config", config, "--repo", repo], { cwd: dir });
      expect(gate.code).toBe(EXIT.allow);
      expect(launches()).toBe(1);
      const after = await runInProcess(["status", "--json", "--config", config], { cwd: dir });
      const status = JSON.parse(after.stdout).host.status;
      expect(validate("host-status", status).ok).toBe(true);
      expect(status.providers[0]).toMatchObject({
        id: "fake-honest-ts",
        state: "exited",
        health: { consecutiveFailures: 0, quarantined: false },
        latency: { samples: 1 },
        coverage: { ran: 1, degraded: 0 },
        outcomes: { complete: 1, error: 0 },
      });
      expect(launches()).toBe(1);
    });

    it("H8.2 host §8: `asp gate` run three times against an erroring provider quarantines it, status shows it, and `asp quarantine reset` lifts it", async () => {
      const { dir, config, repo, launches } = installation("fake-error");
      for (let run = 1; run <= 3; run++) {
        // Each run is its own process: only the store carries health from one to the next.
        const r = runBinary(["gate", "--json", "--config", config, "--repo", repo], dir);
        expect(r.code).toBe(EXIT.indeterminate);
        expect(JSON.parse(r.stdout).coverage.degraded[0]).toMatchObject({ provider: "fake-error", reason: "errored" });
      }
      expect(launches()).toBe(3);
      const human = await runInProcess(["status", "--config", config], { cwd: dir });
      expect(human.code).toBe(EXIT.ok);
      expect(human.stdout).toMatch(
        /fake-error@1\.0\.0: quarantined; check quarantined; 3 consecutive failures, QUARANTINED/,
      );
      const status = JSON.parse((await runInProcess(["status", "--json", "--config", config], { cwd: dir })).stdout)
        .host.status;
      expect(status.providers[0]).toMatchObject({
        state: "quarantined",
        health: { consecutiveFailures: 3, quarantined: true },
        outcomes: { error: 3, complete: 0 },
        coverage: { ran: 0, degraded: 3 },
        latency: { samples: 0 },
      });
      expect(status.capabilities.check).toEqual([]);

      const fourth = await runInProcess(["gate", "--json", "--config", config, "--repo", repo], { cwd: dir });
      expect(fourth.code).toBe(EXIT.indeterminate);
      expect(JSON.parse(fourth.stdout).coverage.degraded[0]).toMatchObject({
        provider: "fake-error",
        reason: "quarantined",
        providerState: "quarantined",
      });
      expect(launches()).toBe(3);

      // The operator lifts it once the cause is gone: recorded, and the next gate launches it again.
      const reset = runBinary(["quarantine", "reset", "fake-error", "--config", config], dir);
      expect(reset.code, reset.stderr).toBe(EXIT.ok);
      expect(reset.stdout).toMatch(
        /fake-error: quarantine lifted \(cleared 3 consecutive failures, recorded at seq \d+\)/,
      );
      expect(launches()).toBe(3); // resetting launches nothing
      const lifted = JSON.parse((await runInProcess(["status", "--json", "--config", config], { cwd: dir })).stdout)
        .host.status.providers[0];
      expect(lifted).toMatchObject({ health: { consecutiveFailures: 0, quarantined: false }, outcomes: { error: 3 } });
      const fifth = await runInProcess(["gate", "--json", "--config", config, "--repo", repo], { cwd: dir });
      expect(JSON.parse(fifth.stdout).coverage.degraded[0]).toMatchObject({
        provider: "fake-error",
        reason: "errored",
      });
      expect(launches()).toBe(4);
      const again = await runInProcess(["quarantine", "reset", "fake-error", "--json", "--config", config], {
        cwd: dir,
      });
      expect(JSON.parse(again.stdout)).toMatchObject({ provider: "fake-error", lifted: false, seq: null });
      const unknown = await runInProcess(["quarantine", "reset", "nope", "--config", config], { cwd: dir });
      expect(unknown.code).toBe(EXIT.usage);
      expect(unknown.stderr).toContain("ASP_THS_UNKNOWN_PROVIDER");
      expect(unknown.stderr).toContain("it runs fake-error");
    }, 120_000); // real `asp` processes on a shared, loaded machine
  });

  describe("policy validation (issue 11 item 12)", () => {
    // Schema-valid, but the grant names a digest the providers[] pin does not: the host refuses it.
    const unpinned = (m: ProviderManifest): unknown => {
      const p = policyOf(m);
      return { ...p, grants: p.grants.map((g) => ({ ...g, digest: `sha256:${"0".repeat(64)}` })) };
    };

    it("refuses a policy the schema accepts but the host does not load, with the host's code", async () => {
      const { dir, m } = installation("fake-honest-ts", unpinned);
      expect(validate("policy", unpinned(m)).ok).toBe(true);
      const r = await runInProcess(["status", "--json", "--policy", join(dir, "policy.json")], { cwd: dir });
      expect(r.code).toBe(EXIT.usage);
      const report = JSON.parse(r.stdout);
      expect(report.policy).toMatchObject({ valid: false });
      expect(report.policy.errors[0]).toMatchObject({ code: "ASP_POLICY_UNPINNED_GRANT", pointer: "/grants/0/digest" });
    });

    // The same verdict as the host's own loader, whatever it checks: status never calls valid what the host refuses.
    const policyTexts: ReadonlyArray<readonly [string, (m: ProviderManifest) => string]> = [
      ["valid", (m) => JSON.stringify(policyOf(m))],
      ["not JSON", () => "{ not json"],
      ["a grant to an unpinned digest", (m) => JSON.stringify(unpinned(m))],
      ["an open gate cell", (m) => JSON.stringify({ ...policyOf(m), failPolicy: { stale: { gate: "open" } } })],
      ["a key given twice", (m) => JSON.stringify(policyOf(m)).replace("{", '{"apiVersion":"asp.policy/v1",')],
    ];
    it.each(policyTexts)("reports the host's own verdict on a policy with %s", async (_why, text) => {
      const { dir, m } = installation("fake-honest-ts");
      const path = join(dir, "policy.json");
      writeFileSync(path, text(m));
      let expected = "valid";
      try {
        loadPolicy(path);
      } catch (error) {
        expected = (error as { code: string }).code;
      }
      const r = await runInProcess(["status", "--json", "--policy", path], { cwd: dir });
      const policy = JSON.parse(r.stdout).policy;
      expect(policy.valid ? "valid" : policy.errors[0].code).toBe(expected);
      expect(r.code).toBe(expected === "valid" ? EXIT.ok : EXIT.usage);
    });

    it("with a host configuration naming that policy: exit 64, no health shown, nothing launched", async () => {
      const { dir, config, launchLog } = installation("fake-honest-ts", unpinned);
      const r = await runInProcess(["status", "--config", config], { cwd: dir });
      expect(r.code).toBe(EXIT.usage);
      expect(r.stdout).toContain("INVALID");
      expect(r.stdout).toContain("ASP_POLICY_UNPINNED_GRANT /grants/0/digest");
      expect(existsSync(launchLog)).toBe(false);
    });
  });
});
