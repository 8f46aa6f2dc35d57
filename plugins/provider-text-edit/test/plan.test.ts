import { validateEditPlan } from "@asp/contracts";
import { blobDigest, type Files, MemoryRepo } from "@asp/sdk/testing";
import { describe, expect, it } from "vitest";
import {
  type BaselineReader,
  createBaselineReader,
  type EditIntent,
  type PlannedEdit,
  parseIntent,
  planEdit,
  runSearchReplace,
} from "../src/index.js";

const FILES: Files = {
  "README.md": "# demo\n",
  "src/a.ts": "export const a = 1;\nexport const b = 2;\n",
  "src/dup.ts": "x = 1;\nx = 1;\n",
  "src/util/c.ts": "export function c() {\n  return 3;\n}\n",
  "assets/logo.bin": new Uint8Array([0x89, 0x50, 0x00, 0xff]),
};
const digest = (path: string) => blobDigest(FILES[path] as string | Uint8Array);

/** An in-memory baseline (with one symlink `link -> src`), counting blob reads. */
function baseline(): { reader: BaselineReader; blobReads: string[]; root: string } {
  const repo = new MemoryRepo();
  const root = repo.tree({ ...FILES, link: { content: "src", mode: "120000" } });
  const blobReads: string[] = [];
  const reader = createBaselineReader(root, {
    readTree: async (d) => repo.readTree(d),
    readBlob: async (d) => {
      const bytes = repo.readBlob(d);
      blobReads.push(d);
      return bytes;
    },
  });
  return { reader, blobReads, root };
}

/** The plan as the SDK sends it, checked against the contracts schema. */
function asEditPlan(root: string, p: PlannedEdit) {
  const plan = {
    proposalId: "p-1",
    provider: { id: "asp.provider-text-edit", version: "0.1.0" },
    validAsOf: { baseline: root, changeset: null, reads: [] },
    description: p.description,
    preconditions: p.preconditions,
    operations: p.operations,
  };
  const r = validateEditPlan(plan);
  expect(r.ok ? [] : r.errors).toEqual([]);
  return plan;
}

async function plan(intent: EditIntent) {
  const b = baseline();
  const p = await planEdit(intent, b.reader);
  return { ...b, plan: asEditPlan(b.root, p) };
}

