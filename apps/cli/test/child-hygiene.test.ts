import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startPostgres, type ThrowawayPostgres } from "@asp/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, fixtureManifest, hostConfig, runBinary } from "./helpers.js";

// Issue 32 holes 1, 7 and 8 (THREAT-MODEL invariant 12): no process the host starts holds a
// descriptor it was not given on purpose, none outlives the command, and a provider that tears
// a frame cannot keep the command alive after its decision. Whole `asp` processes, real
// subprocess providers (packages/ths/test/fixtures/fake-*.mjs).

const tmp = mkdtempSync(join(tmpdir(), "asp-cli-children-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => mkdtempSync(join(tmp, `case-${n++}-`));

function repo(): string {
  const dir = fresh();
  writeFileSync(join(dir, "a.txt"), "nothing to see\n");
  return dir;
}

/** Every descriptor >= 3 the fake-fd-list provider found, as it wrote them. */
function heldBy(file: string): Record<string, string> {
  return JSON.parse(readFileSync(file, "utf8")) as Record<string, string>;
}

/** The descriptors that name a path (not a pipe, socket or anon inode of the child's own runtime). */
function paths(held: Record<string, string>): string[] {
  return Object.values(held).filter((v) => v.startsWith("/"));
}

/** Run `asp` and note when the decision line appeared on stdout and when the process exited. */
function timedGate(argv: string[]): Promise<{ code: number | null; stdout: string; decidedToExitMs: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...argv], { env: { PATH: process.env.PATH } });
    let stdout = "";
    let decidedAt: number | null = null;
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (decidedAt === null && /^(ALLOW|DENY|INDETERMINATE) /m.test(stdout)) decidedAt = performance.now();
    });
    child.stderr.resume();
    const guard = setTimeout(() => child.kill("SIGKILL"), 60_000); // a hung command fails the test, never the suite
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(guard);
      resolve({ code, stdout, decidedToExitMs: decidedAt === null ? Number.NaN : performance.now() - decidedAt });
    });
  });
}

/** True once `pid` has exited (gone, or a zombie nobody reaped yet). */
function dead(pid: number): boolean {
  try {
    return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return true;
  }
}

describe("what a provider inherits (hole 1)", () => {
  it("H3.2 inv. 12: with a level store open, a launched provider holds /dev/null at every inherited number, never a store file", () => {
    const out = join(fresh(), "fds.json");
    const { dir, config, store } = hostConfig([fixtureManifest("fake-fd-list", "fds", ["--out", out])]);
    const r = runBinary(["gate", "--config", config, "--repo", repo()], dir);
    expect(r.code, r.stderr).toBe(0);
    const held = heldBy(out);
    // The placeholders are there (before the fix these numbers were LevelDB's LOG, LOCK, *.log, MANIFEST-*).
    expect(Object.values(held)).toContain("/dev/null");
    expect(paths(held).filter((p) => p !== "/dev/null")).toEqual([]);
    expect(Object.values(held).some((v) => v.includes(store))).toBe(false);
  });

  describe("with a PostgreSQL store", () => {
    let pg: ThrowawayPostgres;
    beforeAll(async () => {
      pg = await startPostgres({ prefix: "asp-cli-fds-pg-" });
    }, 60_000);
    afterAll(async () => {
      await pg?.stop();
    });

    it("inv. 12: the provider holds no socket or file of the host's (the database connection stays with the host)", () => {
      const out = join(fresh(), "fds.json");
      const { dir, config } = hostConfig([fixtureManifest("fake-fd-list", "fds", ["--out", out])]);
      writeFileSync(config, JSON.stringify({ ...JSON.parse(readFileSync(config, "utf8")), store: pg.url }));
      const migrated = runBinary(["store", "migrate", "--config", config], dir);
      expect(migrated.code, migrated.stderr).toBe(0);
      const r = runBinary(["gate", "--config", config, "--repo", repo()], dir);
      expect(r.code, r.stderr).toBe(0);
      const held = heldBy(out);
      expect(paths(held).filter((p) => p !== "/dev/null")).toEqual([]);
      expect(Object.values(held).filter((v) => v.startsWith("socket:"))).toEqual([]);
    }, 120_000);
  });
});

describe("a provider that tears a frame (hole 7)", () => {
  for (const then of ["hang", "exit"] as const) {
    it(`inv. 5: a header and half a body, then ${then === "hang" ? "hanging" : "exiting"}: indeterminate, and asp gate exits within 5 s of its decision`, async () => {
      const { config } = hostConfig([fixtureManifest("fake-torn-frame", "torn", ["--then", then])], 1500);
      const r = await timedGate(["gate", "--config", config, "--repo", repo()]);
      expect(r.stdout).toMatch(/^INDETERMINATE \(gate\)/m);
      expect(r.code).toBe(2);
      // Before the fix the command never exited (vscode-jsonrpc's partial-message timer re-armed forever).
      expect(r.decidedToExitMs).toBeLessThan(5000);
    }, 90_000);
  }
});

describe("what a provider leaves running (hole 8)", () => {
  it("inv. 12: a child the provider started is killed with it when the host closes", async () => {
    const at = fresh();
    const pidFile = join(at, "pid");
    const beat = join(at, "beat");
    const { dir, config } = hostConfig([
      fixtureManifest("fake-linger", "linger", ["--pidfile", pidFile, "--beat", beat]),
    ]);
    const r = runBinary(["gate", "--config", config, "--repo", repo()], dir);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(pidFile)).toBe(true);
    const pid = Number(readFileSync(pidFile, "utf8"));
    // Before the fix it kept beating (and could rewrite the worktree) long after `asp gate` exited.
    // A SIGKILL takes effect at once; poll only for the kernel to finish the kill.
    for (let i = 0; i < 200 && !dead(pid); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(dead(pid)).toBe(true);
  }, 60_000);
});
