import { spawnSync } from "node:child_process";
import {
  appendFileSync,
  chmodSync,
  cpSync,
  lstatSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cachePlugin } from "../src/cache.js";
import { snapshotPlugin } from "../src/digest.js";
import { loadPlugins, removePluginCache, signPlugin } from "../src/index.js";
import { grantPolicy, makeKey, makePlugin, tempDir } from "./helpers.js";

// THREAT-MODEL invariant 4: what runs is exactly what was verified. The plugin folder is
// untrusted at every instant; the loader runs a host-owned, read-only copy of the hashed bytes.

async function loadOne(cacheDir: string) {
  const { key, roots } = makeKey();
  const dir = makePlugin("provider");
  signPlugin(dir, key);
  const policy = grantPolicy([{ dir }]);
  const load = () => loadPlugins({ dirs: [dir], trustRoots: roots, policy, cacheDir });
  const result = await load();
  expect(result.refused).toEqual([]);
  const p = result.providers[0];
  if (p === undefined) throw new Error("not loaded");
  return { dir, p, load };
}

const run = (m: { executable: string; args: readonly string[]; cwd: string }) =>
  spawnSync(m.executable, m.args, { cwd: m.cwd, encoding: "utf8" });

describe("the plugin cache", () => {
  describe("when a plugin is loaded", () => {
    it("H1.3 host §1: the provider launches from <cacheDir>/<digest>, a read-only copy of exactly the verified bytes", async () => {
      const cacheDir = tempDir("asp-cache-");
      const { dir, p } = await loadOne(cacheDir);
      expect(p.cached).toBe(join(cacheDir, p.evidence.digest.replace(":", "-")));
      expect(p.manifest.cwd).toBe(p.cached);
      expect(p.manifest.args).toEqual([join(p.cached, "main.mjs")]);
      expect(readFileSync(join(p.cached, "main.mjs"))).toEqual(readFileSync(join(dir, "main.mjs")));
      expect(snapshotPlugin(p.cached).digest).toBe(p.evidence.digest);
      for (const path of [p.cached, join(p.cached, "main.mjs"), join(p.cached, "lib")]) {
        expect(statSync(path).mode & 0o222).toBe(0);
      }
      removePluginCache(cacheDir);
    });

    it("H1.3 host §1: the original folder changed after verification changes nothing that runs", async () => {
      const { dir, p } = await loadOne(tempDir("asp-cache-"));
      writeFileSync(join(dir, "main.mjs"), 'process.stdout.write("{\\"attacker\\":true}");\n');
      expect(JSON.parse(run(p.manifest).stdout)).toEqual({ cwd: p.cached, argv: [join(p.cached, "main.mjs")] });
    });
  });

  describe("when the cache already holds the digest", () => {
    it("reuses an entry that still hashes to the digest", async () => {
      const cacheDir = tempDir("asp-cache-");
      const { p, load } = await loadOne(cacheDir);
      const again = await load();
      expect(again.providers.map((x) => x.cached)).toEqual([p.cached]);
    });

    it("H1.3 host §1: an entry written to by someone else is never trusted by its name: it is replaced", async () => {
      const cacheDir = tempDir("asp-cache-");
      const { p, load } = await loadOne(cacheDir);
      chmodSync(p.cached, 0o755);
      chmodSync(join(p.cached, "main.mjs"), 0o644);
      appendFileSync(join(p.cached, "main.mjs"), 'process.stdout.write("tampered");\n');
      const again = await load();
      expect(again.refused).toEqual([]);
      expect(snapshotPlugin(p.cached).digest).toBe(p.evidence.digest);
      expect(run(p.manifest).stdout).not.toContain("tampered");
    });
  });

  describe("when the cache entry is a link to a folder with the same bytes", () => {
    it("H1.3 host §1: it is replaced by a real copy (a linked folder can change after it is hashed)", async () => {
      const cacheDir = tempDir("asp-cache-");
      const { p, load } = await loadOne(cacheDir);
      const elsewhere = join(tempDir("asp-elsewhere-"), "copy");
      cpSync(p.cached, elsewhere, { recursive: true });
      removePluginCache(p.cached);
      symlinkSync(elsewhere, p.cached);
      const again = await load();
      expect(again.refused).toEqual([]);
      expect(lstatSync(p.cached).isDirectory()).toBe(true);
    });
  });

  describe("cachePlugin", () => {
    it("throws ASP_PLUGIN_CACHE_MISMATCH when the copy does not hash to the digest it was given", () => {
      const dir = makePlugin("provider");
      const snapshot = snapshotPlugin(dir);
      const forged = { ...snapshot, digest: `sha256:${"0".repeat(64)}` as typeof snapshot.digest };
      expect(() => cachePlugin(forged, "main.mjs", tempDir("asp-cache-"))).toThrowWithCode("ASP_PLUGIN_CACHE_MISMATCH");
    });
  });
});
