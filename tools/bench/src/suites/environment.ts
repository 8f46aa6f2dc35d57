import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type EnvironmentSnapshot, openStore, type Store, snapshotEnvironment } from "@asp/evidence";
import { commitAll } from "../git.js";
import { compare } from "../measure.js";
import type { Suite } from "../suite.js";

// What dependency content costs as evidence (issue 17 item 1): `snapshotEnvironment` of a
// dependency-heavy repository, this very checkout after `pnpm install` (every `node_modules`
// folder not inside another: pnpm's store under the root one, the per-package folders of
// links), against `git status --porcelain` of the same repository in the same run: what a user
// runs to learn whether anything moved.
//
// - cold: a fresh level store and no stat cache: every file read, hashed and stored;
// - warm: the same store and the per-root stat caches of a previous snapshot: an lstat per file,
//   nothing read (how the host re-snapshots the environment on the next gate).
// "Cold" is the ASP side only: the OS page cache is warm for both sides.

const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));

/** Every `node_modules` folder under `repo` not inside another (links and `.git` not followed). */
export function dependencyRoots(repo: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of readdirSync(join(repo, rel), { withFileTypes: true })) {
      if (!e.isDirectory() || e.name === ".git") continue;
      const path = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.name === "node_modules") out.push(path);
      else walk(path);
    }
  };
  walk("");
  return out.sort();
}

/** A tiny installed-looking repository for the smoke size: a root store and a package's links. */
function smokeRepository(dir: string): string {
  const repo = join(dir, "repo");
  for (let p = 0; p < 5; p++) {
    mkdirSync(join(repo, "node_modules", `dep${p}`, "lib"), { recursive: true });
    writeFileSync(join(repo, "node_modules", `dep${p}`, "package.json"), `{"name":"dep${p}","version":"1.0.0"}\n`);
    writeFileSync(join(repo, "node_modules", `dep${p}`, "lib", "index.d.ts"), `export declare const v${p}: number;\n`);
  }
  mkdirSync(join(repo, "packages", "a", "node_modules"), { recursive: true });
  symlinkSync("../../../node_modules/dep0", join(repo, "packages", "a", "node_modules", "dep0"));
  writeFileSync(join(repo, "packages", "a", "index.ts"), 'export { v0 } from "dep0";\n');
  writeFileSync(join(repo, ".gitignore"), "node_modules/\n");
  commitAll(repo);
  return repo;
}

const suite: Suite = {
  name: "environment",
  description:
    "snapshotEnvironment of this checkout's node_modules roots, cold (fresh store, no stat cache) and warm (stat cache) vs git status --porcelain",
  async run(ctx) {
    const dir = mkdtempSync(join(tmpdir(), "asp-bench-environment-"));
    const stores: Store[] = [];
    try {
      const repo = ctx.size === "smoke" ? smokeRepository(dir) : ROOT;
      const roots = dependencyRoots(repo);
      if (roots.length === 0) throw new Error(`no node_modules under ${repo}: run pnpm install first`);
      const gitStatus = () => execFileSync("git", ["status", "--porcelain"], { cwd: repo, stdio: "ignore" });

      // cold: a new store for every timed call (opened untimed, in `before`).
      let cold: Store | null = null;
      let n = 0;
      const freshStore = async () => {
        if (cold !== null) await cold.close();
        rmSync(join(dir, `cold-${n}`), { recursive: true, force: true });
        cold = await openStore(join(dir, `cold-${++n}`));
      };
      await freshStore();
      const first = (await snapshotEnvironment(repo, roots, {
        store: cold as unknown as Store,
      })) as EnvironmentSnapshot;
      ctx.progress(
        `${roots.length} dependency roots under ${repo}: ${first.files.toLocaleString("en")} files and links, ${first.stored.toLocaleString("en")} objects stored cold`,
      );
      const rounds = ctx.size === "smoke" ? 1 : 5;
      const warmup = ctx.size === "smoke" ? 0 : 1;
      ctx.report(
        await compare({
          name: `snapshotEnvironment cold (fresh level store, no stat cache), ${first.files.toLocaleString("en")} files`,
          baselineName: "git status --porcelain (same repository)",
          baseline: gitStatus,
          subject: () => snapshotEnvironment(repo, roots, { store: cold as unknown as Store }),
          before: freshStore,
          rounds,
          warmup,
          details: { roots: roots.length, files: first.files, stored: first.stored },
        }),
      );
      if (cold !== null) await (cold as Store).close();
      cold = null;

      // warm: one store, the stat caches of a previous snapshot.
      const warm = await openStore(join(dir, "warm"));
      stores.push(warm);
      const statCacheDir = join(dir, "stat-cache");
      await snapshotEnvironment(repo, roots, { store: warm, statCacheDir });
      let hashed = 0;
      ctx.report(
        await compare({
          name: `snapshotEnvironment warm (stat cache), ${first.files.toLocaleString("en")} files`,
          baselineName: "git status --porcelain (same repository)",
          baseline: gitStatus,
          subject: async () => {
            const s = await snapshotEnvironment(repo, roots, { store: warm, statCacheDir });
            hashed = s?.hashed ?? -1;
          },
          rounds: ctx.size === "smoke" ? 1 : 11,
          warmup,
          headline: true,
          details: { roots: roots.length, files: first.files },
        }),
      );
      ctx.progress(`warm snapshot read and hashed ${hashed} files (the rest from the stat caches)`);
    } finally {
      for (const s of stores) await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
