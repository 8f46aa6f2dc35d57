import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Diagnostic } from "@asp/contracts";
import { type ContentSource, TextCache, TreeLister, type TreeListing, throwIfAborted } from "@asp/sdk";
import ts from "typescript";
import { TypeScriptProviderError } from "./errors.js";
import { fingerprintDiagnostic, normalizeText } from "./fingerprint.js";
import { codeHref, helpFor } from "./help.js";

/** Where the repository lives in the compiler's virtual file system. */
const ROOT = "/repo";
const abs = (rel: string): string => (rel === "" ? ROOT : `${ROOT}/${rel}`);
const relOf = (path: string): string | null =>
  path === ROOT ? "" : path.startsWith(`${ROOT}/`) ? path.slice(ROOT.length + 1) : null;
const inNodeModules = (rel: string): boolean => rel.startsWith("node_modules/") || rel.includes("/node_modules/");
const SKIP_DIRS = new Set([".git", ".hg", ".svn"]);
const MAX_ROUNDS = 32;

/**
 * Which files' diagnostics a check reports.
 *
 * - `changed`: the changed files only,
 * - `affected` (default): the changed files and every file that imports one of them,
 *   transitively (their types may change with the change),
 * - `all`: every file of the project (also what a check without a changeset does).
 */
export type CheckScope = "changed" | "affected" | "all";

/** Options of {@link createTypeScriptChecker}. */
export interface TypeScriptCheckerOptions {
  /**
   * The tsconfig to honour, relative to the tree root. Default `tsconfig.json`; when the default
   * is absent the checker uses TypeScript's defaults over every `.ts` / `.tsx` / `.mts` / `.cts`
   * file outside `node_modules`.
   */
  readonly project?: string;
  /** Default `affected`. */
  readonly scope?: CheckScope;
  /** Folder of the default library files; default: next to the loaded `typescript`, else next to this module. */
  readonly libDir?: string;
  /** Most diagnostics one check reports (default 1000); beyond it the result is `incomplete`. */
  readonly maxDiagnostics?: number;
}

/** A changed path, as in a changeset. */
export interface CheckChange {
  readonly path: string;
  readonly kind: "added" | "modified" | "deleted" | "mode_changed";
  readonly before: string | null;
  readonly after: string | null;
}

/** One check: the tree to type-check (a changeset's after tree) and what changed. */
export interface CheckRequest {
  /** Digest of the tree to check. */
  readonly tree: string;
  /** The changed paths; empty or absent checks the whole project (scope `all`). */
  readonly changes?: readonly CheckChange[];
}

/** What one check did: the numbers tests and benchmarks look at. */
export interface CheckStats {
  /** Repository files in the program. */
  readonly files: number;
  /** Files whose diagnostics were computed. */
  readonly checkedFiles: number;
  /** Repository files parsed in this check (the rest came from the warm cache). */
  readonly parsedFiles: number;
  /** Repository source files reused from an earlier check. */
  readonly reusedSourceFiles: number;
  /** Whether the previous program was handed to the compiler as `oldProgram`. */
  readonly oldProgram: boolean;
  /** How much of the old program's structure the compiler reused. */
  readonly structureReused: "not" | "safe-modules" | "completely" | "unknown" | "none";
  /** Blobs and trees read through the content source in this check. */
  readonly blobReads: number;
  readonly treeReads: number;
  /** Program builds needed to discover every file the program reads. */
  readonly rounds: number;
}

/** The outcome of one check, in the Assessment's provider-owned vocabulary. */
export interface CheckResult {
  readonly status: "complete" | "incomplete";
  readonly diagnostics: Diagnostic[];
  readonly coverage: { sources: string[]; paths: number; missing?: string[] };
  readonly stats: CheckStats;
}

/** A type-checker that keeps its program warm between checks. */
export interface TypeScriptChecker {
  /**
   * Type-check `request.tree`, reading content only through `source`. Never throws for
   * unreadable content (that is an `incomplete` result); rethrows the abort reason when
   * `source.signal` is aborted.
   */
  check(request: CheckRequest, source: ContentSource): Promise<CheckResult>;
  /** Totals since creation. */
  readonly totals: { readonly checks: number; readonly programs: number; readonly parsedFiles: number };
  /** The folder the default library files are read from. */
  readonly libDir: string;
}

