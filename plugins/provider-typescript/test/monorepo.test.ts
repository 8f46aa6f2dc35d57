import { existsSync, lstatSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createMemoryStore, type Digest, snapshotEnvironment, snapshotWorktree } from "@asp/evidence";
import type { ContentSource } from "@asp/sdk";
import { describe, expect, it } from "vitest";
import { createTypeScriptChecker } from "../src/index.js";
import { findingsOf } from "./env-fixture.js";

// This repository checks itself: its tree (.gitignore honoured) and its installed dependencies
// (every node_modules root pnpm made), the root tsconfig.json with its project references. `tsc -b`
// builds this workspace without a diagnostic (the build runs it), so the answer must be none.

const WORKSPACE = fileURLToPath(new URL("../../../", import.meta.url));

/** The node_modules folders of the workspace root and of each workspace package. */
function dependencyRoots(): string[] {
  const roots = ["node_modules"];
  for (const group of readdirSync(WORKSPACE)) {
    if (group.startsWith(".") || group === "node_modules") continue;
    const at = join(WORKSPACE, group);
    if (!lstatSync(at).isDirectory()) continue;
    for (const pkg of readdirSync(at)) {
      const nm = join(at, pkg, "node_modules");
      if (existsSync(nm) && lstatSync(nm).isDirectory()) roots.push(`${group}/${pkg}/node_modules`);
    }
  }
  return roots;
}

describe("this monorepo", () => {
  it("host §9: the root tsconfig (project references) checks as tsc -b does: no diagnostics", async () => {
    const store = await createMemoryStore();
    try {
      const t0 = performance.now();
      const snap = await snapshotWorktree(WORKSPACE, { store });
      const env = await snapshotEnvironment(WORKSPACE, dependencyRoots(), { store });
      const t1 = performance.now();
      expect(env).not.toBeNull();
      const source: ContentSource = {
        readTree: async (d) => (await store.objects.readTree(d as Digest)).entries,
        readText: async (d) => new TextDecoder().decode(await store.objects.readBlob(d as Digest)),
      };
      const checker = createTypeScriptChecker({ scope: "all" });
      const r = await checker.check({ tree: snap.tree, environment: env }, source);
      const t2 = performance.now();
      // The figure the report quotes (not asserted: the machine is shared).
      console.log(
        `monorepo: snapshot ${Math.round(t1 - t0)} ms (${env?.files} environment files), check ${Math.round(t2 - t1)} ms`,
        JSON.stringify(r.stats),
      );
      expect(findingsOf(r.diagnostics)).toEqual([]);
      expect(r.status).toBe("complete");
      // Every referenced project and the root: as many as tsc -b builds.
      const root = JSON.parse(readFileSync(join(WORKSPACE, "tsconfig.json"), "utf8")) as { references: unknown[] };
      expect(r.stats.projects).toBe(root.references.length + 1);
      // Resolution read a small part of the environment, never all of it.
      expect(r.stats.blobReads).toBeLessThan((env?.files ?? 0) / 4);
    } finally {
      await store.close();
    }
  }, 600_000);
});
