import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { REPO_ROOT, runInProcess } from "./helpers.js";

const EXAMPLE = join(REPO_ROOT, "plugins/provider-example/plugin");
const FAKE = join(REPO_ROOT, "tools/conformance/test/fixtures/fake-host-owned.mjs");

describe("asp conformance", () => {
  it("passes the example provider with --json and prints the conformance digest", async () => {
    const r = await runInProcess(["--json", "conformance", "--", process.execPath, join(EXAMPLE, "main.mjs")]);
    expect(r.code, r.stdout).toBe(EXIT.ok);
    const report = JSON.parse(r.stdout);
    expect(report.passed).toBe(true);
    expect(report.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("binds the plugin's tree digest with --plugin and prints a per-check report", async () => {
    const r = await runInProcess(["conformance", "--plugin", EXAMPLE]);
    expect(r.code, r.stdout).toBe(EXIT.ok);
    expect(r.stdout).toContain("PASS  cancellation");
    expect(r.stdout).toContain("conformance digest sha256:");
  });

  it("exits 1 and names the failed check for a faulty provider", async () => {
    const r = await runInProcess(["--json", "conformance", "--", process.execPath, FAKE]);
    expect(r.code).toBe(EXIT.deny);
    const report = JSON.parse(r.stdout);
    expect(report.checks.find((c: { id: string }) => c.id === "host-owned-fields").status).toBe("fail");
  });

  it("exits 64 without a command", async () => {
    const r = await runInProcess(["conformance"]);
    expect(r.code).toBe(EXIT.usage);
    expect(r.stderr).toMatch(/^asp: ASP_CLI_USAGE: /);
  });
});
