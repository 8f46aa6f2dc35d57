import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createStagedSnapshot, JOURNAL_FILE } from "../src/index.js";
import { crashPlan } from "./fixtures/plan.js";
import { makeRepo, removeScratch, tempDir, treeId } from "./helpers.js";

afterAll(removeScratch, 30_000);

/**
 * A repository with an apply stopped right after its commit point (the fault hook throws there,
 * as a crash would stop it), and that committed journal's text.
 */
async function committedApply() {
  const root = makeRepo();
  const journalDir = join(tempDir("asp-staged-journal-"), "journal");
  const B = await treeId(root);
  let journal = "";
  const sandbox = createStagedSnapshot({
    faultHook: (s) => {
      if (s.name === "journal:committed") journal = readFileSync(join(journalDir, JOURNAL_FILE), "utf8");
      if (s.name === "publish:1") throw new Error("stop");
    },
  });
  await sandbox.stage({ root, journalDir, writes: crashPlan() });
  return { root, journalDir, B, journal: JSON.parse(journal) as Record<string, unknown> };
}

describe("recover", () => {
  describe("when there is no journal", () => {
    it("answers none for a missing or empty journal folder, removing drafts a crash left", async () => {
      const root = makeRepo();
      const dir = join(tempDir("asp-staged-journal-"), "journal");
      expect(await createStagedSnapshot().recover({ root, journalDir: dir })).toEqual({ outcome: "none" });
      mkdirSync(dir);
      writeFileSync(join(dir, `${JOURNAL_FILE}.tmp-0123-prepared`), "{");
      expect(await createStagedSnapshot().recover({ root, journalDir: dir })).toEqual({ outcome: "none" });
      expect(readdirSync(dir)).toEqual([]);
    });
  });

  describe("when the journal is not one this plugin wrote for this root", () => {
    it.each<[string, (j: Record<string, unknown>) => unknown]>([
      ["another root", (j) => ({ ...j, root: "/etc" })],
      ["a staging folder elsewhere", (j) => ({ ...j, staging: "/tmp/asp-staged-evil" })],
      [
        "a step path with ..",
        (j) => ({
          ...j,
          steps: (j.steps as Array<Record<string, unknown>>).map((s, i) => (i === 0 ? { ...s, path: "../x" } : s)),
        }),
      ],
      [
        "a step path into .git",
        (j) => ({
          ...j,
          steps: (j.steps as Array<Record<string, unknown>>).map((s, i) =>
            i === 0 ? { ...s, path: ".git/config" } : s,
          ),
        }),
      ],
      [
        "a staging name it never writes",
        (j) => ({
          ...j,
          steps: (j.steps as Array<Record<string, unknown>>).map((s, i) => (i === 0 ? { ...s, away: "../../x" } : s)),
        }),
      ],
      ["an unknown format", (j) => ({ ...j, format: "asp.staged-snapshot.journal/v9" })],
      ["an unknown state", (j) => ({ ...j, state: "maybe" })],
      ["an extra field", (j) => ({ ...j, decision: "allow" })],
      ["not JSON", () => "{not json"],
    ])("refuses %s ASP_STAGED_JOURNAL_INVALID and touches nothing", async (_why, forge) => {
      const { root, journalDir, journal } = await committedApply();
      const before = await treeId(root);
      const forged = forge(journal);
      writeFileSync(join(journalDir, JOURNAL_FILE), typeof forged === "string" ? forged : JSON.stringify(forged));
      await expect(createStagedSnapshot().recover({ root, journalDir })).rejects.toThrowWithCode(
        "ASP_STAGED_JOURNAL_INVALID",
      );
      expect(await treeId(root)).toBe(before);
      expect(existsSync(join(journalDir, JOURNAL_FILE))).toBe(true);
    });

    it("refuses a journal handed another repository's root ASP_STAGED_JOURNAL_INVALID", async () => {
      const { journalDir } = await committedApply();
      const other = makeRepo();
      const before = await treeId(other);
      await expect(createStagedSnapshot().recover({ root: other, journalDir })).rejects.toThrowWithCode(
        "ASP_STAGED_JOURNAL_INVALID",
      );
      expect(await treeId(other)).toBe(before);
    });
  });

  describe("when the journal is valid", () => {
    it("H6.7 host §6: a committed journal is rolled forward; the same journal copied and recovered again changes nothing", async () => {
      const { root, journalDir, B } = await committedApply();
      const saved = join(tempDir("asp-staged-saved-"), "journal");
      cpSync(journalDir, saved, { recursive: true });
      expect(await createStagedSnapshot().recover({ root, journalDir })).toMatchObject({ outcome: "rolled_forward" });
      const B2 = await treeId(root);
      expect(B2).not.toBe(B);
      // Replaying the journal once more (a crash just before it was removed) is idempotent.
      cpSync(saved, journalDir, { recursive: true });
      expect(await createStagedSnapshot().recover({ root, journalDir })).toMatchObject({ outcome: "rolled_forward" });
      expect(await treeId(root)).toBe(B2);
    });
  });
});
