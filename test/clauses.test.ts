import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  checkClauses,
  checkRepository,
  clauseIds,
  findTestFiles,
  REGISTER_DIR,
  summaryLine,
  testTitles,
} from "../scripts/clauses.mjs";
import { ROOT } from "./lib/workspace.js";

// The clause register (docs/contracts/) stays true: every `tested` clause is named by a test,
// every id a test names exists, no id twice, no dead link. Format: docs/contracts/README.md.

const HEADER = "| id | requirement | status | code | tests |\n|---|---|---|---|---|\n";
const register = (rows: string, path = "docs/contracts/x.md") => ({ path, text: `# x\n\n${HEADER}${rows}` });
const testFile = (text: string, path = "packages/a/test/a.test.ts") => ({ path, text });
const always = () => true;

// Parsing every test file takes a few seconds on a loaded machine: do it once.
let repository: ReturnType<typeof checkRepository> | undefined;
const repo = () => {
  repository ??= checkRepository();
  return repository;
};

function codes(input: Parameters<typeof checkClauses>[0]): string[] {
  return checkClauses(input).problems.map((p: { code: string; id: string | null }) => `${p.code} ${p.id}`);
}

describe("the clause register (docs/contracts)", () => {
  it("agrees with the test titles: no untested `tested` clause, no unknown id, no duplicate, no dead link", () => {
    const result = repo();
    console.log(summaryLine(result.summary));
    expect(result.problems).toEqual([]);
    expect(result.summary.tested).toBeGreaterThan(0);
  });

  it("reads both registers and every test file below a test/ folder, outside node_modules and dist", () => {
    const files = findTestFiles();
    expect(files).toContain("test/clauses.test.ts");
    expect(files).toContain("packages/ths/test/fault-matrix.test.ts");
    expect(files.some((f: string) => f.includes("node_modules") || f.includes("/dist/"))).toBe(false);
    const result = repo();
    const files2 = new Set(result.clauses.map((c: { file: string }) => c.file));
    expect([...files2].sort()).toEqual([`${REGISTER_DIR}/auto-mode.md`, `${REGISTER_DIR}/host-obligations.md`]);
  });

  it("`pnpm clauses` prints the table and the summary line, and --json the same counts", { timeout: 120_000 }, () => {
    const script = join(ROOT, "scripts/clauses.mjs");
    const text = execFileSync(process.execPath, [script], { cwd: ROOT, encoding: "utf8" });
    const json = JSON.parse(execFileSync(process.execPath, [script, "--json"], { cwd: ROOT, encoding: "utf8" }));
    const lines = text.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^id\s+status\s+tests$/);
    expect(lines).toContainEqual(expect.stringMatching(/^H5\.2\s+tested\s+[1-9]\d*$/));
    expect(lines.at(-1)).toBe(summaryLine(json.summary));
    expect(lines.at(-1)).toMatch(/^clauses: \d+ tested, \d+ partial, \d+ not yet, \d+ out of scope$/);
    const h52 = json.clauses.find((c: { id: string }) => c.id === "H5.2");
    expect(h52.tests.length).toBeGreaterThan(0);
    expect(h52.code.every((p: string) => existsSync(join(ROOT, p)))).toBe(true);
    expect(json.problems).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    expect(pkg.scripts.clauses).toBe("node scripts/clauses.mjs");
  });

  describe("the checker itself (each rule fails when broken)", () => {
    it("fails when a tested clause of the real register loses its last test (H5.2 removed from every title)", () => {
      expect(repo().naming.get("H5.2")?.length).toBeGreaterThan(0);
      const registers = ["auto-mode.md", "host-obligations.md"].map((f) => ({
        path: `${REGISTER_DIR}/${f}`,
        text: readFileSync(join(ROOT, REGISTER_DIR, f), "utf8"),
      }));
      const tests = findTestFiles().map((path: string) => ({
        path,
        text: readFileSync(join(ROOT, path), "utf8").replaceAll("H5.2 ", ""),
      }));
      const problems = checkClauses({ registers, tests, exists: (p: string) => existsSync(join(ROOT, p)) }).problems;
      expect(problems.map((p: { code: string }) => p.code)).toContain("CLAUSE_UNTESTED");
      expect(new Set(problems.map((p: { id: string }) => p.id))).toEqual(new Set(["H5.2"]));
    });

    it("CLAUSE_UNTESTED: a tested clause no title names; partial and not yet need none", () => {
      const rows = "| H1.1 | a | tested | | |\n| H1.2 | b | partial: half | | |\n| H1.3 | c | not yet | | |\n";
      const tests = [testFile('it("host §1: a", () => {});')];
      expect(codes({ registers: [register(rows)], tests, exists: always })).toEqual(["CLAUSE_UNTESTED H1.1"]);
      const named = [testFile('it("H1.1 host §1: a", () => {});')];
      expect(codes({ registers: [register(rows)], tests: named, exists: always })).toEqual([]);
    });

    it("CLAUSE_UNKNOWN_ID: a title names an id the register does not list", () => {
      const tests = [testFile('describe("H9.99 and AM.nothing.1", () => { it("x", () => {}); });')];
      expect(codes({ registers: [register("| H1.1 | a | not yet | | |\n")], tests, exists: always })).toEqual([
        "CLAUSE_UNKNOWN_ID H9.99",
        "CLAUSE_UNKNOWN_ID AM.nothing.1",
      ]);
    });

    it("CLAUSE_DUPLICATE: an id listed twice, within one file or across the two", () => {
      const one = register("| H1.1 | a | not yet | | |\n| H1.1 | b | not yet | | |\n");
      expect(codes({ registers: [one], tests: [], exists: always })).toEqual(["CLAUSE_DUPLICATE H1.1"]);
      const a = register("| AM.x.1 | a | not yet | | |\n", "docs/contracts/a.md");
      const b = register("| `AM.x.1` | b | not yet | | |\n", "docs/contracts/b.md");
      expect(codes({ registers: [a, b], tests: [], exists: always })).toEqual(["CLAUSE_DUPLICATE AM.x.1"]);
    });

    it("CLAUSE_BROKEN_LINK: a code or test link to a missing file, resolved from the register's folder", () => {
      const rows = "| H1.1 | a | not yet | [c](../../packages/gone.ts) | [t](../../packages/a/test/a.test.ts#L3) |\n";
      const seen: string[] = [];
      const exists = (p: string) => {
        seen.push(p);
        return p !== "packages/gone.ts";
      };
      expect(codes({ registers: [register(rows)], tests: [], exists })).toEqual(["CLAUSE_BROKEN_LINK H1.1"]);
      expect(seen).toEqual(["packages/gone.ts", "packages/a/test/a.test.ts"]);
    });

    it("CLAUSE_TEST_LINK_UNNAMED: a tested clause links a test file where no title names it", () => {
      const rows =
        "| H1.1 | a | tested | | [a](../../packages/a/test/a.test.ts), [b](../../packages/b/test/b.test.ts) |\n";
      const tests = [testFile('it("H1.1 a", () => {});'), testFile('it("b", () => {});', "packages/b/test/b.test.ts")];
      expect(codes({ registers: [register(rows)], tests, exists: always })).toEqual(["CLAUSE_TEST_LINK_UNNAMED H1.1"]);
    });

    it("refuses malformed rows: unknown status, out of scope without a reason, wrong cell count, a bad id", () => {
      const rows = [
        "| H1.1 | a | done | | |",
        "| H1.2 | b | out of scope | | |",
        "| H1.3 | c | tested | |",
        "| H1.x | d | not yet | | |",
        "| H1.4 | e | out of scope: no engine | | |",
      ].join("\n");
      expect(codes({ registers: [register(`${rows}\n`)], tests: [], exists: always })).toEqual([
        "CLAUSE_BAD_STATUS H1.1",
        "CLAUSE_BAD_STATUS H1.2",
        "CLAUSE_BAD_ROW H1.3",
        "CLAUSE_BAD_ID H1.x",
      ]);
    });

    it("reads titles from the syntax tree: .each tables, split lines, templates, describe, test", () => {
      const text = [
        'describe("H1.1 suite", () => {',
        "  it.each([",
        "    [1, 2],",
        "  ])(",
        '    "H1.2 row %s",',
        "    () => {},",
        "  );",
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a test file, not a template
        "  it.concurrent.each(rows)(`AM.x.1 ${name} tail`, f);",
        '  test("H1.3 plain", () => {});',
        '  const label = "H9.9 not a title";',
        "});",
      ].join("\n");
      const titles = testTitles({ path: "t.test.ts", text });
      expect(titles.map((t: { title: string; line: number }) => [t.title, t.line])).toEqual([
        ["H1.1 suite", 1],
        ["H1.2 row %s", 5],
        ["AM.x.1 … tail", 8],
        ["H1.3 plain", 9],
      ]);
    });

    it("matches whole ids only", () => {
      expect(clauseIds("H5.2 a; AM.budgets.3, H10.1 H1a.2 (H2a.4) AM.stage4.1.")).toEqual([
        "H5.2",
        "AM.budgets.3",
        "H10.1",
        "H1a.2",
        "H2a.4",
        "AM.stage4.1",
      ]);
      expect(clauseIds("xH1.1 H1.1x H1.1.1 SHA256.1 H1 §5.2 host §5")).toEqual([]);
    });
  });
});
