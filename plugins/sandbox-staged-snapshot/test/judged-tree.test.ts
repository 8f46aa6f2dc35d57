import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createStagedSnapshot, type StagedStep } from "../src/index.js";
import { makeRepo, removeScratch, tempDir } from "./helpers.js";

// Issue 32 hole 5 (THREAT-MODEL inv. 6, 11): the sandbox publishes only paths whose state on disk is
// what the host judged (`before`), and never a `.git` component at any depth, however spelled.

afterAll(removeScratch, 30_000);

const text = (s: string) => new TextEncoder().encode(s);
const digest = (s: string) => `sha256:${createHash("sha256").update(s).digest("hex")}`;

function setup() {
  const root = makeRepo(new Map([["README.md", ["# demo\n", false]]]));
  writeFileSync(join(root, ".env"), "SECRET=the-real-one\n"); // ignored, so absent in the judged tree
  return { root, journalDir: join(tempDir("asp-staged-journal-"), "journal") };
}

describe("stage with preconditions", () => {
  it("issue 32 hole 5: a write whose before is absent, over a file on disk, is refused ASP_STAGED_PRECONDITION_FAILED", async () => {
    const { root, journalDir } = setup();
    const stage = createStagedSnapshot().stage({
      root,
      journalDir,
      writes: [{ path: ".env", content: text("SECRET=overwritten\n"), before: null }],
    });
    await expect(stage).rejects.toMatchObject({ code: "ASP_STAGED_PRECONDITION_FAILED" });
    expect(readFileSync(join(root, ".env"), "utf8")).toBe("SECRET=the-real-one\n");
    expect(existsSync(join(journalDir, "asp-staged-journal.json"))).toBe(false);
  });

  it("issue 32 hole 5: a file that appears after the plan, while staging, is never replaced (re-checked before the commit point)", async () => {
    const { root, journalDir } = setup();
    const sandbox = createStagedSnapshot({
      faultHook: (s: StagedStep) => {
        if (s.name === "stage:synced") writeFileSync(join(root, "new.txt"), "written meanwhile\n");
      },
    });
    const stage = sandbox.stage({
      root,
      journalDir,
      writes: [{ path: "new.txt", content: text("x\n"), before: null }],
    });
    await expect(stage).rejects.toMatchObject({ code: "ASP_STAGED_PRECONDITION_FAILED" });
    expect(readFileSync(join(root, "new.txt"), "utf8")).toBe("written meanwhile\n");
    expect(existsSync(join(journalDir, "asp-staged-journal.json"))).toBe(false);
  });

  it("issue 32 hole 5: a write whose before matches the disk is published", async () => {
    const { root, journalDir } = setup();
    const result = await createStagedSnapshot().stage({
      root,
      journalDir,
      writes: [
        { path: "README.md", content: text("# changed\n"), before: { digest: digest("# demo\n"), mode: "100644" } },
        { path: "src/b.ts", content: text("b\n"), before: null },
      ],
    });
    expect(result).toEqual({ applied: true, guarantee: "staged_snapshot" });
    expect(readFileSync(join(root, "README.md"), "utf8")).toBe("# changed\n");
  });

  it.each([
    "vendor/lib/.git/hooks/post-checkout",
    "vendor/.GIT/config",
    "vendor/\uff0egit/config",
    "vendor/.g\u200cit/config",
    "vendor/.git. /config",
    "vendor/git~1/config",
    "vendor/.git::$INDEX_ALLOCATION/config",
  ])("issue 32 hole 5: %j is refused ASP_STAGED_PATH_ESCAPE", async (path) => {
    const { root, journalDir } = setup();
    const stage = createStagedSnapshot().stage({ root, journalDir, writes: [{ path, content: text("x\n") }] });
    await expect(stage).rejects.toMatchObject({ code: "ASP_STAGED_PATH_ESCAPE" });
    expect(existsSync(join(root, "vendor"))).toBe(false);
  });
});