type MatchFiles = (
  path: string,
  extensions: readonly string[] | undefined,
  excludes: readonly string[] | undefined,
  includes: readonly string[] | undefined,
  useCaseSensitiveFileNames: boolean,
  currentDirectory: string,
  depth: number | undefined,
  getFileSystemEntries: (path: string) => { files: readonly string[]; directories: readonly string[] },
  realpath: (path: string) => string,
) => string[];

/**
 * The folder holding `lib.*.d.ts`: the given one, else next to the loaded `typescript` module,
 * else next to this module (where a bundled plugin carries copies of them). These are trusted
 * plugin assets, not repository content.
 *
 * @throws TypeScriptProviderError `ASP_TS_LIB_NOT_FOUND` when none of them has `lib.es5.d.ts`.
 */
export function locateLibDir(explicit?: string): string {
  const candidates: string[] = [];
  if (explicit !== undefined) candidates.push(explicit);
  else {
    try {
      candidates.push(dirname(ts.getDefaultLibFilePath({})));
    } catch {
      // Bundled without a node `sys`: fall through to the folder of this module.
    }
    try {
      candidates.push(dirname(fileURLToPath(import.meta.url)));
    } catch {
      // Not loaded from a file URL.
    }
  }
  for (const dir of candidates) if (existsSync(join(dir, "lib.es5.d.ts"))) return dir.replaceAll("\\", "/");
  throw new TypeScriptProviderError(
    "ASP_TS_LIB_NOT_FOUND",
    `no lib.es5.d.ts in ${candidates.join(" or ") || "(no candidate folder)"}: copy the lib*.d.ts files of typescript next to the plugin entry`,
    { category: "internal", data: { candidates } },
  );
}

const STRUCTURE = ["not", "safe-modules", "completely"] as const;

/**
 * Create a TypeScript checker over host-fed content. It keeps, between checks: blob texts and
 * subtree listings by digest, parsed source files by (path, digest, options), the library files,
 * the last program (handed to `ts.createProgram` as `oldProgram`) and the module resolution
 * cache while the file set is unchanged — so a check after a one-file change parses one file.
 *
 * @throws TypeScriptProviderError `ASP_TS_BAD_OPTIONS` for an invalid option,
 *   `ASP_TS_LIB_NOT_FOUND` when the library files cannot be found.
 * @example
 * ```ts
 * const checker = createTypeScriptChecker({ scope: "affected" });
 * const result = await checker.check({ tree: afterTree, changes }, ctx); // ctx: an SDK AssessContext
 * ```
 */
