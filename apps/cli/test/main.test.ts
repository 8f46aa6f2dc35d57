import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { REPO_ROOT, runBinary, runInProcess } from "./helpers.js";

describe("asp", () => {
  describe("when asked for help or version", () => {
    it("prints usage with every command and exits 0", async () => {
      const r = await runInProcess(["--help"]);
      expect(r.code).toBe(EXIT.ok);
      expect(r.stdout).toContain("Usage: asp");
      expect(r.stdout).toContain("status");
    });
    it("documents every exit code and where the trusted host configuration comes from", async () => {
      const r = await runInProcess(["--help"]);
      for (const code of Object.values(EXIT)) expect(r.stdout).toMatch(new RegExp(`^  ${code} `, "m"));
      expect(r.stdout).toContain("ASP_HOST_CONFIG");
      expect(r.stdout).toContain("never the current directory");
    });
    it("gate --help describes the trusted base as the default --base", async () => {
      const r = await runInProcess(["gate", "--help"]);
      expect(r.stdout).toContain("the trusted base");
      expect(r.stdout).not.toContain("asp.host.json");
    });
    it("prints the package version", async () => {
      const r = await runInProcess(["--version"]);
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
    });
  });

  describe("when the usage is bad", () => {
    it("exits 64 on an unknown command", async () => {
      const r = await runInProcess(["frobnicate"]);
      expect(r.code).toBe(EXIT.usage);
      expect(r.stderr).toContain("unknown command");
    });
    it("exits 64 on an unknown option, with a JSON error under --json", async () => {
      const r = await runInProcess(["status", "--nope", "--json"]);
      expect(r.code).toBe(64);
      expect(JSON.parse(r.stdout).error.code).toBe("ASP_CLI_USAGE");
    });
  });

  describe("status", () => {
    it("validates the example policy and reports it (--json)", async () => {
      const r = await runInProcess(["status", "--policy", "examples/asp.policy.json", "--json"], { cwd: REPO_ROOT });
      expect(r.code).toBe(EXIT.ok);
      const report = JSON.parse(r.stdout);
      expect(report.policy).toMatchObject({ valid: true, apiVersion: "asp.policy/v1" });
      expect(report.contracts.schemas).toBeGreaterThanOrEqual(29);
    });
    it("exits 64 and names the pointer when the policy is invalid", async () => {
      const dir = mkdtempSync(join(tmpdir(), "asp-cli-"));
      writeFileSync(
        join(dir, "asp.policy.json"),
        JSON.stringify({
          apiVersion: "asp.policy/v1",
          requirements: [],
          providers: [],
          grants: [],
          failPolicy: { stale: { gate: "open" } },
        }),
      );
      const r = await runInProcess(["status"], { cwd: dir });
      expect(r.code).toBe(EXIT.usage);
      expect(r.stdout).toContain("/failPolicy/stale/gate");
    });
    it("exits 64 when the policy is not JSON", async () => {
      const dir = mkdtempSync(join(tmpdir(), "asp-cli-"));
      writeFileSync(join(dir, "asp.policy.json"), "{ not json");
      const r = await runInProcess(["status", "--json"], { cwd: dir });
      expect(r.code).toBe(EXIT.usage);
      expect(JSON.parse(r.stdout).policy).toMatchObject({ valid: false }); // the code: status.test.ts
    });
  });

  describe("the built binary", () => {
    it("runs as a real process with the same exit-code convention", () => {
      const ok = runBinary(["status", "--policy", "examples/asp.policy.json"]);
      expect(ok.code).toBe(0);
      expect(ok.stdout).toMatch(/^asp \d+\.\d+\.\d+/);
      expect(ok.stdout).toContain("valid (asp.policy/v1)");
      expect(runBinary(["--nope"]).code).toBe(64);
    });
  });
});
