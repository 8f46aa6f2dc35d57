import { mkdirSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { blobDigest, createMemoryStore, type Digest, listTree, type Store, snapshotEnvironment } from "../src/index.js";
import { ageFiles, tempDir } from "./helpers/tmp.js";

const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function memory(): Promise<Store> {
  const store = await createMemoryStore();
  open.push(store);
  return store;
}

/** A repository with files at these paths, aged so none is "racily clean" against a stat cache. */
function repoWith(files: Record<string, string>): string {
  const dir = tempDir();
  const old = new Date(Date.now() - 60_000);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
    utimesSync(join(dir, path), old, old);
  }
  return dir;
}

const DEPS = {
  "package.json": "{}",
  "src/a.ts": "export const a = 1;\n",
  ".gitignore": "node_modules/\n",
  "node_modules/x/package.json": '{"name":"x","types":"index.d.ts"}',
  "node_modules/x/index.d.ts": "export declare const x: number;\n",
  "node_modules/.cache/tool/blob": "churn",
  "packages/p/node_modules/y/package.json": '{"name":"y"}',
};

describe("snapshotEnvironment", () => {
  describe("when the roots exist", () => {
    it("host §9: lays the roots out at repository paths, ignoring .gitignore, without the default .cache/", async () => {
      const repo = repoWith(DEPS);
      const store = await memory();
      const snap = await snapshotEnvironment(repo, ["packages/p/node_modules", "node_modules"], { store });
      expect(snap).not.toBeNull();
      expect(snap?.roots).toEqual(["node_modules", "packages/p/node_modules"]);
      const files = await listTree(store.objects, snap?.tree as Digest);
      expect(files.map((f) => f.path).sort()).toEqual([
        "node_modules/x/index.d.ts",
        "node_modules/x/package.json",
        "packages/p/node_modules/y/package.json",
      ]);
      expect(files.find((f) => f.path === "node_modules/x/package.json")?.digest).toBe(
        blobDigest(new TextEncoder().encode(DEPS["node_modules/x/package.json"])),
      );
      // Nothing outside the roots: not the sources, not package.json.
      expect(files.some((f) => !f.path.includes("node_modules/"))).toBe(false);
      expect(snap?.files).toBe(3);
    });

    it("keeps links inside a root as links, never followed (pnpm's symlinked layout)", async () => {
      const repo = repoWith({ "node_modules/.pnpm/z@1/node_modules/z/index.js": "1" });
      symlinkSync(".pnpm/z@1/node_modules/z", join(repo, "node_modules/z"));
      const store = await memory();
      const snap = await snapshotEnvironment(repo, ["node_modules"], { store });
      const files = await listTree(store.objects, snap?.tree as Digest);
      expect(files.find((f) => f.path === "node_modules/z")?.mode).toBe("120000");
    });

    it("honours excludes given instead of the default", async () => {
      const repo = repoWith(DEPS);
      const store = await memory();
      const snap = await snapshotEnvironment(repo, ["node_modules"], { store, excludes: ["x/index.d.ts"] });
      const paths = (await listTree(store.objects, snap?.tree as Digest)).map((f) => f.path).sort();
      expect(paths).toEqual(["node_modules/.cache/tool/blob", "node_modules/x/package.json"]);
    });
  });

  describe("when a root is missing, a link or behind a link", () => {
    it("returns null when no root exists", async () => {
      const repo = repoWith({ "package.json": "{}" });
      expect(await snapshotEnvironment(repo, ["node_modules"], { store: await memory() })).toBeNull();
    });

    it("host §9: leaves a symlinked root out (it could name any folder on the machine)", async () => {
      const outside = repoWith({ "secret/key": "do not read" });
      const repo = repoWith(DEPS);
      symlinkSync(join(outside, "secret"), join(repo, "linked_modules"));
      const store = await memory();
      const snap = await snapshotEnvironment(repo, ["linked_modules", "node_modules"], { store });
      expect(snap?.roots).toEqual(["node_modules"]);
      const alone = await snapshotEnvironment(repo, ["linked_modules"], { store });
      expect(alone).toBeNull();
    });

    it("host §9: leaves out a root reached through a linked folder above it", async () => {
      const outside = repoWith({ "node_modules/secret/key": "do not read" });
      const repo = repoWith({ "package.json": "{}" });
      symlinkSync(outside, join(repo, "pkg"));
      const snap = await snapshotEnvironment(repo, ["pkg/node_modules"], { store: await memory() });
      expect(snap).toBeNull();
    });
  });

  describe("when the roots are not a clean set", () => {
    it("refuses nested roots with ASP_EVIDENCE_BAD_PATH", async () => {
      const repo = repoWith(DEPS);
      await expect(
        snapshotEnvironment(repo, ["node_modules", "node_modules/x"], { store: await memory() }),
      ).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_PATH");
    });

    it.each([["../node_modules"], ["/abs/node_modules"], ["a//b"], ["./node_modules"]])(
      "refuses the root %s with ASP_EVIDENCE_BAD_PATH",
      async (root) => {
        const repo = repoWith(DEPS);
        await expect(snapshotEnvironment(repo, [root], { store: await memory() })).rejects.toThrowWithCode(
          "ASP_EVIDENCE_BAD_PATH",
        );
      },
    );
  });

  describe("when re-snapshotting with stat caches", () => {
    it("host §9: hashes no file when nothing changed, and exactly the changed one when one did", async () => {
      const repo = repoWith(DEPS);
      // utimes moved every ctime to now: wait for the filesystem clock to pass them, or git's
      // racily-clean rule re-hashes them (correctly, but then nothing is shown).
      await ageFiles(Object.keys(DEPS).map((p) => join(repo, p)));
      const store = await memory();
      const statCacheDir = join(tempDir(), "env-cache");
      const cold = await snapshotEnvironment(repo, ["node_modules", "packages/p/node_modules"], {
        store,
        statCacheDir,
      });
      expect(cold?.hashed).toBe(3);
      const warm = await snapshotEnvironment(repo, ["node_modules", "packages/p/node_modules"], {
        store,
        statCacheDir,
      });
      expect(warm).toMatchObject({ tree: cold?.tree, hashed: 0, stored: 0 });

      writeFileSync(join(repo, "node_modules/x/index.d.ts"), "export declare const x: string | number;\n");
      const changed = await snapshotEnvironment(repo, ["node_modules", "packages/p/node_modules"], {
        store,
        statCacheDir,
      });
      expect(changed?.hashed).toBe(1);
      expect(changed?.tree).not.toBe(cold?.tree);
      // The cached result is the cold result of the same content.
      const fresh = await snapshotEnvironment(repo, ["node_modules", "packages/p/node_modules"], { store });
      expect(fresh?.tree).toBe(changed?.tree);
    });
  });
});
