import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, workspacePackages } from "./lib/workspace.js";

// STYLE §3–4 and DESIGN §2: the shape every package has, checked like publint would.
const packages = workspacePackages();
const published = packages.filter((p) => p.manifest.private !== true);
const read = (path: string): string => readFileSync(join(ROOT, path), "utf8");
const json = <T>(path: string): T => JSON.parse(read(path)) as T;

describe("package shape", () => {
  describe.each(published.map((p) => [p.dir, p] as const))("%s", (dir, pkg) => {
    const m = pkg.manifest;
    it("is an ESM package with a guarded exports map (types first, ./package.json, source condition)", () => {
      expect(m.type).toBe("module");
      const dot = m.exports?.["."] as Record<string, string>;
      expect(Object.keys(dot)[0]).toBe("types");
      expect(dot.types).toBe("./dist/index.d.ts");
      expect(dot["@asp/source"]).toBe("./src/index.ts");
      expect(dot.default).toBe("./dist/index.js");
      expect(m.exports?.["./package.json"]).toBe("./package.json");
      expect(m.files).toContain("dist");
      if (dir.startsWith("packages/")) expect(m.sideEffects).toBe(false);
    });
    it("has build, typecheck, test and lint scripts, a README with an example, and src/index.ts", () => {
      expect(Object.keys(m.scripts ?? {})).toEqual(expect.arrayContaining(["build", "typecheck", "test", "lint"]));
      const readme = read(`${dir}/README.md`);
      expect(readme).toMatch(/```(ts|js|sh)/);
      expect(existsSync(join(ROOT, dir, "src/index.ts"))).toBe(true);
    });
    it("never re-exports internals with export *", () => {
      expect(read(`${dir}/src/index.ts`)).not.toMatch(/export \* from/);
    });
    it("is in the API docs", () => {
      expect(json<{ entryPoints: string[] }>("typedoc.json").entryPoints).toContain(dir);
    });
  });

  describe.each(packages.map((p) => [p.dir, p] as const))("%s dependencies", (dir, pkg) => {
    it("pins external versions exactly and uses workspace:* internally", () => {
      const all = { ...pkg.manifest.dependencies, ...pkg.manifest.devDependencies };
      for (const [name, version] of Object.entries(all)) {
        if (name.startsWith("@asp/")) expect(version, name).toBe("workspace:*");
        // An npm alias (a second compiler version bundled beside the first) is pinned exactly too.
        else expect(version, name).toMatch(/^(?:npm:(?:@[a-z0-9-]+\/)?[a-z0-9.-]+@)?\d+\.\d+\.\d+$/);
      }
    });
    it("references every workspace dependency in its tsconfig (so tsc -b builds in order)", () => {
      if (!existsSync(join(ROOT, dir, "tsconfig.json"))) return;
      const refs = (json<{ references?: Array<{ path: string }> }>(`${dir}/tsconfig.json`).references ?? []).map((r) =>
        join(dir, r.path),
      );
      const deps = Object.keys(pkg.manifest.dependencies ?? {}).filter((d) => d.startsWith("@asp/"));
      for (const dep of deps) {
        const target = packages.find((p) => p.name === dep);
        expect(target, dep).toBeDefined();
        if (target && existsSync(join(ROOT, target.dir, "tsconfig.json")))
          expect(refs, `${dir} -> ${dep}`).toContain(target.dir);
      }
    });
  });

  it("the root solution tsconfig references every buildable package", () => {
    const refs = json<{ references: Array<{ path: string }> }>("tsconfig.json").references.map((r) => r.path);
    for (const p of packages) if (existsSync(join(ROOT, p.dir, "tsconfig.json"))) expect(refs).toContain(p.dir);
  });

  it("one version of each external dependency across the workspace (one tsyringe container, one ajv)", () => {
    const seen = new Map<string, string>();
    const root = json<{ devDependencies: Record<string, string> }>("package.json");
    for (const [name, version] of Object.entries(root.devDependencies)) seen.set(name, version);
    for (const p of packages) {
      for (const [name, version] of Object.entries({ ...p.manifest.dependencies, ...p.manifest.devDependencies })) {
        if (name.startsWith("@asp/")) continue;
        expect(seen.get(name) ?? version, `${p.dir}: ${name}`).toBe(version);
        seen.set(name, version);
      }
    }
  });
});

describe("API docs", () => {
  it("turbo builds every documented package before typedoc runs", () => {
    const documented = json<{ entryPoints: string[] }>("typedoc.json").entryPoints;
    const turbo = json<{ tasks: Record<string, { dependsOn?: string[] }> }>("turbo.json");
    const deps = turbo.tasks["//#docs:build"]?.dependsOn ?? [];
    const expected = documented.map((dir) => `${packages.find((p) => p.dir === dir)?.name}#build`);
    expect([...deps].sort()).toEqual([...expected].sort());
  });
});
