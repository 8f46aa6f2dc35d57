import { execFileSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { StageRequest } from "@asp/contracts";
import { snapshotWorktree } from "@asp/evidence";
import { unlinkIfPresent } from "../src/fsx.js";
import { baseFiles } from "./fixtures/plan.js";

let scratch: string | undefined;

/** A fresh folder under this test file's scratch folder (removed by {@link removeScratch}). */
export function tempDir(prefix = "asp-staged-"): string {
  scratch ??= mkdtempSync(join(tmpdir(), "asp-staged-test-"));
  return mkdtempSync(join(scratch, prefix));
}

/** Remove every folder {@link tempDir} made. */
export function removeScratch(): void {
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  scratch = undefined;
}

/** Write `files` (path -> [content, executable]) under `root`. */
export function writeFiles(root: string, files: Map<string, [string, boolean]>): void {
  for (const [path, [content, exec]] of files) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
    chmodSync(join(root, path), exec ? 0o755 : 0o644);
  }
}

/** A real git repository at B (the plan's base files, or `files`), in a fresh temp folder. */
export function makeRepo(files: Map<string, [string, boolean]> = baseFiles()): string {
  const root = join(tempDir("asp-staged-repo-"), "repo");
  mkdirSync(root);
  writeFiles(root, files);
  // No template: no sample hooks to copy on every clone.
  execFileSync("git", ["init", "-q", "--template=", root]);
  return root;
}

/** A copy of a repository (worktree and .git) in a fresh temp folder. */
export function cloneRepo(template: string): string {
  const root = join(tempDir("asp-staged-run-"), "repo");
  cpSync(template, root, { recursive: true, verbatimSymlinks: true });
  return root;
}

/**
 * The worktree's tree id as the host's own snapshot computes it (`@asp/evidence`, git-compatible:
 * never enters `.git`, keeps the executable bit, leaves out empty folders).
 */
export async function treeId(root: string): Promise<string> {
  return (await snapshotWorktree(root)).tree;
}

/** The oracle for B': the writes applied with plain fs calls to a copy, independently of the plugin. */
export async function expectedTree(template: string, writes: StageRequest["writes"]): Promise<string> {
  const root = cloneRepo(template);
  for (const w of writes) if (w.content === null) unlinkIfPresent(join(root, w.path));
  for (const w of writes) {
    if (w.content === null) continue;
    mkdirSync(dirname(join(root, w.path)), { recursive: true });
    writeFileSync(join(root, w.path), w.content);
    if (w.mode !== undefined) chmodSync(join(root, w.path), w.mode === "100755" ? 0o755 : 0o644);
  }
  return treeId(root);
}
