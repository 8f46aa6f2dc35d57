#!/usr/bin/env node
// API reference shipped in each public package (issue 18 item 5): `API.md`, generated from the
// package's TSDoc by typedoc + typedoc-plugin-markdown, one section per `exports` entry point
// (the `@asp/source` condition names its source). `pnpm docs:build` runs it first (so CI builds
// it, and the HTML reference can follow the READMEs' `./API.md` links), and each package's
// `prepublishOnly` runs it for its own folder, so a published tarball always carries the
// reference of the code it ships. Warnings are errors, as for the HTML reference.
//
// Usage: node scripts/api-md.mjs [PACKAGE_DIR ...]   (default: every public package)
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Application, LogLevel } from "typedoc";
import ts from "typescript";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** Public packages a user installs: not private, not under plugins/ (plugins ship as signed folders). */
function publicPackageDirs() {
  const dirs = [];
  for (const group of ["packages", "apps", "tools"]) {
    for (const entry of readdirSync(join(ROOT, group)).sort()) {
      const dir = join(ROOT, group, entry);
      let manifest;
      try {
        manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      } catch {
        continue;
      }
      if (manifest.private !== true) dirs.push(dir);
    }
  }
  return dirs;
}

/** Source entry points of a package, from the `@asp/source` condition of its `exports`. */
export function sourceEntryPoints(dir) {
  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const out = [];
  for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
    if (typeof target !== "object" || target === null) continue;
    const source = target["@asp/source"];
    if (typeof source === "string" && source.endsWith(".ts")) out.push({ subpath, source: join(dir, source) });
  }
  return { name: manifest.name, entries: out };
}

function markdownFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...markdownFiles(path));
    else if (entry.endsWith(".md")) out.push(path);
  }
  return out;
}

/** The build tsconfig of `dir` that compiles `source` (e.g. tsconfig.node.json for `@asp/policy/node`). */
function tsconfigFor(dir, source) {
  const candidates = readdirSync(dir).filter((f) => /^tsconfig(\.(?!test\.)[\w-]+)?\.json$/.test(f));
  for (const name of candidates) {
    const path = join(dir, name);
    const { config } = ts.readConfigFile(path, ts.sys.readFile);
    const parsed = ts.parseJsonConfigFileContent(config, ts.sys, dir);
    if (parsed.fileNames.some((f) => resolve(f) === resolve(source))) return path;
  }
  throw new Error(`${relative(ROOT, dir)}: no tsconfig compiles ${relative(dir, source)}`);
}

/** Generate `<dir>/API.md`. Throws when typedoc reports an error or a warning. */
export async function generateApiMarkdown(dir) {
  const { name, entries } = sourceEntryPoints(dir);
  if (entries.length === 0) throw new Error(`${dir}: no exports entry with an @asp/source .ts condition`);
  const sections = [];
  for (const { subpath, source } of entries) {
    const out = mkdtempSync(join(tmpdir(), "asp-api-md-"));
    try {
      const app = await Application.bootstrapWithPlugins({
        entryPoints: [source],
        entryPointStrategy: "resolve",
        tsconfig: tsconfigFor(dir, source),
        plugin: ["typedoc-plugin-markdown"],
        out,
        readme: "none",
        name: subpath === "." ? name : `${name}/${subpath.slice(2)}`,
        disableSources: true,
        excludePrivate: true,
        excludeInternal: true,
        outputFileStrategy: "modules",
        entryFileName: "index.md",
        hidePageHeader: true,
        hideBreadcrumbs: true,
        treatWarningsAsErrors: true,
        logLevel: LogLevel.Warn,
        skipErrorChecking: true,
      });
      const project = await app.convert();
      if (project === undefined || app.logger.hasErrors() || app.logger.hasWarnings())
        throw new Error(`${relative(ROOT, dir)}: typedoc failed for ${subpath}`);
      await app.generateOutputs(project);
      const body = markdownFiles(out)
        .map((f) => readFileSync(f, "utf8"))
        .join("\n");
      sections.push(body);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }
  const header =
    `<!-- Generated from the TSDoc of ${name} by scripts/api-md.mjs (typedoc-plugin-markdown); do not edit. -->\n\n` +
    `# ${name} API reference\n\n`;
  writeFileSync(join(dir, "API.md"), `${header}${sections.join("\n---\n\n")}`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const dirs = args.length > 0 ? args.map((a) => resolve(a)) : publicPackageDirs();
  for (const dir of dirs) {
    await generateApiMarkdown(dir);
    console.log(`api-md: ${relative(ROOT, join(dir, "API.md"))}`);
  }
}
