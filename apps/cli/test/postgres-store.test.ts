import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { startPostgres, type ThrowawayPostgres } from "@asp/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exampleCopy } from "./example-copy.js";
import { BIN, REPO_ROOT, runBinary } from "./helpers.js";

let pg: ThrowawayPostgres;
beforeAll(async () => {
  pg = await startPostgres({ prefix: "asp-cli-pg-" });
}, 60_000);
afterAll(async () => {
  await pg?.stop();
});

const SECRET = "hunter2-Pg";
/** The cluster's URL with a password in it (trust authentication ignores it): it must never be echoed. */
const storeUrl = (): string => {
  const u = new URL(pg.url);
  u.password = SECRET;
  return u.toString();
};

/** An example repository copy whose trusted configuration names the PostgreSQL store. */
function pgExample(): { repo: string; config: string } {
  const { repo, config } = exampleCopy();
  const json = JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>;
  writeFileSync(config, JSON.stringify({ ...json, store: storeUrl() }));
  return { repo, config };
}

function asp(argv: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...argv], { cwd: REPO_ROOT, env: { PATH: process.env.PATH } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("a host configuration whose store is postgres://", () => {
  it("refuses to gate before `asp store migrate`, then two concurrent `asp gate` processes write one chain that `asp receipts verify` accepts, never echoing the password", {
    timeout: 180_000,
  }, async () => {
    const a = pgExample();
    const b = pgExample();
    const early = runBinary(["gate", "--json", "--config", a.config, "--repo", a.repo, "--base", "HEAD"]);
    expect(early.code).toBe(64);
    expect(early.stdout + early.stderr).toContain("ASP_PGSTORE_NOT_MIGRATED");
    expect(early.stdout + early.stderr).not.toContain(SECRET);

    const migrated = runBinary(["store", "migrate", "--json", "--config", a.config]);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(JSON.parse(migrated.stdout)).toMatchObject({ from: 0, applied: [1] });
    expect(migrated.stdout + migrated.stderr).not.toContain(SECRET);

    const gates = await Promise.all(
      [a, b].map((x) => asp(["gate", "--json", "--config", x.config, "--repo", x.repo, "--base", "HEAD"])),
    );
    const receipts = new Set<string>();
    for (const g of gates) {
      // A decision either way writes its receipt (a provider starved of CPU on a loaded machine
      // can make one indeterminate: exit 2); what this proves is one chain, not the decision.
      expect([0, 2], g.stderr).toContain(g.code);
      expect(g.stdout + g.stderr).not.toContain(SECRET);
      receipts.add((JSON.parse(g.stdout) as { receipt: { id: string } }).receipt.id);
    }
    expect(receipts.size).toBe(2);

    const verified = runBinary(["receipts", "verify", "--json", "--config", b.config]);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true });
    const listed = runBinary(["receipts", "list", "--json", "--config", b.config]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).not.toContain(SECRET);
    for (const id of receipts) expect(listed.stdout).toContain(id);
  });
});
