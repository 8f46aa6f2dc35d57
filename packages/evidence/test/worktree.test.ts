import { chmodSync, lstatSync, mkdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import {
  blobDigest,
  createMemoryStore,
  createStatCache,
  listTree,
  type Store,
  snapshotGitRevision,
  snapshotWorktree,
} from "../src/index.js";
import { commitAll, git } from "./helpers/git.js";
import { ageFiles, tempDir } from "./helpers/tmp.js";

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

/** Write files under `root`: string = content, { link } = symlink, { exec } = executable file. */
function write(root: string, files: Record<string, string | { link: string } | { exec: string } | Uint8Array>): void {
  for (const [path, spec] of Object.entries(files)) {
    const abs = join(root, path);
    mkdirSync(join(abs, ".."), { recursive: true });
    if (typeof spec === "string" || spec instanceof Uint8Array) writeFileSync(abs, spec);
    else if ("link" in spec) symlinkSync(spec.link, abs);
    else {
      writeFileSync(abs, spec.exec);
      chmodSync(abs, 0o755);
    }
  }
}

async function paths(dir: string, options: Parameters<typeof snapshotWorktree>[1] = {}): Promise<string[]> {
  const store = await createMemoryStore();
  open.push(store);
  const snap = await snapshotWorktree(dir, { ...options, store });
  return (await listTree(store.objects, snap.tree)).map((f) => f.path);
}

describe("snapshotWorktree", () => {
  describe("when the folder has .gitignore files and host excludes", () => {
    it("leaves out what they exclude, with git's precedence (deeper files and ! re-include)", async () => {
      const dir = tempDir();
      write(dir, {
        ".gitignore": "*.log\nbuild/\n/secret.txt\n",
        "a.txt": "a",
        "x.log": "log",
        "secret.txt": "s",
        "build/out.js": "o",
        "src/secret.txt": "not anchored: kept",
        "src/.gitignore": "!keep.log\n*.tmp\n",
        "src/keep.log": "kept by negation",
        "src/drop.log": "dropped",
        "src/t.tmp": "tmp",
        "node_modules/dep/index.js": "dep",
        ".asp/store/x": "host state",
      });
      expect(await paths(dir, { excludes: ["node_modules/", ".asp/"] })).toEqual([
        ".gitignore",
        "a.txt",
        "src/.gitignore",
        "src/keep.log",
        "src/secret.txt",
      ]);
    });

    it("never lets a .gitignore re-include what the host excluded", async () => {
      const dir = tempDir();
      write(dir, { ".gitignore": "!*.pem\n", "key.pem": "k", a: "a" });
      expect(await paths(dir, { excludes: ["*.pem"] })).toEqual([".gitignore", "a"]);
    });

    it("can ignore .gitignore files when told to", async () => {
      const dir = tempDir();
      write(dir, { ".gitignore": "*.log\n", "x.log": "l" });
      expect(await paths(dir, { gitignore: false })).toEqual([".gitignore", "x.log"]);
    });
  });

  describe("when the folder holds links, executables, binaries and empty or nested repositories", () => {
    it("records links as links without following them, even out of the root", async () => {
      const outside = tempDir();
      write(outside, { "secret.txt": "outside the root" });
      const dir = tempDir();
      write(dir, { "in.txt": "in", up: { link: outside }, rel: { link: "../../etc/passwd" }, ok: { link: "in.txt" } });
      const store = await createMemoryStore();
      open.push(store);
      const snap = await snapshotWorktree(dir, { store });
      const files = await listTree(store.objects, snap.tree);
      expect(files.map((f) => [f.path, f.mode])).toEqual([
        ["in.txt", "100644"],
        ["ok", "120000"],
        ["rel", "120000"],
        ["up", "120000"],
      ]);
      const up = files.find((f) => f.path === "up");
      expect(new TextDecoder().decode(await store.objects.readBlob(up?.digest ?? "sha256:"))).toBe(outside);
    });

    it("keeps the executable bit and hashes binary bytes as they are", async () => {
      const dir = tempDir();
      const binary = new Uint8Array([0, 255, 13, 10, 0x80, 0xfe]);
      write(dir, { "run.sh": { exec: "#!/bin/sh\n" }, "data.bin": binary, "crlf.txt": "a\r\nb\r\n" });
      const store = await createMemoryStore();
      open.push(store);
      const files = await listTree(store.objects, (await snapshotWorktree(dir, { store })).tree);
      expect(files).toEqual([
        { path: "crlf.txt", mode: "100644", digest: blobDigest(new TextEncoder().encode("a\r\nb\r\n")) },
        { path: "data.bin", mode: "100644", digest: blobDigest(binary) },
        { path: "run.sh", mode: "100755", digest: blobDigest(new TextEncoder().encode("#!/bin/sh\n")) },
      ]);
    });

    it("leaves out empty directories, .git and nested repositories, as git does", async () => {
      const dir = tempDir();
      write(dir, {
        "a.txt": "a",
        "nested/.git/HEAD": "ref",
        "nested/file": "f",
        ".git/config": "c",
        "only-ignored/x.log": "l",
        ".gitignore": "*.log\n",
      });
      mkdirSync(join(dir, "empty/deeper"), { recursive: true });
      expect(await paths(dir)).toEqual([".gitignore", "a.txt"]);
    });

    it("gives an empty folder the empty tree id", async () => {
      const a = await snapshotWorktree(tempDir());
      const b = await snapshotWorktree(tempDir());
      expect(a.tree).toBe(b.tree);
      expect(a.files).toBe(0);
    });
  });

  describe("when a path cannot be carried by a normalized POSIX path", () => {
    it("rejects a name with a backslash with a typed error", async () => {
      const dir = tempDir();
      write(dir, { "a\\b.txt": "x" });
      await expect(snapshotWorktree(dir)).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_PATH");
    });

    it("fails with a typed error when the root is not a directory", async () => {
      await expect(snapshotWorktree(join(tempDir(), "missing"))).rejects.toThrowWithCode("ASP_EVIDENCE_IO");
    });
  });

  describe("when re-snapshotting with a stat cache", () => {
    it("reads only the changed files, like git's index, and gets the same id as a cold snapshot", async () => {
      const dir = tempDir();
      const files: Record<string, string> = {};
      for (let i = 0; i < 40; i++) files[`d${i % 4}/f${i}.txt`] = `content ${i}`;
      write(dir, files);
      // Age the files so none is "racily clean" against the cache written just after.
      await ageFiles(Object.keys(files).map((p) => join(dir, p)));
      const store = await createMemoryStore();
      open.push(store);
      const cache = join(tempDir(), "stat-cache.json");
      const first = await snapshotWorktree(dir, { store, statCache: cache });
      expect(first).toMatchObject({ files: 40, hashed: 40 });
      const again = await snapshotWorktree(dir, { store, statCache: cache });
      expect(again).toMatchObject({ tree: first.tree, hashed: 0, stored: 0 });

      writeFileSync(join(dir, "d1/f5.txt"), "changed, and longer");
      rmSync(join(dir, "d2/f6.txt"));
      const changed = await snapshotWorktree(dir, { store, statCache: cache });
      expect(changed.hashed).toBe(1);
      expect(changed.files).toBe(39);
      expect(changed.tree).toBe((await snapshotWorktree(dir)).tree);
      expect(changed.tree).not.toBe(first.tree);
    });

    it("re-hashes a file changed in place with the same size and mtime", async () => {
      const dir = tempDir();
      write(dir, { "a.txt": "aaaa" });
      const t = new Date(Date.now() - 60_000);
      utimesSync(join(dir, "a.txt"), t, t);
      const cache = join(tempDir(), "cache.json");
      const first = await snapshotWorktree(dir, { statCache: cache });
      writeFileSync(join(dir, "a.txt"), "bbbb");
      utimesSync(join(dir, "a.txt"), t, t);
      // Same size and mtime, but ctime moved: the cache must not trust the old row.
      const second = await snapshotWorktree(dir, { statCache: cache });
      expect(second.hashed).toBe(1);
      expect(second.tree).not.toBe(first.tree);
    });

    it("does not trust rows written by another store's snapshot", async () => {
      const dir = tempDir();
      write(dir, { "a.txt": "a", "b.txt": "b" });
      await ageFiles(["a.txt", "b.txt"].map((p) => join(dir, p)));
      const cache = join(tempDir(), "cache.json");
      const one = await createMemoryStore();
      const two = await createMemoryStore();
      open.push(one, two);
      await snapshotWorktree(dir, { store: one, statCache: cache });
      const other = await snapshotWorktree(dir, { store: two, statCache: cache });
      expect(other.hashed).toBe(2);
      expect(await listTree(two.objects, other.tree)).toHaveLength(2);
    });

    it("keeps a handle's state in memory, and another reader of the file still gets the right id", async () => {
      const dir = tempDir();
      const files: Record<string, string> = {};
      for (let i = 0; i < 200; i++) files[`d${i % 5}/f${i}.txt`] = `content ${i}`;
      write(dir, files);
      await ageFiles(Object.keys(files).map((p) => join(dir, p)));
      const path = join(tempDir(), "cache");
      const handle = createStatCache(path);
      await snapshotWorktree(dir, { statCache: handle });
      writeFileSync(join(dir, "d0/f0.txt"), "edited");
      const edited = await snapshotWorktree(dir, { statCache: handle });
      expect(edited.hashed).toBe(1);
      // A small drift stays in memory; a fresh reader of the older file re-hashes just that file.
      const other = await snapshotWorktree(dir, { statCache: createStatCache(path) });
      expect(other.tree).toBe(edited.tree);
      expect(other.hashed).toBeLessThanOrEqual(1);
      expect(other.tree).toBe((await snapshotWorktree(dir)).tree);
    });

    it("re-applies changed .gitignore rules to cached files", async () => {
      const dir = tempDir();
      write(dir, { "a.txt": "a", "b.md": "b", "sub/c.txt": "c" });
      const cache = createStatCache(join(tempDir(), "cache"));
      await snapshotWorktree(dir, { statCache: cache });
      writeFileSync(join(dir, "sub", ".gitignore"), "*.txt\n");
      const snap = await snapshotWorktree(dir, { statCache: cache });
      expect(snap.tree).toBe((await snapshotWorktree(dir)).tree);
      expect(snap.files).toBe(3); // a.txt, b.md, sub/.gitignore
      const changed = await snapshotWorktree(dir, { statCache: cache, excludes: ["*.md"] });
      expect(changed.tree).toBe((await snapshotWorktree(dir, { excludes: ["*.md"] })).tree);
      expect(changed.files).toBe(2);
    });

    it("reuses a .gitignore's text only while its row holds, even for a same-size, same-mtime edit", async () => {
      const dir = tempDir();
      write(dir, { "sub/.gitignore": "a.txt\n", "sub/a.txt": "a", "sub/b.txt": "b", "x.txt": "x" });
      await ageFiles(["sub/.gitignore", "sub/a.txt", "sub/b.txt", "x.txt"].map((p) => join(dir, p)));
      const t = new Date(lstatSync(join(dir, "sub/.gitignore")).mtimeMs);
      const cache = createStatCache(join(tempDir(), "cache"));
      const first = await snapshotWorktree(dir, { statCache: cache });
      expect(first.files).toBe(3); // sub/.gitignore, sub/b.txt, x.txt
      // Unchanged rules, a changed sibling: the cached text still applies.
      writeFileSync(join(dir, "sub/a.txt"), "still ignored");
      const same = await snapshotWorktree(dir, { statCache: cache });
      expect(same).toMatchObject({ tree: first.tree, hashed: 0 });
      // Same size, same mtime, other rules: the ctime moved, so the file is read again.
      writeFileSync(join(dir, "sub/.gitignore"), "b.txt\n");
      utimesSync(join(dir, "sub/.gitignore"), t, t);
      const swapped = await snapshotWorktree(dir, { statCache: cache });
      expect(swapped.tree).toBe((await snapshotWorktree(dir)).tree);
      expect((await paths(dir)).sort()).toEqual(["sub/.gitignore", "sub/a.txt", "x.txt"]);
      expect(swapped.tree).not.toBe(first.tree);
    });

    it("ignores a damaged cache file and rewrites it", async () => {
      const dir = tempDir();
      write(dir, { "a.txt": "a" });
      const cache = join(tempDir(), "cache.json");
      writeFileSync(cache, "{broken");
      const snap = await snapshotWorktree(dir, { statCache: cache });
      expect(snap.hashed).toBe(1);
    });
  });
});

describe("snapshotGitRevision", () => {
  describe("when a working tree equals a commit", () => {
    it("gives the commit the same tree id as the working tree", async () => {
      const dir = tempDir();
      write(dir, {
        ".gitignore": "*.log\nbuild/\n",
        "README.md": "# hi\n",
        "x.log": "ignored",
        "build/out": "ignored",
        "src/index.ts": "export {};\n",
        "src/run.sh": { exec: "#!/bin/sh\necho hi\n" },
        "src/link": { link: "../README.md" },
        "src/deep/er/data.bin": new Uint8Array([0, 1, 2, 3, 255]),
        "src/.gitignore": "!keep.log\n",
        "src/keep.log": "kept",
        "odd name with spaces & ünïcode.txt": "x",
      });
      mkdirSync(join(dir, "empty"));
      commitAll(dir);
      const wt = await snapshotWorktree(dir);
      const rev = await snapshotGitRevision(dir, "HEAD");
      expect(rev.tree).toBe(wt.tree);
      expect(rev.files).toBe(wt.files);
      expect(rev.gitTree).toBe(git(dir, "rev-parse", "HEAD^{tree}").trim());
    });

    it("stores the same objects, so listings match", async () => {
      const dir = tempDir();
      write(dir, { "a/b/c.txt": "c", "a/d.txt": "d", e: { exec: "e" } });
      commitAll(dir);
      const store = await createMemoryStore();
      open.push(store);
      const rev = await snapshotGitRevision(dir, "HEAD", { store });
      const wt = await snapshotWorktree(dir);
      expect(rev.tree).toBe(wt.tree);
      expect((await listTree(store.objects, rev.tree)).map((f) => [f.path, f.mode])).toEqual([
        ["a/b/c.txt", "100644"],
        ["a/d.txt", "100644"],
        ["e", "100755"],
      ]);
    });

    it("agrees with the working tree for generated trees (property)", async () => {
      const name = fc.stringMatching(/^[a-z0-9_.-]{1,8}$/).filter((n) => n !== "." && n !== ".." && n !== ".git");
      const tree = fc.dictionary(
        fc.array(name, { minLength: 1, maxLength: 3 }).map((p) => p.join("/")),
        fc.tuple(fc.string(), fc.boolean()),
        {
          minKeys: 1,
          maxKeys: 8,
        },
      );
      await fc.assert(
        fc.asyncProperty(tree, async (files) => {
          const dir = tempDir();
          let written = 0;
          for (const [path, [content, exec]] of Object.entries(files)) {
            try {
              write(dir, { [path]: exec ? { exec: content } : content });
              written++;
            } catch {
              // A path that is a prefix of another (file vs directory): skip it.
            }
          }
          fc.pre(written > 0);
          commitAll(dir);
          expect((await snapshotGitRevision(dir, "HEAD")).tree).toBe((await snapshotWorktree(dir)).tree);
        }),
        { numRuns: 8 },
      );
    });
  });

  describe("when the working tree has moved on", () => {
    it("gives a different id than the commit", async () => {
      const dir = tempDir();
      write(dir, { "a.txt": "1" });
      commitAll(dir);
      writeFileSync(join(dir, "a.txt"), "2");
      expect((await snapshotGitRevision(dir, "HEAD")).tree).not.toBe((await snapshotWorktree(dir)).tree);
    });
  });

  describe("when the revision is bad", () => {
    it("fails with GIT_FAILED for a revision that does not exist", async () => {
      const dir = tempDir();
      write(dir, { a: "a" });
      commitAll(dir);
      await expect(snapshotGitRevision(dir, "no-such-branch")).rejects.toThrowWithCode("ASP_EVIDENCE_GIT_FAILED");
      await expect(snapshotGitRevision(tempDir(), "HEAD")).rejects.toThrowWithCode("ASP_EVIDENCE_GIT_FAILED");
    });

    it("refuses a revision that looks like an option, and never runs a shell", async () => {
      const dir = tempDir();
      write(dir, { a: "a" });
      commitAll(dir);
      const marker = join(dir, "pwned");
      await expect(snapshotGitRevision(dir, `--output=${marker}`)).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
      await expect(snapshotGitRevision(dir, `HEAD; touch ${marker}`)).rejects.toThrowWithCode(
        "ASP_EVIDENCE_GIT_FAILED",
      );
      await expect(snapshotGitRevision(dir, `$(touch ${marker})`)).rejects.toThrowWithCode("ASP_EVIDENCE_GIT_FAILED");
      expect(await paths(dir)).toEqual(["a"]);
    });
  });
});
