#!/usr/bin/env node
// The clause register (docs/contracts/) and the tests that name its clauses, checked against
// each other. Shared by `test/clauses.test.ts` (which fails on any problem) and `pnpm clauses`
// (which prints the table). The register format is documented in docs/contracts/README.md.
//
// Plain ESM JavaScript on purpose: `pnpm clauses` runs it with Node 20 without a build step.

import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";

/** The repository root (this file lives in `scripts/`). */
export const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** The register files, relative to the root. `README.md` there explains the format and holds no clause. */
export const REGISTER_DIR = "docs/contracts";

/** The closed status vocabulary, in display order. */
export const STATUSES = /** @type {const} */ (["tested", "partial", "not yet", "out of scope"]);

/**
 * A clause id: `H<section>.<n>` for the host obligations (sections `0`..`10`, with a letter for the
 * unnumbered sections: `H1a`, `H1b`, `H2a`), `AM.<topic>.<n>` for the Auto Mode contract.
 * Anchored on word boundaries so `SHA256.1` or `H10.12x` are not ids.
 */
export const CLAUSE_ID = /(?<![\w.])(?:H(?:10|[0-9])[a-z]?\.[0-9]+|AM\.[a-z][a-z0-9-]*\.[0-9]+)(?![\w-]|\.[0-9])/g;

/** Directories never searched for test files. */
const SKIP_DIRS = new Set(["node_modules", "dist", ".git", ".turbo", "coverage"]);

/**
 * @typedef {{ text: string, href: string, target: string }} RegisterLink
 *   `target` is the linked file relative to the root, without its `#fragment`.
 * @typedef {{ id: string, statement: string, status: string, note: string, code: RegisterLink[],
 *   tests: RegisterLink[], file: string, line: number }} Clause
 * @typedef {{ title: string, kind: string, file: string, line: number }} TestTitle
 * @typedef {{ code: string, id: string | null, where: string, message: string }} Problem
 * @typedef {{ path: string, text: string }} SourceFile  `path` relative to the root, `/`-separated.
 */

/** Every clause id in a piece of text, in order of appearance. */
export function clauseIds(text) {
  return [...text.matchAll(CLAUSE_ID)].map((m) => m[0]);
}

/** Split one Markdown table row into trimmed cells (no pipes inside cells are allowed). */
function cells(line) {
  const inner = line.trim().replace(/^\|/, "").replace(/\|$/, "");
  return inner.split("|").map((c) => c.trim());
}

/** Markdown links `[text](href)` in a cell, resolved against the register file's folder. */
function links(cell, registerPath) {
  const base = dirname(registerPath);
  return [...cell.matchAll(/\[([^\]]*)\]\(([^)\s]+)\)/g)].map((m) => {
    const href = m[2] ?? "";
    const path = href.split("#")[0] ?? "";
    const target = /^[a-z]+:/i.test(href) ? href : join(base, path).split(sep).join("/");
    return { text: m[1] ?? "", href, target };
  });
}

/**
 * Parse one register file: every table row whose first cell is a clause id (optionally in
 * backticks) is a clause with columns `id | requirement | status | code | tests`.
 *
 * @param {SourceFile} file
 * @returns {{ clauses: Clause[], problems: Problem[] }}
 */