describe("planEdit", () => {
  describe("when each operation kind is asked for", () => {
    it("replace: exact text, the file's baseline blob as precondition", async () => {
      const { plan: p, blobReads } = await plan({
        kind: "replace",
        arguments: { path: "src/a.ts", oldText: "const a = 1", newText: "const a = 10" },
      });
      expect(p.preconditions).toEqual([{ path: "src/a.ts", blob: digest("src/a.ts") }]);
      expect(p.operations).toEqual([
        { op: "replace", path: "src/a.ts", oldText: "const a = 1", newText: "const a = 10" },
      ]);
      expect(blobReads).toEqual([digest("src/a.ts")]);
    });
    it("replace with occurrence: picks one of several matches", async () => {
      const { plan: p } = await plan({
        kind: "replace",
        arguments: { path: "src/dup.ts", oldText: "x = 1", newText: "x = 2", occurrence: 2 },
      });
      expect(p.operations[0]).toMatchObject({ occurrence: 2 });
    });
    it("multi_replace: several unique, non-overlapping edits in one file", async () => {
      const { plan: p } = await plan({
        kind: "multi_replace",
        arguments: {
          path: "src/a.ts",
          edits: [
            { oldText: "a = 1", newText: "a = 11" },
            { oldText: "b = 2", newText: "b = 22" },
          ],
        },
      });
      expect(p.preconditions).toEqual([{ path: "src/a.ts", blob: digest("src/a.ts") }]);
      expect(p.operations[0]?.op).toBe("multi_replace");
    });
    it("search_replace: a validated regex with flags", async () => {
      const { plan: p } = await plan({
        kind: "search_replace",
        arguments: { path: "src/a.ts", pattern: "const (\\w+) =", flags: "g", replacement: "let $1 =" },
      });
      expect(p.operations).toEqual([
        { op: "search_replace", path: "src/a.ts", pattern: "const (\\w+) =", flags: "g", replacement: "let $1 =" },
      ]);
    });
    it("create: precondition absent, without reading any blob", async () => {
      const { plan: p, blobReads } = await plan({
        kind: "create",
        arguments: { path: "src/new/d.ts", content: "export const d = 4;\n", mode: "100644" },
      });
      expect(p.preconditions).toEqual([{ path: "src/new/d.ts", blob: "absent" }]);
      expect(blobReads).toEqual([]);
    });
    it("create with base64 content", async () => {
      const { plan: p } = await plan({
        kind: "create",
        arguments: { path: "assets/x.bin", content: "AAEC", encoding: "base64" },
      });
      expect(p.operations[0]).toMatchObject({ encoding: "base64" });
    });
    it("rename: the source's blob and the target's absence, without reading content", async () => {
      const { plan: p, blobReads } = await plan({ kind: "rename", arguments: { from: "src/a.ts", to: "src/b.ts" } });
      expect(p.preconditions).toEqual([
        { path: "src/a.ts", blob: digest("src/a.ts") },
        { path: "src/b.ts", blob: "absent" },
      ]);
      expect(blobReads).toEqual([]);
    });
    it("delete: the file's blob", async () => {
      const { plan: p } = await plan({ kind: "delete", arguments: { path: "README.md" } });
      expect(p.preconditions).toEqual([{ path: "README.md", blob: digest("README.md") }]);
      expect(p.operations).toEqual([{ op: "delete", path: "README.md" }]);
    });
    it("plan: operations in order, later ones seeing earlier ones, one precondition per path", async () => {
      const { plan: p } = await plan({
        kind: "plan",
        description: "move c and adjust it",
        arguments: {
          operations: [
            { op: "rename", from: "src/util/c.ts", to: "src/c.ts" },
            { op: "replace", path: "src/c.ts", oldText: "return 3", newText: "return 30" },
            { op: "create", path: "src/util/index.ts", content: "export * from '../c.js';\n" },
            { op: "replace", path: "src/util/index.ts", oldText: "'../c.js'", newText: '"../c.js"' },
            { op: "delete", path: "src/dup.ts" },
          ],
        },
      });
      expect(p.description).toBe("move c and adjust it");
      expect(p.preconditions).toEqual([
        { path: "src/util/c.ts", blob: digest("src/util/c.ts") },
        { path: "src/c.ts", blob: "absent" },
        { path: "src/util/index.ts", blob: "absent" },
        { path: "src/dup.ts", blob: digest("src/dup.ts") },
      ]);
      expect(p.operations).toHaveLength(5);
    });
    it("describes the plan when the intent gives no description", async () => {
      const { plan: p } = await plan({ kind: "delete", arguments: { path: "README.md" } });
      expect(p.description).toBe("delete README.md");
    });
  });

  describe("when the intent must be refused", () => {
    const replace = (args: Record<string, unknown>): EditIntent => ({
      kind: "replace",
      arguments: { path: "src/a.ts", oldText: "const a = 1", newText: "x", ...args },
    });
    it.each<[string, EditIntent, string]>([
      ["an unknown intent kind", { kind: "format" }, "ASP_TEXT_EDIT_UNKNOWN_INTENT"],
      ["no arguments", { kind: "replace" }, "ASP_TEXT_EDIT_BAD_INTENT"],
      ["an unknown argument", replace({ shell: "sed -i s/a/b/ src/a.ts" }), "ASP_TEXT_EDIT_BAD_INTENT"],
      ["an empty oldText", replace({ oldText: "" }), "ASP_TEXT_EDIT_BAD_INTENT"],
      ["occurrence 0", replace({ occurrence: 0 }), "ASP_TEXT_EDIT_BAD_INTENT"],
      ["a path with ..", replace({ path: "../outside.ts" }), "ASP_TEXT_EDIT_PATH_ESCAPES"],
      ["a path with .. inside", replace({ path: "src/../../etc/passwd" }), "ASP_TEXT_EDIT_PATH_ESCAPES"],
      ["an absolute path", replace({ path: "/etc/passwd" }), "ASP_TEXT_EDIT_PATH_ESCAPES"],
      ["a backslash path", replace({ path: "src\\a.ts" }), "ASP_TEXT_EDIT_PATH_ESCAPES"],
      ["a ./ path", replace({ path: "./src/a.ts" }), "ASP_TEXT_EDIT_PATH_ESCAPES"],
      ["an empty segment", replace({ path: "src//a.ts" }), "ASP_TEXT_EDIT_PATH_ESCAPES"],
      ["a path through a symlink", replace({ path: "link/a.ts" }), "ASP_TEXT_EDIT_PATH_ESCAPES"],
      [
        "a path into .git",
        { kind: "create", arguments: { path: ".git/hooks/pre-commit", content: "x" } },
        "ASP_TEXT_EDIT_PROTECTED_PATH",
      ],
      ["a path into .asp", { kind: "delete", arguments: { path: ".asp/store" } }, "ASP_TEXT_EDIT_PROTECTED_PATH"],
      ["oldText not found", replace({ oldText: "const z" }), "ASP_TEXT_EDIT_TEXT_NOT_FOUND"],
      ["an ambiguous oldText", replace({ path: "src/dup.ts", oldText: "x = 1" }), "ASP_TEXT_EDIT_AMBIGUOUS"],
      [
        "an occurrence past the last",
        replace({ path: "src/dup.ts", oldText: "x = 1", occurrence: 3 }),
        "ASP_TEXT_EDIT_TEXT_NOT_FOUND",
      ],
      ["an edit that changes nothing", replace({ newText: "const a = 1" }), "ASP_TEXT_EDIT_NO_CHANGE"],
      ["a replace in a missing file", replace({ path: "src/none.ts" }), "ASP_TEXT_EDIT_NO_SUCH_PATH"],
      ["a replace in a directory", replace({ path: "src/util" }), "ASP_TEXT_EDIT_NOT_A_FILE"],
      ["a replace in a symlink", replace({ path: "link" }), "ASP_TEXT_EDIT_NOT_A_FILE"],
      ["a replace in binary content", replace({ path: "assets/logo.bin" }), "ASP_TEXT_EDIT_NOT_A_FILE"],
      [
        "an ambiguous multi_replace edit",
        { kind: "multi_replace", arguments: { path: "src/dup.ts", edits: [{ oldText: "x = 1", newText: "y" }] } },
        "ASP_TEXT_EDIT_AMBIGUOUS",
      ],
      [
        "overlapping multi_replace edits",
        {
          kind: "multi_replace",
          arguments: {
            path: "src/a.ts",
            edits: [
              { oldText: "const a = 1", newText: "x" },
              { oldText: "a = 1;", newText: "y" },
            ],
          },
        },
        "ASP_TEXT_EDIT_OVERLAP",
      ],
      [
        "a regex that does not compile",
        { kind: "search_replace", arguments: { path: "src/a.ts", pattern: "(", replacement: "" } },
        "ASP_TEXT_EDIT_BAD_REGEX",
      ],
      [
        "unknown regex flags",
        { kind: "search_replace", arguments: { path: "src/a.ts", pattern: "a", flags: "gx", replacement: "" } },
        "ASP_TEXT_EDIT_BAD_REGEX",
      ],
      [
        "a regex with no match",
        { kind: "search_replace", arguments: { path: "src/a.ts", pattern: "zzz", replacement: "" } },
        "ASP_TEXT_EDIT_TEXT_NOT_FOUND",
      ],
      [
        "a create over an existing file",
        { kind: "create", arguments: { path: "README.md", content: "x" } },
        "ASP_TEXT_EDIT_EXISTS",
      ],
      [
        "a create over a directory",
        { kind: "create", arguments: { path: "src/util", content: "x" } },
        "ASP_TEXT_EDIT_EXISTS",
      ],
      [
        "a create under a file",
        { kind: "create", arguments: { path: "README.md/x", content: "x" } },
        "ASP_TEXT_EDIT_EXISTS",
      ],
      [
        "a create with non-canonical base64",
        { kind: "create", arguments: { path: "x.bin", content: "not base64!", encoding: "base64" } },
        "ASP_TEXT_EDIT_BAD_INTENT",
      ],
      [
        "a rename onto an existing path",
        { kind: "rename", arguments: { from: "src/a.ts", to: "README.md" } },
        "ASP_TEXT_EDIT_EXISTS",
      ],
      [
        "a rename of a missing file",
        { kind: "rename", arguments: { from: "nope.ts", to: "b.ts" } },
        "ASP_TEXT_EDIT_NO_SUCH_PATH",
      ],
      [
        "a rename of a directory",
        { kind: "rename", arguments: { from: "src/util", to: "lib" } },
        "ASP_TEXT_EDIT_NOT_A_FILE",
      ],
      [
        "a rename onto itself",
        { kind: "rename", arguments: { from: "src/a.ts", to: "src/a.ts" } },
        "ASP_TEXT_EDIT_BAD_INTENT",
      ],
      ["a delete of a missing file", { kind: "delete", arguments: { path: "nope.ts" } }, "ASP_TEXT_EDIT_NO_SUCH_PATH"],
      ["a delete of a directory", { kind: "delete", arguments: { path: "src" } }, "ASP_TEXT_EDIT_NOT_A_FILE"],
      ["an empty plan", { kind: "plan", arguments: { operations: [] } }, "ASP_TEXT_EDIT_BAD_INTENT"],
      [
        "a plan with a nested plan",
        { kind: "plan", arguments: { operations: [{ op: "plan" }] } },
        "ASP_TEXT_EDIT_BAD_INTENT",
      ],
      [
        "a plan with a shell command",
        { kind: "plan", arguments: { operations: [{ op: "exec", argv: ["rm", "-rf", "."] }] } },
        "ASP_TEXT_EDIT_UNKNOWN_INTENT",
      ],
      [
        "a plan that creates a file twice",
        {
          kind: "plan",
          arguments: {
            operations: [
              { op: "create", path: "n.ts", content: "1" },
              { op: "create", path: "n.ts", content: "2" },
            ],
          },
        },
        "ASP_TEXT_EDIT_EXISTS",
      ],
      [
        "a plan that edits a file it deleted",
        {
          kind: "plan",
          arguments: {
            operations: [
              { op: "delete", path: "src/a.ts" },
              { op: "replace", path: "src/a.ts", oldText: "a", newText: "b" },
            ],
          },
        },
        "ASP_TEXT_EDIT_NO_SUCH_PATH",
      ],
    ])("refuses %s", async (_why, intent, code) => {
      await expect(planEdit(intent, baseline().reader)).rejects.toThrowWithCode(code);
    });

    it("refuses a catastrophic regex within its time budget instead of hanging", async () => {
      const repo = new MemoryRepo();
      const root = repo.tree({ "big.txt": `${"a".repeat(40)}b` });
      const reader = createBaselineReader(root, {
        readTree: async (d) => repo.readTree(d),
        readBlob: async (d) => repo.readBlob(d),
      });
      const started = performance.now();
      await expect(
        planEdit(
          { kind: "search_replace", arguments: { path: "big.txt", pattern: "^(a+)+$", replacement: "" } },
          reader,
          { regex: { timeoutMs: 100 } },
        ),
      ).rejects.toThrowWithCode("ASP_TEXT_EDIT_REGEX_BUDGET");
      expect(performance.now() - started).toBeLessThan(5000);
    });

    it("names the refused operation of a plan, keeping the code", async () => {
      const error = await planEdit(
        {
          kind: "plan",
          arguments: {
            operations: [
              { op: "delete", path: "README.md" },
              { op: "delete", path: "gone" },
            ],
          },
        },
        baseline().reader,
      ).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "ASP_TEXT_EDIT_NO_SUCH_PATH", data: { operation: 1 } });
    });
  });
});

describe("parseIntent", () => {
  it("drops nothing and adds nothing: operations are exactly what was asked", () => {
    expect(parseIntent({ kind: "create", arguments: { path: "a", content: "" } })).toEqual([
      { op: "create", path: "a", content: "" },
    ]);
  });
});

describe("runSearchReplace", () => {
  it("has String.prototype.replace semantics (first match without g, $ substitutions)", () => {
    expect(runSearchReplace("a1 a2", "a(\\d)", "", "b$1")).toEqual({ matches: 1, output: "b1 a2" });
    expect(runSearchReplace("a1 a2", "a(\\d)", "g", "b$1")).toEqual({ matches: 2, output: "b1 b2" });
    expect(runSearchReplace("x\ny", "^", "gm", "// ")).toEqual({ matches: 2, output: "// x\n// y" });
  });
  it("refuses more matches than its budget", () => {
    expect(() => runSearchReplace("aaaa", "a", "g", "b", { maxMatches: 3 })).toThrowWithCode(
      "ASP_TEXT_EDIT_REGEX_BUDGET",
    );
  });
});
