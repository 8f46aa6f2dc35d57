import { execFileSync } from "node:child_process";
import { lstatSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createStatCache, snapshotGitRevision, snapshotWorktree } from "../src/index.js";
import { STAT_FAILED, STAT_MISSING, STAT_OK, type StatNumbers, StatQueue, statPoolForTests } from "../src/stat-pool.js";
import { commitAll } from "./helpers/git.js";
import { ensureBuilt, tempDir } from "./helpers/tmp.js";

const FIXTURE = new URL("./fixtures/snapshot-exit.mjs", import.meta.url).pathname;

afterEach(async () => {
  await statPoolForTests.stop();
});

/** `n` small files in folders of 100, a link, and the paths to stat (some missing). */
function tree(n: number): { dir: string; paths: string[] } {
  const dir = tempDir();
  const paths: string[] = [];
  for (let i = 0; i < n; i++) {
    const folder = join(dir, `d${Math.floor(i / 100)}`);
    if (i % 100 === 0) mkdirSync(folder);
    const path = join(folder, `f${i}.txt`);
    writeFileSync(path, `file ${i}\n`);
    paths.push(path);
  }
  symlinkSync("d0/f0.txt", join(dir, "link"));
  paths.push(join(dir, "link"), join(dir, "gone.txt"), join(dir, "d0", "f0.txt", "under-a-file"), join(dir, "d1"));
  return { dir, paths };
}

async function statAll(paths: readonly string[], minParallel?: number): Promise<Array<StatNumbers | number>> {
  const queue = new StatQueue(minParallel);
  for (const p of paths) queue.add(p);
  await queue.finish();
  return paths.map((_, i) => {
    const into = { size: 0, mtimeMs: 0, ctimeMs: 0, ino: 0, mode: 0 };
    const status = queue.read(i, into);
    return status === STAT_OK ? into : status;
  });
}

function expected(path: string): StatNumbers | number {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch {
    return STAT_MISSING; // ENOENT, ENOTDIR
  }
  return { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino, mode: st.mode };
}

describe("StatQueue", () => {
  describe("when a helper thread shares the work", () => {
    it("gives every path its own lstat (links not followed), and reports missing paths", async () => {
      const { paths } = tree(2600);
      const got = await statAll(paths, 1024);
      expect(statPoolForTests.running).toBe(true);
      expect(got).toEqual(paths.map(expected));
      expect(got.at(-3)).toBe(STAT_MISSING); // gone
      expect(got.at(-2)).toBe(STAT_MISSING); // under a file: ENOTDIR
      expect(((got.at(-4) as StatNumbers).mode & 0o170000) === 0o120000).toBe(true);
    });

    it("finishes every path itself when the helper stops mid-way", async () => {
      const { paths } = tree(2600);
      await statAll(paths, 1024); // start the helper
      const queue = new StatQueue(1024);
      for (const p of paths) queue.add(p);
      await statPoolForTests.stop();
      await queue.finish();
      const into = { size: 0, mtimeMs: 0, ctimeMs: 0, ino: 0, mode: 0 };
      for (let i = 0; i < paths.length - 4; i++) expect(queue.read(i, into)).toBe(STAT_OK);
    });
  });

  describe("when a path cannot be stat'ed for another reason", () => {
    it("marks it failed, so the caller re-stats it and reports the error", async () => {
      const long = join(tempDir(), "x".repeat(300)); // ENAMETOOLONG
      expect(await statAll([long])).toEqual([STAT_FAILED]);
    });
  });
});

describe("snapshotWorktree on a tree large enough for the helper thread", () => {
  it("gets the same id as git, as a single-threaded snapshot, and as a cached re-snapshot", async () => {
    const { dir } = tree(2300);
    rmSync(join(dir, "link"));
    symlinkSync("../../outside", join(dir, "link"));
    const commit = commitAll(dir);
    const cache = createStatCache(join(tempDir(), "cache"));
    const parallel = await snapshotWorktree(dir, { statCache: cache });
    expect(statPoolForTests.running).toBe(true);
    expect(parallel.files).toBe(2301);
    expect(parallel.tree).toBe((await snapshotGitRevision(dir, commit)).tree);

    writeFileSync(join(dir, "d7", "f700.txt"), "edited\n");
    rmSync(join(dir, "d9", "f950.txt"));
    const again = await snapshotWorktree(dir, { statCache: cache });
    statPoolForTests.setParallel(false);
    const single = await snapshotWorktree(dir);
    expect(again.tree).toBe(single.tree);
    expect(again.files).toBe(2300);
    expect(again.tree).not.toBe(parallel.tree);
  });

  it("lets the process exit on its own afterwards (the helper never holds it)", () => {
    const { dir } = tree(2300);
    const out = execFileSync(process.execPath, [FIXTURE, ensureBuilt(), dir], { encoding: "utf8", timeout: 60_000 });
    expect(out).toMatch(/^sha256:[0-9a-f]{64} 2301\n$/);
  });
});
