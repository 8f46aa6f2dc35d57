import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { loadPlugins, signPlugin } from "../src/index.js";
import { grantPolicy, makeKey, makePlugin } from "./helpers.js";

// The attacker controls the plugin folder at every instant, including the instant after the
// loader has hashed it. Hashing is made to hand control to the attacker right after it read the
// folder (whichever function the loader hashes with), so the race is won every time.
const afterHash = vi.hoisted(() => ({ hook: null as null | ((dir: string) => void) }));
vi.mock("../src/digest.js", async (importOriginal) => {
  const real = await importOriginal<Record<string, unknown>>();
  const wrap =
    (fn: unknown) =>
    (dir: string): unknown => {
      const result = (fn as (d: string) => unknown)(dir);
      afterHash.hook?.(dir);
      return result;
    };
  return {
    ...real,
    digestPlugin: wrap(real.digestPlugin),
    ...(real.snapshotPlugin === undefined ? {} : { snapshotPlugin: wrap(real.snapshotPlugin) }),
  };
});

describe("loadPlugins", () => {
  describe("when the manifest is rewritten right after the folder was hashed", () => {
    it("H1.3 host §1: the manifest in force is the one that was hashed, never the rewritten one", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      signPlugin(dir, key);
      const policy = grantPolicy([{ dir }]);
      const manifestFile = join(dir, "asp-plugin.json");
      const signed = JSON.parse(readFileSync(manifestFile, "utf8")) as Record<string, unknown>;
      afterHash.hook = () =>
        writeFileSync(manifestFile, JSON.stringify({ ...signed, entry: "lib/util.mjs", diagnosticSources: ["ts"] }));
      try {
        const result = await loadPlugins({ dirs: [dir], trustRoots: roots, policy });
        expect(result.refused).toEqual([]);
        const [p] = result.providers;
        expect(p?.plugin.diagnosticSources).toEqual(["test"]);
        expect(p?.manifest.diagnosticSources).toEqual(["test"]);
        expect(p?.manifest.args[0]?.endsWith("/main.mjs")).toBe(true);
      } finally {
        afterHash.hook = null;
      }
    });
  });
});
