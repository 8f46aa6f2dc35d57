import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BUNDLED_COMPILERS } from "../src/index.js";

// The signed plugin carries the compiler's default libraries as assets. The asset pattern once
// required a dot after `lib`, so `lib.d.ts` itself (the default of `target: es5` without `lib`)
// was left out: such projects got TS6053 and ten TS2318 naming the host's plugin path (issue 26).
const PKG = fileURLToPath(new URL("..", import.meta.url));
const manifest = JSON.parse(readFileSync(join(PKG, "package.json"), "utf8")) as {
  aspPlugin: { assets: Array<{ package: string; dir: string; match: string }> };
};
const asset = manifest.aspPlugin.assets.find((a) => a.package === "typescript" && a.dir === "lib");
const libDir = join(dirname(createRequire(join(PKG, "package.json")).resolve("typescript/package.json")), "lib");
const libs = readdirSync(libDir).filter((f) => /^lib.*\.d\.ts$/.test(f));

describe("the compiler's default libraries in the signed plugin", () => {
  it("the asset pattern takes every lib*.d.ts of the bundled compiler, lib.d.ts included", () => {
    expect(asset).toBeDefined();
    const match = new RegExp(asset?.match ?? "^$");
    expect(libs).toContain("lib.d.ts");
    expect(libs.filter((f) => !match.test(f))).toEqual([]);
  });

  it.skipIf(!existsSync(join(PKG, "dist", "plugin", "asp-plugin.json")))(
    "the packed plugin holds every one of them",
    () => {
      const packed = new Set(readdirSync(join(PKG, "dist", "plugin")));
      expect(libs.filter((f) => !packed.has(f))).toEqual([]);
    },
  );

  it.skipIf(!existsSync(join(PKG, "dist", "plugin", "asp-plugin.json")))(
    "every other bundled compiler has its own bundle and every one of its own lib*.d.ts in its folder",
    () => {
      const require = createRequire(join(PKG, "package.json"));
      for (const c of BUNDLED_COMPILERS.filter((b) => b.spec !== "typescript")) {
        const own = readdirSync(join(dirname(require.resolve(`${c.spec}/package.json`)), "lib")).filter((f) =>
          /^lib.*\.d\.ts$/.test(f),
        );
        const folder = join(PKG, "dist", "plugin", "compilers", c.minor);
        const packed = new Set(readdirSync(folder));
        expect(own).toContain("lib.d.ts");
        expect(own.filter((f) => !packed.has(f))).toEqual([]);
        expect(packed.has("typescript.mjs")).toBe(true);
      }
    },
  );
});
