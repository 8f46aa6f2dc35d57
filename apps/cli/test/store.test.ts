import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { BIN, fixtureManifest, runInProcess, hostConfig as sharedHostConfig } from "./helpers.js";

// Issue 19: durable evidence. Loss is detected, never silent; one store under concurrent use.

const honest = fixtureManifest("fake-honest-ts", "ts");

/** A host config over the honest fixture provider, with budgets that allow for a busy machine. */
const hostConfig = (): ReturnType<typeof sharedHostConfig> => sharedHostConfig([honest], 20_000);

function repo(): string {
  const dir = mkdtempSync(join(tmpdir(), "asp-cli-store-repo-"));
  writeFileSync(join(dir, "a.ts"), "export const a = 1;\n");
  return dir;
}

/** The store's write-ahead log (the largest `NNNNNN.log`). */
function wal(store: string): string {
  const logs = readdirSync(store)
    .filter((f) => /^\d{6}\.log$/.test(f))
    .map((f) => join(store, f))
    .sort((a, b) => statSync(b).size - statSync(a).size);
  if (logs[0] === undefined) throw new Error(`no write-ahead log in ${store}`);
  return logs[0];
}

/** Run the built `asp` as a real process, asynchronously (so many can run at once). */
function asp(argv: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...argv], {
      cwd,
      env: { PATH: process.env.PATH },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString("utf8");
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** A process holding the store (as a long gate would) until released. */
async function holdStore(store: string): Promise<{ pid: number; release: () => Promise<void> }> {
  const script = `const { openStore } = await import("@asp/evidence");
const s = await openStore(process.argv[1]);
process.stdout.write("held\\n");
process.stdin.on("end", async () => { await s.close(); process.exit(0); });
process.stdin.resume();`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script, store], {
    cwd: join(BIN, "..", ".."),
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<void>((r) => child.on("exit", () => r()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      if (d.toString().includes("held")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`holder exited with ${code}`)));
  });
  return {
    pid: child.pid as number,
    release: () => {
      child.stdin.end();
      return exited;
    },
  };
}

