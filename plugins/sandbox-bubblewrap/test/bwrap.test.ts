import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LaunchRequest } from "@asp/contracts";
import { afterAll, describe, expect, it } from "vitest";
import {
  type BubblewrapHost,
  bwrapArgs,
  confine,
  createBubblewrapSandbox,
  findBwrap,
  NAMESPACE_FLAGS,
  probeBwrap,
  realHost,
} from "../src/index.js";

const tmp = mkdtempSync(join(tmpdir(), "asp-bwrap-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const folder = (name: string): string => {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  return dir;
};

const code = folder("provider");
const repo = folder("repo");
const store = folder("store");
writeFileSync(join(code, "main.mjs"), "console.log('hi')\n");

const request = (over: Partial<LaunchRequest> = {}): LaunchRequest => ({
  executable: process.execPath,
  args: [join(code, "main.mjs")],
  cwd: code,
  env: { PATH: "/usr/bin:/bin", ASP_TOKEN: "t" },
  readOnly: [code],
  deny: [repo, store, `${store}.plugins`],
  ...over,
});

const fakeHost = (over: Partial<BubblewrapHost> = {}): BubblewrapHost => ({
  path: "/usr/bin",
  fallback: "/usr/bin/bwrap",
  execPath: process.execPath,
  probe: () => ({ ok: true, version: "bubblewrap 0.8.0" }),
  homes: ["/root", "/home"],
  uid: 1000,
  prlimitFallback: "/usr/bin/prlimit",
  ...over,
});

/** A bwrap that really runs here? (The tests that spawn one need it; they fail loudly otherwise.) */
const real = findBwrap(process.env.PATH);
const realProbe = real === null ? null : probeBwrap(real, process.execPath);
const skip = process.env.ASP_TEST_NO_BWRAP === "1" && realProbe?.ok !== true;

describe("confine", () => {
  describe("when bwrap is missing", () => {
    it("H3.2 host §3: returns the launch unchanged, advisory with direct write and the reason, never isolated", () => {
      const r = confine(request(), fakeHost({ path: join(tmp, "nowhere"), fallback: join(tmp, "nowhere", "bwrap") }));
      expect(r).toMatchObject({ executable: process.execPath, mode: "advisory", directWrite: true });
      expect(r.args).toEqual(request().args);
      expect(r.reason).toContain("bwrap not found");
    });
  });

  describe("when bwrap cannot create namespaces", () => {
    it("H3.2 host §3: advisory with the probe's reason, and the probe runs once", () => {
      let probes = 0;
      const host = fakeHost({
        probe: () => {
          probes++;
          return { ok: false, reason: "bwrap cannot create the sandbox's namespaces here: No permissions" };
        },
      });
      const cache = new Map();
      const a = confine(request(), host, cache);
      const b = confine(request(), host, cache);
      expect([a.mode, b.mode]).toEqual(["advisory", "advisory"]);
      expect(a.directWrite).toBe(true);
      expect(a.reason).toContain("No permissions");
      expect(probes).toBe(1);
    });
  });

  describe("when bwrap works", () => {
    const r = confine(request(), fakeHost());
    const [flags = [], command = []] = [r.args.slice(0, r.args.indexOf("--")), r.args.slice(r.args.indexOf("--") + 1)];
    const prlimit = ["/usr/bin/prlimit", "--nproc=128", "--as=8589934592", "--"];
    const pairs = (flag: string): string[][] =>
      flags.flatMap((f, i) => (f === flag ? [[flags[i + 1] ?? "", flags[i + 2] ?? ""]] : []));

    it("wraps the launch in bwrap: isolated, no direct write, the provider command after --", () => {
      expect(r).toMatchObject({ executable: "/usr/bin/bwrap", mode: "isolated", directWrite: false, env: {} });
      // issue 32 hole 9: the provider runs under prlimit's process and address-space bounds.
      expect(command).toEqual([...prlimit, realpathSync(process.execPath), ...request().args]);
      for (const f of NAMESPACE_FLAGS) expect(flags).toContain(f);
    });

    it("sets exactly the host's environment inside (--clearenv, then --setenv)", () => {
      expect(flags).toContain("--clearenv");
      expect(pairs("--setenv")).toEqual([
        ["PATH", "/usr/bin:/bin"],
        ["ASP_TOKEN", "t"],
      ]);
    });

    it("binds the provider's copy read-only, never a deny folder, and nothing writable but its tmpfs", () => {
      expect(pairs("--ro-bind")).toContainEqual([code, code]);
      expect(flags).not.toContain("--bind");
      expect(flags).not.toContain("--bind-try");
      for (const d of [repo, store]) expect(flags).not.toContain(d);
      expect(pairs("--tmpfs").map(([where]) => where)).toEqual(["/dev/shm", "/tmp"]);
      expect(flags.slice(flags.indexOf("--chdir"))).toEqual(["--chdir", code]);
      // issue 32 hole 9: the root bwrap builds in and /dev are read-only once built.
      expect(pairs("--remount-ro").map(([where]) => where)).toEqual(["/dev", "/"]);
    });

    it("issue 32 hole 4: binds the executable's file, never its install prefix (no runtime folder outside the system ones)", () => {
      const binds = pairs("--ro-bind").map(([src]) => src);
      expect(binds.filter((b) => !["/usr", "/etc/ld.so.cache", "/etc/ld.so.conf", code].includes(b ?? ""))).toEqual(
        process.execPath.startsWith("/usr/") ? [] : [realpathSync(process.execPath)],
      );
    });

    it("refuses a read-only folder that holds a deny folder (ASP_BWRAP_BAD_REQUEST)", () => {
      expect(() => bwrapArgs(request({ readOnly: [tmp] }), process.execPath)).toThrowWithCode("ASP_BWRAP_BAD_REQUEST");
      expect(() => bwrapArgs(request({ cwd: "relative" }), process.execPath)).toThrowWithCode("ASP_BWRAP_BAD_REQUEST");
    });
  });
});

describe("a real bwrap", () => {
  it.runIf(realProbe?.ok !== true && !skip)("bubblewrap runs on this machine (set ASP_TEST_NO_BWRAP=1 to skip)", () => {
    throw new Error(
      `these tests need a working bwrap (apt-get install -y bubblewrap): ${realProbe?.ok === false ? realProbe.reason : "not found"}`,
    );
  });

  it.skipIf(realProbe?.ok !== true)(
    "host §3: the wrapped process sees its copy read-only, no repository, no store, no network",
    async () => {
      const script = [
        'const fs = require("node:fs");',
        "const tryIt = (f) => { try { f(); return true; } catch { return false; } };",
        "console.log(JSON.stringify({",
        `  repo: fs.existsSync(${JSON.stringify(repo)}),`,
        `  store: fs.existsSync(${JSON.stringify(store)}),`,
        `  writeCopy: tryIt(() => fs.writeFileSync(${JSON.stringify(join(code, "x"))}, "x")),`,
        '  writeTmp: tryIt(() => fs.writeFileSync("/tmp/x", "x")),',
        "  env: Object.keys(process.env).sort(),",
        "  ifaces: Object.keys(require('node:os').networkInterfaces()).filter((n) => n !== 'lo'),",
        "}));",
      ].join("\n");
      const r = await createBubblewrapSandbox(realHost()).launch(request({ args: ["-e", script] }));
      expect(r.mode).toBe("isolated");
      const out = spawnSync(r.executable, [...r.args], { cwd: r.cwd, env: { ...r.env }, encoding: "utf8" });
      expect(out.status, out.stderr).toBe(0);
      expect(JSON.parse(out.stdout)).toEqual({
        repo: false,
        store: false,
        writeCopy: false,
        writeTmp: true,
        env: ["ASP_TOKEN", "PATH", "PWD"],
        ifaces: [],
      });
    },
  );
});
