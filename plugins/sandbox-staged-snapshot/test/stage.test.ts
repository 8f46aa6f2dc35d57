import { cpSync, existsSync, mkdirSync, readdirSync, renameSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { StageRequest } from "@asp/contracts";
import { afterAll, describe, expect, it } from "vitest";
import { createStagedSnapshot, type StagedStep } from "../src/index.js";
import { baseFiles, crashPlan } from "./fixtures/plan.js";
import { expectedTree, makeRepo, removeScratch, tempDir, treeId, writeFiles } from "./helpers.js";

const text = (s: string) => new TextEncoder().encode(s);
type Writes = StageRequest["writes"];

afterAll(removeScratch, 30_000);

/** A repository at B, a journal folder for it, and its tree id. */
async function setup(files = baseFiles()) {
  const root = makeRepo(files);
  const journalDir = join(tempDir("asp-staged-journal-"), "journal");
  return { root, journalDir, B: await treeId(root) };
}

/** A sandbox whose fault hook runs `at[name]` after that step. */
function withHook(at: Record<string, () => void>) {
  return createStagedSnapshot({ faultHook: (s: StagedStep) => at[s.name]?.() });
}

function leftovers(root: string, journalDir: string): string[] {
  const staging = join(root, ".git", "asp-staging");
  return [
    ...(existsSync(staging) ? readdirSync(staging) : []),
    ...(existsSync(journalDir) ? readdirSync(journalDir) : []),
  ];
}

describe("stage", () => {
  describe("when the writes are a valid plan", () => {
    it("H6.7 host §6: publishes exactly B', reports staged_snapshot and leaves no staging folder or journal", async () => {
      const { root, journalDir } = await setup();
      const B2 = await expectedTree(root, crashPlan());
      const result = await createStagedSnapshot().stage({ root, journalDir, writes: crashPlan() });
      expect(result).toEqual({ applied: true, guarantee: "staged_snapshot" });
      expect(await treeId(root)).toBe(B2);
      expect(leftovers(root, journalDir)).toEqual([]);
    });

    it("sets 100755 when asked, keeps an executable's mode on a modify, and gives new files 100644", async () => {
      const { root, journalDir } = await setup();
      await createStagedSnapshot().stage({ root, journalDir, writes: crashPlan() });
      const mode = (p: string) => statSync(join(root, p)).mode & 0o777;
      expect(mode("bin/run.sh")).toBe(0o755);
      expect(mode("bin/tool")).toBe(0o755);
      expect(mode("src/n00.ts")).toBe(0o644);
      expect(mode("src/d07.ts/inner.ts")).toBe(0o644);
      expect(existsSync(join(root, "gone"))).toBe(false);
    });

    it("stages under .git/asp-staging, which the host's worktree snapshot never sees", async () => {
      const { root, journalDir, B } = await setup();
      // The hook is synchronous, like stage: copy the worktree as it is at that step, snapshot the copy later.
      const atStaged = join(tempDir("asp-staged-copy-"), "repo");
      let staged: string[] = [];
      await withHook({
        "stage:synced": () => {
          staged = readdirSync(join(root, ".git", "asp-staging"));
          cpSync(root, atStaged, { recursive: true, verbatimSymlinks: true });
        },
      }).stage({ root, journalDir, writes: crashPlan() });
      expect(staged).toHaveLength(1);
      expect(readdirSync(join(atStaged, ".git", "asp-staging", staged[0] as string, "new"))).toHaveLength(40);
      expect(await treeId(atStaged)).toBe(B);
    });

    it("stages in a sibling folder when .git is not a folder (a linked worktree or no repository)", async () => {
      const root = join(tempDir("asp-staged-plain-"), "tree");
      mkdirSync(root);
      writeFiles(root, new Map([["a.txt", ["a\n", false]]]));
      writeFileSync(join(root, ".git"), "gitdir: /elsewhere\n");
      const journalDir = join(tempDir("asp-staged-journal-"), "journal");
      let siblings: string[] = [];
      await createStagedSnapshot({
        faultHook: (s) => {
          if (s.name === "stage:synced") siblings = readdirSync(dirname(root));
        },
      }).stage({ root, journalDir, writes: [{ path: "b/c.txt", content: text("c\n") }] });
      expect(siblings.sort()).toEqual([`.asp-staging.${basename(root)}`, "tree"]);
      expect(readdirSync(root).sort()).toEqual([".git", "a.txt", "b"]);
      expect(readdirSync(join(dirname(root), `.asp-staging.${basename(root)}`))).toEqual([]);
    });

    it("claims no more than rollback_attempted without a journal folder (a crash could not be recovered)", async () => {
      const { root } = await setup();
      const result = await createStagedSnapshot().stage({ root, writes: [{ path: "x.txt", content: text("x") }] });
      expect(result).toMatchObject({ applied: true, guarantee: "rollback_attempted" });
    });
  });

  describe("when a path would leave the root (the attack)", () => {
    it.each([
      ["an absolute path", "/tmp/asp-staged-pwned"],
      ["a parent segment", "../outside.txt"],
      ["a parent segment inside", "src/../../outside.txt"],
      ["the .git folder", ".git/hooks/pre-commit"],
      ["the .git folder in another case", "src/.GIT/config"],
      ["a dot segment", "src/./m00.ts"],
      ["an empty segment", "src//m00.ts"],
      ["an empty path", ""],
    ])("refuses %s ASP_STAGED_PATH_ESCAPE and writes nothing", async (_why, path) => {
      const { root, journalDir, B } = await setup();
      const writes: Writes = [
        { path: "src/m00.ts", content: text("changed\n") },
        { path, content: text("#!/bin/sh\necho pwned\n"), mode: "100755" },
      ];
      await expect(createStagedSnapshot().stage({ root, journalDir, writes })).rejects.toThrowWithCode(
        "ASP_STAGED_PATH_ESCAPE",
      );
      expect(await treeId(root)).toBe(B);
      expect(leftovers(root, journalDir)).toEqual([]);
      expect(existsSync(join(dirname(root), "outside.txt"))).toBe(false);
    });

    it("refuses a write or delete through a symlinked folder on disk ASP_STAGED_PATH_ESCAPE", async () => {
      const { root, journalDir, B } = await setup();
      const outside = tempDir("asp-staged-outside-");
      writeFileSync(join(outside, "victim.txt"), "keep me\n");
      symlinkSync(outside, join(root, "link"));
      const B1 = await treeId(root);
      expect(B1).not.toBe(B);
      for (const w of [
        { path: "link/pwned.txt", content: text("pwned\n") },
        { path: "link/victim.txt", content: null },
      ]) {
        await expect(createStagedSnapshot().stage({ root, journalDir, writes: [w] })).rejects.toThrowWithCode(
          "ASP_STAGED_PATH_ESCAPE",
        );
      }
      expect(readdirSync(outside)).toEqual(["victim.txt"]);
      expect(await treeId(root)).toBe(B1);
    });

    it("H6.7 host §6: a folder swapped for a symlink after the check is refused at publish, nothing lands outside", async () => {
      const { root, journalDir } = await setup();
      const outside = tempDir("asp-staged-outside-");
      const sandbox = withHook({
        "journal:committed": () => {
          renameSync(join(root, "keep"), join(root, "keep.moved"));
          symlinkSync(outside, join(root, "keep"));
        },
      });
      const result = await sandbox.stage({
        root,
        journalDir,
        writes: [{ path: "keep/k00.txt", content: text("x\n") }],
      });
      expect(result).toMatchObject({ applied: false, guarantee: "none" });
      expect(readdirSync(outside)).toEqual([]);
      await expect(createStagedSnapshot().recover({ root, journalDir })).rejects.toThrowWithCode(
        "ASP_STAGED_PATH_ESCAPE",
      );
      expect(readdirSync(outside)).toEqual([]);
    });
  });

  describe("when the worktree does not have the shape the writes assume", () => {
    it.each<[string, Writes, string]>([
      ["a write onto a folder", [{ path: "src", content: text("x") }], "ASP_STAGED_PATH_CONFLICT"],
      ["a write under a file", [{ path: "README.md/x", content: text("x") }], "ASP_STAGED_PATH_CONFLICT"],
      ["a delete of a missing file", [{ path: "nope.txt", content: null }], "ASP_STAGED_PATH_CONFLICT"],
      ["a delete of a folder", [{ path: "keep", content: null }], "ASP_STAGED_PATH_CONFLICT"],
      [
        "a file and a path under it",
        [
          { path: "n", content: text("x") },
          { path: "n/m", content: text("y") },
        ],
        "ASP_STAGED_PATH_CONFLICT",
      ],
      [
        "a path given twice",
        [
          { path: "a", content: text("x") },
          { path: "a", content: null },
        ],
        "ASP_STAGED_BAD_REQUEST",
      ],
      ["a delete with a mode", [{ path: "README.md", content: null, mode: "100755" }], "ASP_STAGED_BAD_REQUEST"],
      [
        "an unknown mode",
        [{ path: "a", content: text("x"), mode: "120000" as unknown as "100644" }],
        "ASP_STAGED_BAD_REQUEST",
      ],
      ["content that is not bytes", [{ path: "a", content: "x" as unknown as Uint8Array }], "ASP_STAGED_BAD_REQUEST"],
    ])("refuses %s with its code and writes nothing", async (_why, writes, code) => {
      const { root, journalDir, B } = await setup();
      await expect(createStagedSnapshot().stage({ root, journalDir, writes })).rejects.toThrowWithCode(code);
      expect(await treeId(root)).toBe(B);
      expect(leftovers(root, journalDir)).toEqual([]);
    });

    it("refuses a journal folder inside the worktree ASP_STAGED_BAD_REQUEST (the snapshot would see it)", async () => {
      const { root, B } = await setup();
      const writes = [{ path: "x.txt", content: text("x") }];
      for (const journalDir of [join(root, ".asp-journal"), root, "relative/journal"]) {
        await expect(createStagedSnapshot().stage({ root, journalDir, writes })).rejects.toThrowWithCode(
          "ASP_STAGED_BAD_REQUEST",
        );
      }
      expect(await treeId(root)).toBe(B);
      expect(existsSync(join(root, ".asp-journal"))).toBe(false);
    });

    it("refuses a relative root ASP_STAGED_BAD_REQUEST", async () => {
      await expect(createStagedSnapshot().stage({ root: "repo", writes: [] })).rejects.toThrowWithCode(
        "ASP_STAGED_BAD_REQUEST",
      );
    });
  });

  describe("when something fails", () => {
    it("H6.7 host §6: before the commit point it rolls back: applied false, staged_snapshot, the worktree at B", async () => {
      const { root, journalDir, B } = await setup();
      const sandbox = withHook({
        "stage:15": () => {
          throw Object.assign(new Error("disk full"), { code: "ENOSPC" });
        },
      });
      const result = await sandbox.stage({ root, journalDir, writes: crashPlan() });
      expect(result).toMatchObject({ applied: false, guarantee: "staged_snapshot" });
      expect(await treeId(root)).toBe(B);
      expect(leftovers(root, journalDir)).toEqual([]);
    });

    it("an abort before the commit point rolls back to B", async () => {
      const { root, journalDir, B } = await setup();
      const abort = new AbortController();
      const sandbox = withHook({ "stage:13": () => abort.abort() });
      const result = await sandbox.stage({ root, journalDir, writes: crashPlan(), signal: abort.signal });
      expect(result).toMatchObject({ applied: false, guarantee: "staged_snapshot" });
      expect(await treeId(root)).toBe(B);
      expect(leftovers(root, journalDir)).toEqual([]);
    });

    it("H6.7 host §6: after the commit point it claims nothing, keeps the journal, refuses a new stage until recover() rolls forward to B'", async () => {
      const { root, journalDir } = await setup();
      const B2 = await expectedTree(root, crashPlan());
      const sandbox = withHook({
        "publish:7": () => {
          throw Object.assign(new Error("I/O error"), { code: "EIO" });
        },
      });
      const result = await sandbox.stage({ root, journalDir, writes: crashPlan() });
      expect(result).toMatchObject({ applied: false, guarantee: "none" });
      await expect(
        createStagedSnapshot().stage({ root, journalDir, writes: [{ path: "z", content: text("z") }] }),
      ).rejects.toThrowWithCode("ASP_STAGED_PENDING_JOURNAL");
      expect(await createStagedSnapshot().recover({ root, journalDir })).toMatchObject({ outcome: "rolled_forward" });
      expect(await treeId(root)).toBe(B2);
      expect(leftovers(root, journalDir)).toEqual([]);
    });
  });
});