describe("asp and the evidence store", () => {
  describe("when the write-ahead log of a store holding one decision has a few bytes flipped (issue 19)", () => {
    it("receipts verify and gate refuse with STORE_CORRUPT (exit 74) instead of ok; check names it; salvage keeps the decision", {
      timeout: 120_000,
    }, async () => {
      const { dir, config, store } = hostConfig();
      const target = repo();
      const gate = await runInProcess(["gate", "--json", "--config", config, "--repo", target], { cwd: dir });
      expect(gate.code).toBe(EXIT.allow);
      const head = JSON.parse(
        (await runInProcess(["receipts", "head", "--json", "--config", config], { cwd: dir })).stdout,
      ).text as string;
      const bytes = readFileSync(wal(store));
      for (let i = bytes.length - 40; i < bytes.length - 36; i++) bytes[i] = (bytes[i] as number) ^ 0xff;
      writeFileSync(wal(store), bytes);

      const verify = await runInProcess(["receipts", "verify", "--json", "--config", config], { cwd: dir });
      expect(verify.code).toBe(EXIT.storeDamaged);
      expect(JSON.parse(verify.stdout)).toMatchObject({ error: { code: "ASP_EVIDENCE_STORE_CORRUPT" } });
      const human = await runInProcess(["receipts", "verify", "--config", config], { cwd: dir });
      expect(human.code).toBe(74);
      expect(human.stderr).toMatch(/^asp: ASP_EVIDENCE_STORE_CORRUPT: .*write-ahead log/);
      const again = await runInProcess(["gate", "--json", "--config", config, "--repo", target], { cwd: dir });
      expect(again.code).toBe(EXIT.storeDamaged);
      expect(JSON.parse(again.stdout)).toMatchObject({ error: { code: "ASP_EVIDENCE_STORE_CORRUPT" } });

      const check = await runInProcess(["store", "check", "--json", "--config", config], { cwd: dir });
      expect(check.code).toBe(EXIT.storeDamaged);
      expect(JSON.parse(check.stdout)).toMatchObject({
        ok: false,
        damage: expect.arrayContaining([expect.objectContaining({ kind: "wal", fatal: true })]),
      });
      const humanCheck = await runInProcess(["store", "check", "--config", config], { cwd: dir });
      expect(humanCheck.stdout).toMatch(/DAMAGED[\s\S]*✖ wal:[\s\S]*next: asp store salvage/);

      const out = join(dir, "salvaged");
      const salvage = await runInProcess(["store", "salvage", "--out", out, "--json", "--config", config], {
        cwd: dir,
      });
      expect(salvage.code).toBe(EXIT.ok);
      expect(JSON.parse(salvage.stdout)).toMatchObject({ path: out, lost: [] });
      // The salvaged store keeps the chain byte for byte: the head recorded before still verifies.
      writeFileSync(config, JSON.stringify({ store: "salvaged", policy: "policy.json", providers: [honest] }));
      const salvaged = await runInProcess(["receipts", "verify", "--json", "--expect-head", head, "--config", config], {
        cwd: dir,
      });
      expect(salvaged.code).toBe(EXIT.ok);
      expect(JSON.parse(salvaged.stdout)).toMatchObject({ ok: true, receipts: 1 });
    });
  });

  describe("when eight `asp gate` processes start together on one store", () => {
    it("every one decides, and the chain verifies with eight receipts", { timeout: 600_000 }, async () => {
      const { dir, config } = hostConfig();
      const target = repo();
      const runs = await Promise.all(
        Array.from({ length: 8 }, () =>
          asp(["gate", "--json", "--wait", "600", "--config", config, "--repo", target], dir),
        ),
      );
      for (const r of runs) {
        expect([EXIT.allow, EXIT.deny, EXIT.indeterminate], r.stderr).toContain(r.code);
        expect(JSON.parse(r.stdout)).toMatchObject({ callSite: "gate" });
      }
      expect(runs.some((r) => /waiting for the evidence store .* held by process \d+/.test(r.stderr))).toBe(true);
      const verify = await runInProcess(["receipts", "verify", "--json", "--config", config], { cwd: dir });
      expect(verify.code).toBe(EXIT.ok);
      expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true, receipts: 8 });
    });
  });

  describe("when another process holds the store", () => {
    it("gate waits with a progress line naming the holder and gives up after --wait with exit 75; readers never wait", {
      timeout: 120_000,
    }, async () => {
      const { dir, config, store } = hostConfig();
      const target = repo();
      expect((await runInProcess(["gate", "--config", config, "--repo", target], { cwd: dir })).code).toBe(EXIT.allow);
      const held = await holdStore(store);
      try {
        const gate = await runInProcess(["gate", "--json", "--wait", "1.5", "--config", config, "--repo", target], {
          cwd: dir,
        });
        expect(gate.code).toBe(EXIT.storeBusy);
        expect(JSON.parse(gate.stdout)).toMatchObject({
          error: { code: "ASP_EVIDENCE_STORE_LOCKED", data: { pid: held.pid } },
        });
        expect(gate.stderr).toContain(
          `asp gate: waiting for the evidence store at ${store}, held by process ${held.pid}`,
        );
        // Read-only commands open a snapshot: no wait, no lock.
        for (const argv of [
          ["receipts", "list"],
          ["receipts", "head"],
          ["receipts", "verify"],
          ["status"],
          ["store", "check"],
        ]) {
          const r = await runInProcess([...argv, "--json", "--config", config], { cwd: dir });
          expect(r.code, argv.join(" ")).toBe(EXIT.ok);
        }
        const bad = await runInProcess(["gate", "--wait", "soon", "--config", config, "--repo", target], { cwd: dir });
        expect(bad.code).toBe(EXIT.usage);
      } finally {
        await held.release();
      }
      expect(
        (await runInProcess(["gate", "--wait", "30", "--config", config, "--repo", target], { cwd: dir })).code,
      ).toBe(EXIT.allow);
    });
  });

  describe("heads kept elsewhere", () => {
    it("receipts head prints SEQ:DIGEST; verify --expect-head passes while the chain holds it and fails once the store is rebuilt", {
      timeout: 120_000,
    }, async () => {
      const { dir, config, store } = hostConfig();
      const target = repo();
      const none = await runInProcess(["receipts", "head", "--json", "--config", config], { cwd: dir });
      expect(JSON.parse(none.stdout)).toEqual({ head: null, text: null });
      await runInProcess(["gate", "--config", config, "--repo", target], { cwd: dir });
      const human = await runInProcess(["receipts", "head", "--config", config], { cwd: dir });
      expect(human.stdout).toMatch(/^[1-9]\d*:sha256:[0-9a-f]{64}\n$/);
      const recorded = human.stdout.trim();
      await runInProcess(["gate", "--config", config, "--repo", target], { cwd: dir });
      const ok = await runInProcess(["receipts", "verify", "--expect-head", recorded, "--config", config], {
        cwd: dir,
      });
      expect(ok.code).toBe(EXIT.ok);
      expect(ok.stdout).toContain(`passes through ${recorded}`);
      const wrong = recorded.replace(/.$/, (c) => (c === "0" ? "1" : "0"));
      expect(
        (await runInProcess(["receipts", "verify", "--expect-head", wrong, "--config", config], { cwd: dir })).code,
      ).toBe(EXIT.verificationFailed);
      const bad = await runInProcess(["receipts", "verify", "--json", "--expect-head", "latest", "--config", config], {
        cwd: dir,
      });
      expect(bad.code).toBe(EXIT.usage);
      expect(JSON.parse(bad.stdout)).toMatchObject({ error: { code: "ASP_EVIDENCE_BAD_HEAD" } });
      // Deleted and rebuilt from scratch: its own chain verifies, the recorded head is gone.
      rmSync(store, { recursive: true });
      await runInProcess(["gate", "--config", config, "--repo", target], { cwd: dir });
      expect((await runInProcess(["receipts", "verify", "--config", config], { cwd: dir })).code).toBe(EXIT.ok);
      const rebuilt = await runInProcess(
        ["receipts", "verify", "--json", "--expect-head", recorded, "--config", config],
        { cwd: dir },
      );
      expect(rebuilt.code).toBe(EXIT.verificationFailed);
      expect(JSON.parse(rebuilt.stdout)).toMatchObject({ ok: false, expectHead: recorded });
    });
  });

  describe("backups", () => {
    it("store backup prints the head; a restored copy verifies against it", { timeout: 120_000 }, async () => {
      const { dir, config } = hostConfig();
      const target = repo();
      await runInProcess(["gate", "--config", config, "--repo", target], { cwd: dir });
      const backup = await runInProcess(["store", "backup", "--json", "--out", "backup-1", "--config", config], {
        cwd: dir,
      });
      expect(backup.code).toBe(EXIT.ok);
      const result = JSON.parse(backup.stdout) as { path: string; headText: string; entries: number };
      expect(result).toMatchObject({ path: join(dir, "backup-1") });
      expect(result.entries).toBeGreaterThan(0);
      const human = await runInProcess(["store", "backup", "--out", "backup-2", "--config", config], { cwd: dir });
      expect(human.stdout).toContain(`asp receipts verify --expect-head ${result.headText}`);
      // The store moves on; restoring the backup brings back exactly its head.
      await runInProcess(["gate", "--config", config, "--repo", target], { cwd: dir });
      cpSync(result.path, join(dir, "restored"), { recursive: true });
      writeFileSync(config, JSON.stringify({ store: "restored", policy: "policy.json", providers: [honest] }));
      const verify = await runInProcess(["receipts", "verify", "--expect-head", result.headText, "--config", config], {
        cwd: dir,
      });
      expect(verify.code).toBe(EXIT.ok);
      expect((await runInProcess(["store", "check", "--store", "backup-2"], { cwd: dir })).code).toBe(EXIT.ok);
      const noOut = await runInProcess(["store", "backup", "--config", config], { cwd: dir });
      expect(noOut.code).toBe(EXIT.usage);
      const notEmpty = await runInProcess(["store", "backup", "--json", "--out", "backup-1", "--config", config], {
        cwd: dir,
      });
      expect(notEmpty.code).toBe(EXIT.usage);
      expect(JSON.parse(notEmpty.stdout)).toMatchObject({ error: { code: "ASP_EVIDENCE_TARGET_NOT_EMPTY" } });
    });
  });
});
