import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createStatCache, snapshotWorktree } from "../src/index.js";
import { ageFiles, tempDir } from "./helpers/tmp.js";

/**
 * Changes that land in the middle of a snapshot, made deterministic: `node:fs` is wrapped so a
 * test can act right after a folder is listed, before a path is stat'ed, or before a file is
 * opened. (These trees are small, so every lstat runs on the main thread, through the wrapper.)
 */
const hooks = vi.hoisted(() => ({
  afterList: undefined as ((dir: string) => void) | undefined,
  beforeLstat: undefined as ((path: string) => void) | undefined,
  beforeOpen: undefined as ((path: string) => void) | undefined,
}));

vi.mock("node:fs", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs")>();
  const readdirSync = ((path: fs.PathLike, options?: unknown) => {
    const listed = real.readdirSync(path, options as { withFileTypes: true });
    hooks.afterList?.(String(path));
    return listed;
  }) as typeof real.readdirSync;
  const lstatSync = ((path: fs.PathLike, options?: unknown) => {
    hooks.beforeLstat?.(String(path));
    return real.lstatSync(path, options as undefined);
  }) as typeof real.lstatSync;
  const openSync = ((path: fs.PathLike, flags: fs.OpenMode, mode?: fs.Mode) => {
    hooks.beforeOpen?.(String(path));
    return real.openSync(path, flags, mode);
  }) as typeof real.openSync;
  const wrapped = { ...real, readdirSync, lstatSync, openSync };
  return { ...wrapped, default: wrapped };
});

afterEach(() => {
  hooks.afterList = undefined;
  hooks.beforeLstat = undefined;
  hooks.beforeOpen = undefined;
});

/** Files under `dir`, aged so none is racily clean against a cache written just after. */
async function write(dir: string, files: Record<string, string>): Promise<void> {
  for (const [path, text] of Object.entries(files)) {
    fs.mkdirSync(join(dir, path, ".."), { recursive: true });
    fs.writeFileSync(join(dir, path), text);
  }
  await ageFiles(Object.keys(files).map((p) => join(dir, p)));
}

describe("snapshotWorktree while the tree changes", () => {
  describe("when a cached file is deleted after its folder was listed", () => {
    it("leaves it out (never keeps the cached row) and gets the id of the tree without it", async () => {
      const dir = tempDir();
      await write(dir, { "d/a.txt": "a", "d/b.txt": "b", "top.txt": "t" });
      const cache = createStatCache(join(tempDir(), "cache"));
      const first = await snapshotWorktree(dir, { statCache: cache });
      expect(first.files).toBe(3);

      hooks.afterList = (listed) => {
        if (listed.endsWith("/d")) fs.rmSync(join(dir, "d", "b.txt"));
      };
      const during = await snapshotWorktree(dir, { statCache: cache });
      hooks.afterList = undefined;
      expect(during.files).toBe(2);
      expect(during.tree).toBe((await snapshotWorktree(dir)).tree);
      // And the cache it left behind describes the tree without it.
      const after = await snapshotWorktree(dir, { statCache: cache });
      expect(after).toMatchObject({ tree: during.tree, hashed: 0 });
    });
  });

  describe("when a folder is deleted after its parent was listed", () => {
    it("leaves the whole folder out", async () => {
      const dir = tempDir();
      await write(dir, { "d/a.txt": "a", "top.txt": "t" });
      const cache = createStatCache(join(tempDir(), "cache"));
      await snapshotWorktree(dir, { statCache: cache });
      hooks.afterList = (listed) => {
        if (listed === dir) fs.rmSync(join(dir, "d"), { recursive: true });
      };
      const during = await snapshotWorktree(dir, { statCache: cache });
      hooks.afterList = undefined;
      expect(during.files).toBe(1);
      expect(during.tree).toBe((await snapshotWorktree(dir)).tree);
    });
  });

  describe("when a file is swapped for a link between its lstat and its read", () => {
    it("never reads through the link: a typed IO error, not the target's bytes", async () => {
      const dir = tempDir();
      const outside = join(tempDir(), "secret");
      fs.writeFileSync(outside, "secret");
      await write(dir, { "a.txt": "a" });
      hooks.beforeOpen = (path) => {
        if (path.endsWith("/a.txt")) {
          fs.rmSync(path);
          fs.symlinkSync(outside, path);
        }
      };
      await expect(snapshotWorktree(dir)).rejects.toMatchObject({
        code: "ASP_EVIDENCE_IO",
        data: { errno: "ELOOP" },
      });
    });
  });

  describe("when an lstat fails for another reason than the path being gone", () => {
    it("is a typed IO error naming the path and the errno", async () => {
      const dir = tempDir();
      await write(dir, { "a.txt": "a", "b.txt": "b" });
      hooks.beforeLstat = (path) => {
        if (path.endsWith("/b.txt")) throw Object.assign(new Error("EACCES: permission denied"), { code: "EACCES" });
      };
      await expect(snapshotWorktree(dir)).rejects.toMatchObject({
        code: "ASP_EVIDENCE_IO",
        data: { path: join(dir, "b.txt"), errno: "EACCES" },
      });
    });
  });
});
