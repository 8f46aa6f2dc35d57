import { chmodSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LaunchRequest } from "@asp/contracts";
import { afterAll, describe, expect, it } from "vitest";
import {
  createBubblewrapSandbox,
  DEFAULT_LIMITS,
  findBwrap,
  limitsOf,
  mechanismOf,
  OPTIONS_SCHEMA,
  probeBwrap,
  realHost,
} from "../src/index.js";
import { runLaunch } from "./helpers.js";

// issue 32 hole 9 (THREAT-MODEL invariant 12): the isolated sandbox had tmpfs /tmp and /dev at
// half the machine's memory, a writable root of the same size, and no process or memory bound.
// Each bound now comes from the plugin's options (trusted configuration), and running into one
// is the provider's own failure (ENOSPC, EAGAIN, its crash), which the host records as a failed
// provider: never an allow.

const tmp = realpathSync(mkdtempSync(join(tmpdir(), "asp-bwrap-limits-")));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
// Readable by every user: the fork test runs the sandbox as `nobody` when the host is root.
chmodSync(tmp, 0o755);
const code = join(tmp, "provider");
mkdirSync(code, { mode: 0o755 });

const script = (name: string, lines: string[]): string => {
  const file = join(code, name);
  writeFileSync(file, lines.join("\n"), { mode: 0o644 });
  return file;
};

/** Fills a place with 256 KiB writes until it fails; prints how much went in and why it stopped. */
const fill = script("fill.mjs", [
  'import { writeSync, openSync } from "node:fs";',
  "const out = {};",
  'for (const place of ["/tmp/fill", "/dev/shm/fill", "/fill", "/dev/fill", "/usr/fill"]) {',
  "  let bytes = 0;",
  "  try {",
  '    const fd = openSync(place, "w");',
  "    const chunk = Buffer.alloc(256 * 1024, 1);",
  "    for (let i = 0; i < 1024; i++) bytes += writeSync(fd, chunk);",
  '    out[place] = { bytes, code: "UNBOUNDED" };',
  "  } catch (e) {",
  "    out[place] = { bytes, code: e.code };",
  "  }",
  "}",
  "console.log(JSON.stringify(out));",
]);

/** Spawns `sleep` children until the kernel refuses one; prints the counts, then exits (the pid namespace takes them). */
const forks = script("forks.mjs", [
  'import { spawn } from "node:child_process";',
  "let started = 0; let refused = null;",
  "for (let i = 0; i < 200 && refused === null; i++) {",
  '  const c = spawn("/usr/bin/sleep", ["30"], { stdio: "ignore" });',
  "  if (c.pid === undefined) { refused = 'no pid'; c.on('error', () => {}); } else started++;",
  "  c.on('error', (e) => { refused = e.code; });",
  "  await new Promise((r) => setImmediate(r));",
  "}",
  "console.log(JSON.stringify({ started, refused }));",
  "process.exit(0);",
]);

/** Reserves 64 MiB buffers (zeroed lazily: address space, little memory) up to 3 GiB, then exits 0: it must die first. */
const hog = script("hog.mjs", [
  "const keep = [];",
  "for (let i = 0; i < 48; i++) keep.push(Buffer.alloc(64 * 1024 * 1024));",
  'console.log("survived");',
]);

const request = (file: string): LaunchRequest => ({
  executable: process.execPath,
  args: [file],
  cwd: code,
  env: { PATH: "/usr/bin:/bin" },
  readOnly: [code],
  deny: [],
});

const bwrap = findBwrap(process.env.PATH);
const works = bwrap !== null && probeBwrap(bwrap, process.execPath).ok;
const prlimit = existsSync("/usr/bin/prlimit") ? "/usr/bin/prlimit" : null;
const setpriv = existsSync("/usr/bin/setpriv") ? "/usr/bin/setpriv" : null;
const MiB = 1024 * 1024;