export function createTypeScriptChecker(options: TypeScriptCheckerOptions = {}): TypeScriptChecker {
  const scope = options.scope ?? "affected";
  if (!["changed", "affected", "all"].includes(scope)) {
    throw new TypeScriptProviderError("ASP_TS_BAD_OPTIONS", `scope must be changed, affected or all, not ${scope}`, {
      data: { option: "scope" },
    });
  }
  const maxDiagnostics = options.maxDiagnostics ?? 1000;
  if (!Number.isInteger(maxDiagnostics) || maxDiagnostics < 1 || maxDiagnostics > 10_000) {
    throw new TypeScriptProviderError("ASP_TS_BAD_OPTIONS", "maxDiagnostics must be an integer from 1 to 10000", {
      data: { option: "maxDiagnostics" },
    });
  }
  const explicitProject = options.project !== undefined;
  const project = (options.project ?? "tsconfig.json").replace(/^\.\//, "");
  const maybeMatchFiles = (ts as unknown as { matchFiles?: MatchFiles }).matchFiles;
  if (typeof maybeMatchFiles !== "function") {
    throw new TypeScriptProviderError(
      "ASP_TS_UNSUPPORTED_COMPILER",
      `typescript ${ts.version} has no matchFiles (needed to expand tsconfig include patterns)`,
      { category: "internal" },
    );
  }
  const matchFiles: MatchFiles = maybeMatchFiles;
  const libDir = locateLibDir(options.libDir);
  const inLib = (path: string): boolean => path.startsWith(`${libDir}/`);

  const lister = new TreeLister();
  const texts = new TextCache();
  const libTexts = new Map<string, string | null>();
  const libFiles = new Map<string, ts.SourceFile>();
  let sourceFiles = new Map<string, ts.SourceFile>();
  let lastProgram: ts.Program | undefined;
  let lastPaths: ReadonlyMap<string, string> | undefined;
  const imports = new WeakMap<ts.SourceFile, { key: string; targets: readonly string[] }>();
  let resolution: { key: string; cache: ts.ModuleResolutionCache } | undefined;
  const totals = { checks: 0, programs: 0, parsedFiles: 0 };

  const readLib = (path: string): string | undefined => {
    let text = libTexts.get(path);
    if (text === undefined) {
      text = existsSync(path) ? readFileSync(path, "utf8") : null;
      libTexts.set(path, text);
    }
    return text ?? undefined;
  };

  async function check(request: CheckRequest, source: ContentSource): Promise<CheckResult> {
    totals.checks++;
    const blobReads0 = texts.blobReads;
    const treeReads0 = lister.treeReads;
    const changes = request.changes ?? [];
    const listing = await lister.list(request.tree, source, (name) => SKIP_DIRS.has(name));
    const missing = new Map<string, string>();
    for (const [dir, why] of listing.unreadable) missing.set(dir, why);

    // ---- content access for the synchronous compiler: misses are queued, fetched, retried
    const pending = new Set<string>();
    const read = new Set<string>();
    const textOf = (rel: string): string | undefined => {
      const digest = listing.files.get(rel);
      if (digest === undefined) return undefined;
      const text = texts.get(digest);
      if (text !== undefined) {
        read.add(rel);
        return text;
      }
      if (!missing.has(rel)) pending.add(rel);
      return undefined;
    };
    const fetch = async (paths: Iterable<string>): Promise<void> => {
      const byDigest = new Map<string, string[]>();
      for (const p of paths) {
        const d = listing.files.get(p);
        if (d === undefined || missing.has(p)) continue;
        byDigest.set(d, [...(byDigest.get(d) ?? []), p]);
      }
      const failures = await texts.fetch(byDigest.keys(), source);
      for (const [d, why] of failures) for (const p of byDigest.get(d) ?? []) missing.set(p, why);
    };
    const children = childrenOf(listing);

    const fileExists = (path: string): boolean => {
      const rel = relOf(path);
      if (rel !== null) return listing.files.has(rel);
      return inLib(path) && readLib(path) !== undefined;
    };
    const readFile = (path: string): string | undefined => {
      const rel = relOf(path);
      if (rel !== null) return textOf(rel);
      return inLib(path) ? readLib(path) : undefined;
    };
    const directoryExists = (path: string): boolean => {
      const rel = relOf(path);
      if (rel !== null) return listing.dirs.has(rel);
      return path === libDir;
    };
    const getDirectories = (path: string): string[] => {
      const rel = relOf(path);
      return rel === null ? [] : [...(children.get(rel)?.directories ?? [])];
    };
    const entries = (path: string): { files: readonly string[]; directories: readonly string[] } => {
      const rel = relOf(path);
      return (rel === null ? undefined : children.get(rel)) ?? { files: [], directories: [] };
    };

    // ---- tsconfig, read through the same callbacks (extends chains included)
    const configPath = listing.files.has(project) ? project : null;
    let parsed: ts.ParsedCommandLine;
    const configFiles = new Set<string>();
    if (configPath === null && explicitProject) {
      // Checking something other than the named project would be a different check.
      return {
        status: "incomplete",
        diagnostics: [],
        coverage: { sources: ["ts"], paths: 0, missing: [project, ...missing.keys()] },
        stats: {
          files: 0,
          checkedFiles: 0,
          parsedFiles: 0,
          reusedSourceFiles: 0,
          oldProgram: lastProgram !== undefined,
          structureReused: "none",
          blobReads: texts.blobReads - blobReads0,
          treeReads: lister.treeReads - treeReads0,
          rounds: 0,
        },
      };
    }
    for (let round = 0; ; round++) {
      throwIfAborted(source.signal);
      pending.clear();
      parsed = parseConfig(configPath, {
        useCaseSensitiveFileNames: true,
        fileExists,
        readFile: (p) => {
          const rel = relOf(p);
          if (rel !== null) configFiles.add(rel);
          return readFile(p);
        },
        readDirectory: (root, extensions, excludes, includes, depth) =>
          matchFiles(root, extensions, excludes, includes, true, ROOT, depth, entries, (p) => p),
      });
      if (pending.size === 0 || round >= MAX_ROUNDS) break;
      await fetch(pending);
    }
    const compilerOptions: ts.CompilerOptions = { ...parsed.options, noEmit: true };
    const optionsKey = createHash("sha256").update(JSON.stringify(compilerOptions)).digest("hex").slice(0, 16);
    const rootNames = parsed.fileNames;

    // ---- prefetch: root files and the package.json files above them (module format lookups)
    const want = new Set<string>();
    const dirsSeen = new Set<string>();
    for (const f of rootNames) {
      const rel = relOf(f);
      if (rel === null) continue;
      want.add(rel);
      for (let dir = parentOf(rel); dir !== null && !dirsSeen.has(dir); dir = parentOf(dir)) {
        dirsSeen.add(dir);
        const pj = dir === "" ? "package.json" : `${dir}/package.json`;
        if (listing.files.has(pj)) want.add(pj);
      }
    }
    await fetch([...want].filter((p) => texts.get(listing.files.get(p) ?? "") === undefined));

    // ---- the program, rebuilt until every file it asked for was available
    const filesChanged =
      lastPaths === undefined ||
      lastPaths.size !== listing.files.size ||
      [...listing.files.keys()].some((p) => !lastPaths?.has(p));
    let parsedFiles = 0;
    let reused = 0;
    const used = new Map<string, ts.SourceFile>();
    const host: ts.CompilerHost = {
      getSourceFile(fileName, languageVersionOrOptions) {
        const opts: ts.CreateSourceFileOptions =
          typeof languageVersionOrOptions === "object"
            ? languageVersionOrOptions
            : { languageVersion: languageVersionOrOptions };
        const tail = `${opts.languageVersion}|${opts.impliedNodeFormat ?? ""}|${optionsKey}`;
        const rel = relOf(fileName);
        if (rel === null) {
          if (!inLib(fileName)) return undefined;
          const key = `${fileName}|${tail}`;
          let sf = libFiles.get(key);
          if (sf === undefined) {
            const text = readLib(fileName);
            if (text === undefined) return undefined;
            sf = ts.createSourceFile(fileName, text, opts, false);
            libFiles.set(key, sf);
          }
          return sf;
        }
        const digest = listing.files.get(rel);
        const text = textOf(rel);
        if (digest === undefined || text === undefined) return undefined;
        const key = `${rel}|${digest}|${tail}`;
        let sf = used.get(key) ?? sourceFiles.get(key);
        if (sf === undefined) {
          sf = ts.createSourceFile(fileName, text, opts, false);
          parsedFiles++;
        } else if (!used.has(key)) reused++;
        used.set(key, sf);
        return sf;
      },
      getDefaultLibFileName: (o) => `${libDir}/${ts.getDefaultLibFileName(o)}`,
      getDefaultLibLocation: () => libDir,
      writeFile: () => {},
      getCurrentDirectory: () => ROOT,
      getCanonicalFileName: (f) => f,
      useCaseSensitiveFileNames: () => true,
      getNewLine: () => "\n",
      fileExists,
      readFile,
      directoryExists,
      getDirectories,
      realpath: (p) => p,
      hasInvalidatedResolutions: () => filesChanged,
    };
    const hadOldProgram = lastProgram !== undefined;
    let program: ts.Program | undefined;
    let structureReused: CheckStats["structureReused"] = "none";
    let rounds = 0;
    for (;;) {
      throwIfAborted(source.signal);
      pending.clear();
      rounds++;
      totals.programs++;
      const oldProgram = program ?? lastProgram;
      program = ts.createProgram({
        rootNames,
        options: compilerOptions,
        host,
        ...(oldProgram === undefined ? {} : { oldProgram }),
        configFileParsingDiagnostics: ts.getConfigFileParsingDiagnostics(parsed),
      });
      if (rounds === 1 && oldProgram !== undefined) {
        const s = (program as unknown as { structureIsReused?: number }).structureIsReused;
        structureReused = typeof s === "number" ? (STRUCTURE[s] ?? "unknown") : "unknown";
      }
      if (pending.size === 0 || rounds >= MAX_ROUNDS) break;
      await fetch(pending);
    }
    for (const p of pending) missing.set(p, "not read within the round limit");
    // Keep exactly what this program uses: the warm set follows the lineage.
    sourceFiles = used;
    lastProgram = program;
    lastPaths = listing.files;
    totals.parsedFiles += parsedFiles;

    // ---- which files to report on
    const repoFiles = program
      .getSourceFiles()
      .filter((sf) => {
        const rel = relOf(sf.fileName);
        return rel !== null && !inNodeModules(rel);
      })
      .sort((a, b) => (a.fileName < b.fileName ? -1 : a.fileName > b.fileName ? 1 : 0));
    let targets: ts.SourceFile[];
    if (changes.length === 0 || scope === "all") targets = repoFiles;
    else {
      const changed = changes
        .map((c) => program.getSourceFile(abs(c.path)))
        .filter((sf): sf is ts.SourceFile => sf !== undefined);
      const escalate =
        changes.some((c) => c.kind === "deleted" || isConfigFile(c.path) || configFiles.has(c.path)) ||
        changed.some((sf) => sf.isDeclarationFile || !ts.isExternalModule(sf));
      if (escalate) targets = repoFiles;
      else if (scope === "changed") targets = changed;
      else {
        const resolutionKey = resolutionKeyOf(optionsKey, listing);
        if (resolution?.key !== resolutionKey) {
          resolution = { key: resolutionKey, cache: ts.createModuleResolutionCache(ROOT, (f) => f, compilerOptions) };
        }
        targets = withDependents(changed, repoFiles, compilerOptions, host, resolution.cache, imports, resolutionKey);
      }
    }

    // ---- diagnostics
    throwIfAborted(source.signal);
    const targetNames = new Set(targets.map((sf) => sf.fileName));
    const raw: ts.Diagnostic[] = [...program.getConfigFileParsingDiagnostics(), ...program.getOptionsDiagnostics()];
    for (const sf of targets) {
      raw.push(...program.getSyntacticDiagnostics(sf));
      if (source.signal?.aborted) break;
      raw.push(...program.getSemanticDiagnostics(sf));
    }
    throwIfAborted(source.signal);
    raw.push(...program.getGlobalDiagnostics());
    const kept = raw.filter((d) => {
      if (d.file === undefined) return true;
      const rel = relOf(d.file.fileName);
      return rel !== null && (targetNames.has(d.file.fileName) || configFiles.has(rel) || rel === configPath);
    });
    let diagnostics = toAspDiagnostics(kept);
    const coverageMissing = [...missing.keys()].sort();
    let truncated = false;
    if (diagnostics.length > maxDiagnostics) {
      diagnostics = diagnostics.slice(0, maxDiagnostics);
      truncated = true;
    }
    if (truncated) coverageMissing.push(`diagnostics beyond the first ${maxDiagnostics}`);
    const incomplete = coverageMissing.length > 0;
    return {
      status: incomplete ? "incomplete" : "complete",
      diagnostics,
      coverage: {
        sources: ["ts"],
        paths: targets.length,
        ...(incomplete ? { missing: coverageMissing.slice(0, 10_000) } : {}),
      },
      stats: {
        files: repoFiles.length,
        checkedFiles: targets.length,
        parsedFiles,
        reusedSourceFiles: reused,
        oldProgram: hadOldProgram,
        structureReused,
        blobReads: texts.blobReads - blobReads0,
        treeReads: lister.treeReads - treeReads0,
        rounds,
      },
    };
  }

  return {
    check,
    get totals() {
      return { ...totals };
    },
    libDir,
  };
}

function parentOf(rel: string): string | null {
  if (rel === "") return null;
  const i = rel.lastIndexOf("/");
  return i < 0 ? "" : rel.slice(0, i);
}

function isConfigFile(rel: string): boolean {
  const name = rel.slice(rel.lastIndexOf("/") + 1);
  return /^(?:tsconfig|jsconfig)(?:\..*)?\.json$/.test(name) || name === "package.json";
}

function childrenOf(listing: TreeListing): Map<string, { files: string[]; directories: string[] }> {
  const out = new Map<string, { files: string[]; directories: string[] }>();
  const at = (dir: string) => {
    let e = out.get(dir);
    if (e === undefined) {
      e = { files: [], directories: [] };
      out.set(dir, e);
    }
    return e;
  };
  for (const dir of listing.dirs) {
    at(dir);
    const parent = parentOf(dir);
    if (parent !== null) at(parent).directories.push(dir.slice(dir.lastIndexOf("/") + 1));
  }
  for (const file of listing.files.keys()) at(parentOf(file) ?? "").files.push(file.slice(file.lastIndexOf("/") + 1));
  return out;
}

const DEFAULT_CONFIG = JSON.stringify({ compilerOptions: {}, exclude: ["node_modules"] });

function parseConfig(configPath: string | null, host: ts.ParseConfigHost): ts.ParsedCommandLine {
  if (configPath === null) {
    const json = ts.parseJsonText(`${ROOT}/tsconfig.json`, DEFAULT_CONFIG);
    return ts.parseJsonSourceFileConfigFileContent(json, host, ROOT);
  }
  const file = abs(configPath);
  const text = host.readFile(file) ?? "{}";
  const json = ts.parseJsonText(file, text);
  return ts.parseJsonSourceFileConfigFileContent(json, host, dirname(file), undefined, file);
}

function resolutionKeyOf(optionsKey: string, listing: TreeListing): string {
  // Resolution depends on which files exist and on package.json contents, not on other contents.
  const h = createHash("sha256").update(optionsKey);
  for (const [path, digest] of [...listing.files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    h.update(path)
      .update(path.endsWith("package.json") ? digest : "")
      .update("\n");
  }
  return h.digest("hex");
}

/** The changed files plus every repository file importing one of them, transitively. */
function withDependents(
  changed: readonly ts.SourceFile[],
  repoFiles: readonly ts.SourceFile[],
  options: ts.CompilerOptions,
  host: ts.ModuleResolutionHost,
  cache: ts.ModuleResolutionCache,
  importCache: WeakMap<ts.SourceFile, { key: string; targets: readonly string[] }>,
  resolutionKey: string,
): ts.SourceFile[] {
  const importers = new Map<string, string[]>();
  for (const sf of repoFiles) {
    // Source files are reused across checks while unchanged, so this is warm after the first.
    const hit = importCache.get(sf);
    let targets = hit?.key === resolutionKey ? hit.targets : undefined;
    if (targets === undefined) {
      const info = ts.preProcessFile(sf.text, true, true);
      const out: string[] = [];
      for (const ref of info.importedFiles) {
        const r = ts.resolveModuleName(ref.fileName, sf.fileName, options, host, cache).resolvedModule;
        if (r !== undefined) out.push(r.resolvedFileName);
      }
      for (const ref of info.referencedFiles) out.push(ts.resolveTripleslashReference(ref.fileName, sf.fileName));
      targets = out;
      importCache.set(sf, { key: resolutionKey, targets });
    }
    for (const t of targets) {
      const list = importers.get(t);
      if (list === undefined) importers.set(t, [sf.fileName]);
      else list.push(sf.fileName);
    }
  }
  const byName = new Map(repoFiles.map((sf) => [sf.fileName, sf]));
  const seen = new Set<string>(changed.map((sf) => sf.fileName));
  const queue = [...seen];
  for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
    for (const importer of importers.get(f) ?? []) {
      if (seen.has(importer)) continue;
      seen.add(importer);
      queue.push(importer);
    }
  }
  return [...seen]
    .map((n) => byName.get(n) ?? changed.find((sf) => sf.fileName === n))
    .filter((sf): sf is ts.SourceFile => sf !== undefined)
    .sort((a, b) => (a.fileName < b.fileName ? -1 : a.fileName > b.fileName ? 1 : 0));
}

const SEVERITY: Record<ts.DiagnosticCategory, Diagnostic["severity"]> = {
  [ts.DiagnosticCategory.Error]: "error",
  [ts.DiagnosticCategory.Warning]: "warning",
  [ts.DiagnosticCategory.Suggestion]: "hint",
  [ts.DiagnosticCategory.Message]: "info",
};

/**
 * Turn compiler diagnostics into Assessment diagnostics: `ts/<code>`, 0-based ranges with
 * repository-relative paths, the code's explanation link, a next step and a content-based
 * fingerprint. Duplicates (same code, place and message) are reported once.
 */
export function toAspDiagnostics(raw: readonly ts.Diagnostic[]): Diagnostic[] {
  interface Item {
    d: ts.Diagnostic;
    path: string | null;
    start: number;
    message: string;
    text: string;
  }
  const seen = new Set<string>();
  const items: Item[] = [];
  for (const d of raw) {
    const path = d.file === undefined ? null : relOf(d.file.fileName);
    const start = d.start ?? -1;
    const message = ts.flattenDiagnosticMessageText(d.messageText, "\n").replaceAll(`${ROOT}/`, "");
    const dedup = `${d.code}\0${path}\0${start}\0${d.length ?? 0}\0${message}`;
    if (seen.has(dedup)) continue;
    seen.add(dedup);
    let text = message;
    if (d.file !== undefined && start >= 0) {
      const { line } = d.file.getLineAndCharacterOfPosition(start);
      const lineStarts = d.file.getLineStarts();
      const lineText = d.file.text.slice(lineStarts[line] ?? 0, lineStarts[line + 1] ?? d.file.text.length);
      const span = d.file.text.slice(start, start + Math.min(d.length ?? 0, 200));
      text = `${normalizeText(lineText)}\0${normalizeText(span)}`;
    }
    items.push({ d, path, start, message, text });
  }
  items.sort((a, b) =>
    (a.path ?? "") !== (b.path ?? "")
      ? (a.path ?? "") < (b.path ?? "")
        ? -1
        : 1
      : a.start !== b.start
        ? a.start - b.start
        : a.d.code - b.d.code,
  );
  const occurrences = new Map<string, number>();
  return items.map(({ d, path, start, message, text }) => {
    const code = `ts/${d.code}`;
    const key = `${code}\0${path}\0${text}`;
    const occurrence = occurrences.get(key) ?? 0;
    occurrences.set(key, occurrence + 1);
    const out: Diagnostic = {
      source: "ts",
      code,
      severity: SEVERITY[d.category],
      message: message.slice(0, 10_000) || `TS${d.code}`,
      fingerprint: fingerprintDiagnostic({ code, path, text, occurrence }),
      codeDescription: { href: codeHref(d.code) },
      help: helpFor(d.code),
    };
    if (d.file !== undefined && path !== null && start >= 0) {
      const s = d.file.getLineAndCharacterOfPosition(start);
      const e = d.file.getLineAndCharacterOfPosition(Math.min(start + (d.length ?? 0), d.file.text.length));
      return {
        ...out,
        range: { path, start: { line: s.line, character: s.character }, end: { line: e.line, character: e.character } },
      };
    }
    return out;
  });
}