export function parseRegister(file) {
  /** @type {Clause[]} */
  const clauses = [];
  /** @type {Problem[]} */
  const problems = [];
  file.text.split("\n").forEach((line, index) => {
    if (!line.trim().startsWith("|")) return;
    const row = cells(line);
    const first = (row[0] ?? "").replace(/`/g, "");
    const where = `${file.path}:${index + 1}`;
    if (clauseIds(first).length !== 1 || clauseIds(first)[0] !== first) {
      // Header, separator and prose rows. A row that looks like a clause but is not one is a typo.
      if (/^(H\d|AM\.)/.test(first)) {
        problems.push({ code: "CLAUSE_BAD_ID", id: first, where, message: `"${first}" is not a clause id` });
      }
      return;
    }
    if (row.length !== 5) {
      problems.push({ code: "CLAUSE_BAD_ROW", id: first, where, message: `expected 5 cells, found ${row.length}` });
      return;
    }
    const [, statement = "", statusCell = "", code = "", tests = ""] = row;
    const status = STATUSES.find((s) => statusCell === s || statusCell.startsWith(`${s}:`));
    if (status === undefined) {
      problems.push({ code: "CLAUSE_BAD_STATUS", id: first, where, message: `unknown status "${statusCell}"` });
      return;
    }
    if (status === "out of scope" && statusCell.length <= status.length + 1) {
      problems.push({ code: "CLAUSE_BAD_STATUS", id: first, where, message: "out of scope needs its reason" });
    }
    clauses.push({
      id: first,
      statement,
      status,
      note: statusCell.slice(status.length).replace(/^:\s*/, ""),
      code: links(code, file.path),
      tests: links(tests, file.path),
      file: file.path,
      line: index + 1,
    });
  });
  return { clauses, problems };
}

/** The name a call is made through: `it`, `it.each(...)`, `describe.skip`, `it.concurrent.each(...)`. */
function calleeRoot(expr) {
  let e = expr;
  for (;;) {
    if (ts.isCallExpression(e)) e = e.expression;
    else if (ts.isPropertyAccessExpression(e)) e = e.expression;
    else break;
  }
  return ts.isIdentifier(e) ? e.text : null;
}

/** The literal text of a title argument; a template's placeholders become `…`. */
function literalText(node) {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isTemplateExpression(node)) {
    return node.head.text + node.templateSpans.map((s) => `…${s.literal.text}`).join("");
  }
  return null;
}

/**
 * Every `describe` / `it` / `test` title in one test file (with `.each`, `.skip`, `.concurrent`
 * and friends), read from the TypeScript syntax tree rather than by regular expression, so a
 * title split over lines or after an `.each` table is still found.
 *
 * @param {SourceFile} file
 * @returns {TestTitle[]}
 */
export function testTitles(file) {
  const source = ts.createSourceFile(file.path, file.text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  /** @type {TestTitle[]} */
  const found = [];
  const visit = (node) => {
    if (ts.isCallExpression(node) && node.arguments.length > 0) {
      const kind = calleeRoot(node.expression);
      const title = node.arguments[0] && literalText(node.arguments[0]);
      if ((kind === "it" || kind === "test" || kind === "describe") && title !== null && title !== undefined) {
        const line = source.getLineAndCharacterOfPosition(node.arguments[0].getStart(source)).line + 1;
        found.push({ title, kind, file: file.path, line });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/**
 * Check the register against the test titles.
 *
 * Problems: `CLAUSE_DUPLICATE` (an id listed twice), `CLAUSE_UNTESTED` (a `tested` clause no test
 * title names), `CLAUSE_UNKNOWN_ID` (a test title names an id not in the register),
 * `CLAUSE_BROKEN_LINK` (a register link to a file that does not exist), `CLAUSE_TEST_LINK_UNNAMED`
 * (a `tested` clause links a test file none of whose titles names it), plus the row-shape problems
 * of {@link parseRegister}.
 *
 * @param {{ registers: SourceFile[], tests: SourceFile[], exists: (path: string) => boolean }} input
 */
export function checkClauses({ registers, tests, exists }) {
  /** @type {Problem[]} */
  const problems = [];
  /** @type {Clause[]} */
  const clauses = [];
  for (const file of registers) {
    const parsed = parseRegister(file);
    clauses.push(...parsed.clauses);
    problems.push(...parsed.problems);
  }
  /** @type {Map<string, Clause>} */
  const byId = new Map();
  for (const clause of clauses) {
    const earlier = byId.get(clause.id);
    if (earlier) {
      problems.push({
        code: "CLAUSE_DUPLICATE",
        id: clause.id,
        where: `${clause.file}:${clause.line}`,
        message: `also listed at ${earlier.file}:${earlier.line}`,
      });
    } else byId.set(clause.id, clause);
  }
  /** @type {Map<string, TestTitle[]>} */
  const naming = new Map();
  for (const file of tests) {
    for (const title of testTitles(file)) {
      for (const id of new Set(clauseIds(title.title))) {
        if (!byId.has(id)) {
          problems.push({
            code: "CLAUSE_UNKNOWN_ID",
            id,
            where: `${title.file}:${title.line}`,
            message: `a test names ${id}, which the register does not list`,
          });
          continue;
        }
        naming.set(id, [...(naming.get(id) ?? []), title]);
      }
    }
  }
  for (const clause of byId.values()) {
    const where = `${clause.file}:${clause.line}`;
    for (const link of [...clause.code, ...clause.tests]) {
      if (/^[a-z]+:/i.test(link.href)) continue;
      if (!exists(link.target)) {
        problems.push({ code: "CLAUSE_BROKEN_LINK", id: clause.id, where, message: `${link.href} does not exist` });
      }
    }
    if (clause.status !== "tested") continue;
    const titles = naming.get(clause.id) ?? [];
    if (titles.length === 0) {
      problems.push({ code: "CLAUSE_UNTESTED", id: clause.id, where, message: "marked tested, but no test names it" });
    }
    for (const link of clause.tests) {
      if (!link.target.endsWith(".test.ts") || !exists(link.target)) continue;
      if (!titles.some((t) => t.file === link.target)) {
        problems.push({
          code: "CLAUSE_TEST_LINK_UNNAMED",
          id: clause.id,
          where,
          message: `links ${link.target}, but no test there names ${clause.id}`,
        });
      }
    }
  }
  const rows = [...byId.values()].map((c) => ({
    id: c.id,
    status: c.status,
    tests: (naming.get(c.id) ?? []).length,
    file: c.file,
    line: c.line,
  }));
  return { clauses: [...byId.values()], rows, naming, problems, summary: summarize(rows) };
}

/** Counts per status. */
export function summarize(rows) {
  /** @type {Record<string, number>} */
  const counts = Object.fromEntries(STATUSES.map((s) => [s, 0]));
  for (const r of rows) counts[r.status] = (counts[r.status] ?? 0) + 1;
  return counts;
}

/** `clauses: N tested, N partial, N not yet, N out of scope` */
export function summaryLine(summary) {
  return `clauses: ${STATUSES.map((s) => `${summary[s] ?? 0} ${s}`).join(", ")}`;
}

/** Every `*.test.ts` below a `test/` folder of the repository (node_modules and dist excluded). */
export function findTestFiles(root = ROOT) {
  /** @type {string[]} */
  const found = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!SKIP_DIRS.has(entry.name)) walk(join(dir, entry.name));
      } else if (entry.name.endsWith(".test.ts")) {
        const path = relative(root, join(dir, entry.name)).split(sep).join("/");
        if (path.split("/").slice(0, -1).includes("test")) found.push(path);
      }
    }
  };
  walk(root);
  return found.sort();
}

/** Read the repository's register and test files and check them. */
export function checkRepository(root = ROOT) {
  const read = (path) => ({ path, text: readFileSync(join(root, path), "utf8") });
  const registers = readdirSync(join(root, REGISTER_DIR))
    .filter((f) => f.endsWith(".md") && f !== "README.md")
    .sort()
    .map((f) => read(`${REGISTER_DIR}/${f}`));
  const tests = findTestFiles(root).map(read);
  return checkClauses({ registers, tests, exists: (path) => existsSync(resolve(root, path)) });
}

/** The table `pnpm clauses` prints: id, status, number of test titles naming it. */
export function formatTable(rows) {
  const width = Math.max(2, ...rows.map((r) => r.id.length));
  const header = `${"id".padEnd(width)}  ${"status".padEnd(12)}  tests`;
  return [header, ...rows.map((r) => `${r.id.padEnd(width)}  ${r.status.padEnd(12)}  ${r.tests}`)].join("\n");
}

function main(argv) {
  // `pnpm clauses | head` closes the pipe early: that is not an error.
  process.stdout.on("error", (error) => {
    if (error.code !== "EPIPE") throw error;
  });
  const result = checkRepository();
  if (argv.includes("--json")) {
    const json = {
      clauses: result.clauses.map((c) => ({
        id: c.id,
        status: c.status,
        note: c.note,
        requirement: c.statement,
        code: c.code.map((l) => l.target),
        tests: (result.naming.get(c.id) ?? []).map((t) => ({ file: t.file, line: t.line, title: t.title })),
        register: `${c.file}:${c.line}`,
      })),
      summary: result.summary,
      problems: result.problems,
    };
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  } else {
    process.stdout.write(`${formatTable(result.rows)}\n\n`);
    for (const p of result.problems) process.stdout.write(`${p.code} ${p.id ?? ""} ${p.where}: ${p.message}\n`);
    process.stdout.write(`${summaryLine(result.summary)}\n`);
  }
  process.exitCode = result.problems.length === 0 ? 0 : 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2));
}
