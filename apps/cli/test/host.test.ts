import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { validate } from "@asp/contracts";
import { openStore } from "@asp/evidence";
import { FACT_KINDS } from "@asp/ths";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { hostConfig, fixtureManifest as manifest, REPO_ROOT, runBinary, runInProcess } from "./helpers.js";

function repoWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "asp-cli-repo-"));
  for (const [p, t] of Object.entries(files)) writeFileSync(join(dir, p), t);
  return dir;
}

describe("asp gate with installed dependencies (host §9)", () => {
  /** A project whose dependencies are installed (node_modules ignored, as usual). */
  function project(): string {
    const dir = mkdtempSync(join(tmpdir(), "asp-cli-deps-"));
    const files: Record<string, string> = {
      "package.json": '{"name":"app"}',
      ".gitignore": "node_modules/\n",
      "src/a.ts": "export const a = 1;\n",
      "node_modules/x/package.json": '{"name":"x"}',
      "node_modules/x/index.d.ts": "export declare const x: number;\n",
    };
    for (const [p, t] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, p)), { recursive: true });
      writeFileSync(join(dir, p), t);
    }
    return dir;
  }

  it("H5.1 prints one environment line, --json carries it, and the provider read node_modules through the host", async () => {
    const { dir, config } = hostConfig([manifest("fake-env-reader", "ts")]);
    const repo = project();
    const human = await runInProcess(["gate", "--config", config, "--repo", repo], { cwd: dir });
    expect(human.code).toBe(EXIT.allow);
    const line = human.stdout.split("\n").filter((l) => l.startsWith("environment: "));
    expect(line).toHaveLength(1);
    expect(line[0]).toMatch(/^environment: sha256:[0-9a-f]{12} \(1 roots, 2 files\)$/);
    const json = await runInProcess(["gate", "--json", "--config", config, "--repo", repo], { cwd: dir });
    const envelope = JSON.parse(json.stdout);
    expect(validate("verdict", envelope).ok).toBe(true);
    expect(envelope.environment).toMatchObject({ roots: ["node_modules"], files: 2 });
    expect(line[0]).toContain(envelope.environment.tree.slice(0, 19));
  });

  it("environment: false in the host configuration sends none (no line, no field)", async () => {
    const { dir, config } = hostConfig([manifest("fake-env-reader", "ts")]);
    writeFileSync(config, JSON.stringify({ ...JSON.parse(readFileSync(config, "utf8")), environment: false }));
    const repo = project();
    const r = await runInProcess(["gate", "--json", "--config", config, "--repo", repo], { cwd: dir });
    const envelope = JSON.parse(r.stdout);
    expect(envelope.environment).toBeUndefined();
    expect(r.code).not.toBe(EXIT.allow); // the reader needs an environment
  });
});