describe("the sandbox's resource budget", () => {
  describe("options", () => {
    it("defaults: /tmp 64 MiB, /dev/shm 1 MiB, 128 processes, 8 GiB of address space each", () => {
      expect(limitsOf({})).toEqual({
        tmpBytes: 64 * MiB,
        shmBytes: 1 * MiB,
        maxProcesses: 128,
        maxAddressSpaceBytes: 8 * 1024 * MiB,
      });
      expect(limitsOf(undefined)).toBe(DEFAULT_LIMITS);
      expect(limitsOf({ limits: { tmpBytes: 4 * MiB } }).tmpBytes).toBe(4 * MiB);
      expect(Object.keys((OPTIONS_SCHEMA.properties as { limits: { properties: object } }).limits.properties)).toEqual(
        Object.keys(DEFAULT_LIMITS),
      );
    });

    it.each([
      [{ limits: { tmpBytes: 1 } }],
      [{ limits: { maxProcesses: 1.5 } }],
      [{ limits: { maxProcesses: "8" } }],
      [{ limits: { cpu: 1 } }],
      [{ other: true }],
      [[]],
    ])("refuses %j with ASP_BWRAP_BAD_OPTIONS", (options) => {
      expect(() => limitsOf(options)).toThrowWithCode("ASP_BWRAP_BAD_OPTIONS");
      expect(() => createBubblewrapSandbox(realHost(), options)).toThrowWithCode("ASP_BWRAP_BAD_OPTIONS");
    });

    it("the mechanism states each bound as enforced, and says when one is not", () => {
      const layout = { limits: DEFAULT_LIMITS, homes: [], prlimit: "/usr/bin/prlimit" };
      expect(mechanismOf("bubblewrap 0.8.0", layout, 1000)).toContain(
        "tmpfs /tmp 64 MiB, /dev/shm 1 MiB, the rest read-only; at most 128 processes, address space 8192 MiB each",
      );
      expect(mechanismOf("bubblewrap 0.8.0", layout, 0)).toContain("processes unbounded (the host runs as uid 0");
      expect(mechanismOf("bubblewrap 0.8.0", { ...layout, prlimit: null }, 1000)).toContain(
        "processes and memory unbounded (no prlimit)",
      );
    });
  });

  describe.skipIf(!works)("under a real bwrap", () => {
    it("issue 32 hole 9 (THREAT-MODEL inv. 12): /tmp and /dev/shm fill up at their budget (ENOSPC); /, /dev and /usr are read-only", async () => {
      const sandbox = createBubblewrapSandbox(realHost(), { limits: { tmpBytes: 4 * MiB, shmBytes: 1 * MiB } });
      const r = await sandbox.launch(request(fill));
      expect(r.mode).toBe("isolated");
      const out = await runLaunch(r);
      expect(out.status, out.stderr).toBe(0);
      const got = JSON.parse(out.stdout) as Record<string, { bytes: number; code: string }>;
      expect(got["/tmp/fill"]?.code).toBe("ENOSPC");
      expect(got["/tmp/fill"]?.bytes).toBeLessThanOrEqual(4 * MiB);
      expect(got["/dev/shm/fill"]?.code).toBe("ENOSPC");
      expect(got["/dev/shm/fill"]?.bytes).toBeLessThanOrEqual(1 * MiB);
      expect([got["/fill"]?.code, got["/dev/fill"]?.code, got["/usr/fill"]?.code]).toEqual(["EROFS", "EROFS", "EROFS"]);
    }, 30_000);

    it.skipIf(prlimit === null)(
      "issue 32 hole 9: a process that allocates past its address-space budget dies (a provider crash, never an answer)",
      async () => {
        const sandbox = createBubblewrapSandbox(realHost(), { limits: { maxAddressSpaceBytes: 2 * 1024 * MiB } });
        const out = await runLaunch(await sandbox.launch(request(hog)));
        expect(out.stdout).not.toContain("survived");
        expect(out.status === 0 && out.signal === null).toBe(false);
      },
      60_000,
    );

    // RLIMIT_NPROC does not bind uid 0: as root, the test runs the same launch as `nobody`
    // (setpriv), as a non-root host would; the mechanism line of a root host says it is unbounded.
    const asRoot = typeof process.getuid === "function" && process.getuid() === 0;
    it.skipIf(prlimit === null || (asRoot && setpriv === null))(
      "issue 32 hole 9: a fork loop stops at the process budget (EAGAIN)",
      async () => {
        const host = { ...realHost(), uid: asRoot ? 65534 : realHost().uid };
        const sandbox = createBubblewrapSandbox(host, { limits: { maxProcesses: 32 } });
        const r = await sandbox.launch(request(forks));
        expect(r.mechanism).toContain("at most 32 processes");
        const prefix = asRoot ? [setpriv ?? "", "--reuid=65534", "--regid=65534", "--clear-groups"] : [];
        const out = await runLaunch(r, prefix);
        expect(out.status, out.stderr).toBe(0);
        const got = JSON.parse(out.stdout) as { started: number; refused: string | null };
        expect(got.refused).toBe("EAGAIN");
        // node's own threads count against the same budget.
        expect(got.started).toBeLessThan(32);
      },
      60_000,
    );
  });
});