describe("asp gate / check / sweep", () => {
  describe("the example repository (no providers installed yet)", () => {
    it("H1.9 H1b.1 is an honest indeterminate naming the missing requirements (exit 2), and the envelope validates", async () => {
      const dir = mkdtempSync(join(tmpdir(), "asp-cli-example-"));
      const config = join(dir, "asp.host.json");
      writeFileSync(config, JSON.stringify({ store: "store", policy: join(REPO_ROOT, "examples/asp.policy.json") }));
      const r = await runInProcess(["gate", "--json", "--config", config, "--repo", "examples/demo-repo"], {
        cwd: REPO_ROOT,
      });
      expect(r.code).toBe(EXIT.indeterminate);
      const envelope = JSON.parse(r.stdout);
      expect(validate("verdict", envelope).ok).toBe(true);
      expect(envelope.decision).toBe("indeterminate");
      expect(
        envelope.coverage.degraded
          .map((d: { requirement: string; reason: string }) => [d.requirement, d.reason])
          .sort(),
      ).toEqual([
        ["secrets", "missing"],
        ["types", "missing"],
      ]);
    });

    it("the committed examples/asp.host.json parses and names the example policy", async () => {
      const raw = JSON.parse(readFileSync(join(REPO_ROOT, "examples/asp.host.json"), "utf8"));
      expect(raw).toMatchObject({ store: ".asp/store", policy: "asp.policy.json", providers: [] });
    });
  });

  describe("a fixture repository with real fake providers", () => {
    const honest = manifest("fake-honest-ts", "ts");
    const crashing = manifest("fake-crash-mid", "lint");

    it("H1b.2 denies (exit 1) on a gating finding, prints the nextStep, and the receipts verify", async () => {
      const { dir, config } = hostConfig([honest]);
      const repo = repoWith({ "a.ts": "let x = 1; // ASP-TS-ERROR\n" });
      const human = await runInProcess(["gate", "--config", config, "--repo", repo], { cwd: dir });
      expect(human.code).toBe(EXIT.deny);
      expect(human.stdout).toMatch(/^DENY \(gate\)/);
      expect(human.stdout).toContain("next: remove ASP-TS-ERROR");
      expect(human.stderr).toContain("asp gate: running fake-honest-ts");
      writeFileSync(join(repo, "a.ts"), "let x = 1;\n");
      const clean = await runInProcess(["check", "--json", "--config", config, "--repo", repo], { cwd: dir });
      expect(clean.code).toBe(EXIT.allow);
      expect(JSON.parse(clean.stdout).callSite).toBe("interactive");

      const list = await runInProcess(["receipts", "list", "--json", "--config", config], { cwd: dir });
      const rows = JSON.parse(list.stdout);
      expect(rows.map((r: { receipt: { decision: string } }) => r.receipt.decision)).toEqual(["allow", "deny"]);
      const show = await runInProcess(["receipts", "show", rows[1].receipt.receiptId, "--json", "--config", config], {
        cwd: dir,
      });
      expect(JSON.parse(show.stdout).envelope.decision).toBe("deny");
      const verify = await runInProcess(["receipts", "verify", "--json", "--config", config], { cwd: dir });
      expect(verify.code).toBe(EXIT.ok);
      expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true, receipts: 2 });
      const missing = await runInProcess(["receipts", "show", "nope", "--config", config], { cwd: dir });
      expect(missing.code).toBe(EXIT.usage);
    });

    it("H1b.11 a receipt that does not match its envelope fails `receipts verify` with exit 3, never the deny code", async () => {
      const { dir, config } = hostConfig([honest]);
      const gate = await runInProcess(["gate", "--json", "--config", config, "--repo", repoWith({ "a.ts": "ok\n" })], {
        cwd: dir,
      });
      const envelope = JSON.parse(gate.stdout);
      const store = await openStore(join(dir, "store"));
      try {
        const [, entry] = await store.log.list({ index: { name: "decisionId", value: envelope.decisionId } });
        await store.log.append([
          {
            kind: FACT_KINDS.receipt,
            record: {
              ...(entry?.record as object),
              receiptId: "rcpt-\u001b[2Kforged",
              envelopeDigest: `sha256:${"0".repeat(64)}`,
            },
          },
        ]);
      } finally {
        await store.close();
      }
      const human = await runInProcess(["receipts", "verify", "--config", config], { cwd: dir });
      expect(human.code).toBe(EXIT.verificationFailed);
      expect(EXIT.verificationFailed).not.toBe(EXIT.deny);
      expect(human.stdout).toMatch(/^FAILED:/);
      expect(human.stdout).toContain("rcpt-\\x1b[2Kforged");
      const json = await runInProcess(["receipts", "verify", "--json", "--config", config], { cwd: dir });
      expect(json.code).toBe(3);
      expect(JSON.parse(json.stdout)).toMatchObject({ ok: false });
    });

    it("a failing required provider makes the gate indeterminate (exit 2) with the provider named", async () => {
      const { dir, config } = hostConfig([honest, crashing]);
      const r = await runInProcess(["gate", "--json", "--config", config, "--repo", repoWith({ "a.ts": "ok\n" })], {
        cwd: dir,
      });
      expect(r.code).toBe(EXIT.indeterminate);
      const envelope = JSON.parse(r.stdout);
      expect(validate("verdict", envelope).ok).toBe(true);
      expect(envelope.coverage.degraded).toEqual([
        expect.objectContaining({ provider: "fake-crash-mid", reason: "crashed" }),
      ]);
      const status = await runInProcess(["status", "--json", "--config", config], { cwd: dir });
      const report = JSON.parse(status.stdout);
      expect(report.host.composed).toBe(true);
      expect(validate("host-status", report.host.status).ok).toBe(true);
      expect(report.host.status.providers.map((p: { id: string }) => p.id)).toEqual([
        "fake-honest-ts",
        "fake-crash-mid",
      ]);
    });

    it("--base REV diffs against a git revision: only the changed file is offered", async () => {
      const { dir, config } = hostConfig([honest]);
      const repo = repoWith({ "old.ts": "// ASP-TS-ERROR in history, unchanged\n", "b.ts": "fine\n" });
      const git = (...args: string[]) =>
        execFileSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", ...args], { cwd: repo, stdio: "pipe" });
      git("init", "-q");
      git("add", ".");
      git("commit", "-qm", "base");
      writeFileSync(join(repo, "b.ts"), "still fine\n");
      const r = await runInProcess(["gate", "--json", "--base", "HEAD", "--config", config, "--repo", repo], {
        cwd: dir,
      });
      expect(r.code).toBe(EXIT.allow);
      expect(JSON.parse(r.stdout).changeset).toMatch(/^sha256:/);
      const full = await runInProcess(["sweep", "--json", "--config", config, "--repo", repo], { cwd: dir });
      expect(full.code).toBe(EXIT.deny);
    });
  });

  describe("bad input", () => {
    it("exits 64 for a missing or invalid host configuration", async () => {
      const dir = mkdtempSync(join(tmpdir(), "asp-cli-bad-"));
      const none = await runInProcess(["gate", "--json"], { cwd: dir });
      expect(none.code).toBe(EXIT.usage);
      expect(JSON.parse(none.stdout).error.code).toBe("ASP_CLI_NO_HOST_CONFIG");
      writeFileSync(
        join(dir, "asp.host.json"),
        JSON.stringify({ store: "s", policy: "p.json", providers: [{ id: "x" }] }),
      );
      const r = await runInProcess(["gate", "--json", "--config", "asp.host.json", "--repo", repoWith({})], {
        cwd: dir,
      });
      expect(r.code).toBe(EXIT.usage);
      expect(JSON.parse(r.stdout).error.code).toBe("ASP_THS_BAD_MANIFEST");
    });
  });

  describe("the built binary", () => {
    it("gates the example repository as a real process", () => {
      const dir = mkdtempSync(join(tmpdir(), "asp-cli-bin-"));
      const config = join(dir, "asp.host.json");
      writeFileSync(config, JSON.stringify({ store: "store", policy: join(REPO_ROOT, "examples/asp.policy.json") }));
      const r = runBinary(["gate", "--json", "--config", config, "--repo", "examples/demo-repo"]);
      expect(r.code).toBe(2);
      expect(validate("verdict", JSON.parse(r.stdout)).ok).toBe(true);
    });
  });
});
