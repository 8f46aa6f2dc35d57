import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Diagnostic } from "@asp/contracts";
import { type ContentSource, TextCache, TreeLister, type TreeListing, throwIfAborted } from "@asp/sdk";
import ts from "typescript";
import {
  BUNDLED_COMPILERS,
  type Compiler,
  chooseCompiler,
  type LoadedCompiler,
  loadCompiler,
  pinnedTypeScript,
} from "./compilers.js";
import { TypeScriptProviderError } from "./errors.js";
import { fingerprintDiagnostic, normalizeText } from "./fingerprint.js";
import { codeHref, helpFor } from "./help.js";
import { abs, type EnvironmentTree, OverlayFs, parentOf, ROOT, relOf, TreeEntryCache } from "./vfs.js";

const inNodeModules = (rel: string): boolean => rel.startsWith("node_modules/") || rel.includes("/node_modules/");
const SKIP_DIRS = new Set([".git", ".hg", ".svn"]);
/**
 * Most program builds per project in one check. Each round fetches, to their ends, every path
 * the last build asked for and could not have yet, so rounds follow the depth of the import
 * graph (file to file), not the depth of folders.
 */
const MAX_ROUNDS = 64;

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
  /**
   * Most diagnostics one check reports (default 1000); beyond it the result is `incomplete`, with
   * `coverage.truncated` and the files whose diagnostics were cut in `coverage.missing`.
   */
  readonly maxDiagnostics?: number;
  /**
   * The bundled compilers (`major.minor`) allowed to answer, from trusted configuration; default
   * every bundled one ({@link BUNDLED_COMPILERS}). A project pinned to another is `unsupported`.
   */
  readonly compilers?: readonly string[];
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
  /**
   * The request's dependency environment (an SDK context's `environment`): a tree at repository
   * paths holding only the dependency roots (e.g. `node_modules`). Inside a root it answers
   * instead of the checked tree; its folders are read lazily, only where resolution looks.
   */
  readonly environment?: EnvironmentTree | null;
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
  /** Program builds needed to discover every file the programs read (summed over projects). */
  readonly rounds: number;
  /** Projects checked: the tsconfig and, for project references, every referenced project. */
  readonly projects: number;
}

/** The outcome of one check, in the Assessment's provider-owned vocabulary. */
export interface CheckResult {
  /** `unsupported`: the project pins a TypeScript this checker cannot serve truthfully (see `error`). */
  readonly status: "complete" | "incomplete" | "unsupported";
  readonly diagnostics: Diagnostic[];
  readonly coverage: {
    sources: string[];
    paths: number;
    missing?: string[];
    /** More diagnostics than `maxDiagnostics`: how many there were and how many are reported. */
    truncated?: { total: number; reported: number };
  };
  readonly stats: CheckStats;
  /** The compiler that answered and why it was chosen (absent when none could). */
  readonly tool?: { readonly name: "typescript"; readonly version: string; readonly selectedBy: string };
  /** Why the check is `unsupported`. */
  readonly error?: { readonly code: "ASP_TS_UNSUPPORTED_VERSION"; readonly message: string };
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
  /** The folder the default compiler's library files are read from. */
  readonly libDir: string;
}

/** One compiler's warm state: programs and parsed files never cross compilers. */
interface Engine {
  readonly loaded: LoadedCompiler;
  readonly matchFiles: MatchFiles;
  readonly libTexts: Map<string, string | null>;
  readonly libFiles: Map<string, ts.SourceFile>;
  sourceFiles: Map<string, ts.SourceFile>;
  lastPrograms: Map<string, ts.Program>;
  lastPaths: ReadonlyMap<string, string> | undefined;
  lastEnvKey: string;
  readonly imports: WeakMap<ts.SourceFile, { key: string; targets: readonly string[] }>;
  readonly resolutions: Map<string, { key: string; cache: ts.ModuleResolutionCache }>;
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
  const bundledMinors = BUNDLED_COMPILERS.map((c) => c.minor);
  const allowed = options.compilers ?? bundledMinors;
  for (const minor of allowed) {
    if (!bundledMinors.includes(minor)) {
      throw new TypeScriptProviderError(
        "ASP_TS_BAD_OPTIONS",
        `compiler ${minor} is not bundled (bundled: ${bundledMinors.join(", ")})`,
        { data: { option: "compilers", value: minor, bundled: bundledMinors } },
      );
    }
  }
  const defaultLibDir = locateLibDir(options.libDir);

  const lister = new TreeLister();
  const envTrees = new TreeEntryCache();
  const texts = new TextCache();
  const engines = new Map<string, Promise<Engine>>();
  const totals = { checks: 0, programs: 0, parsedFiles: 0 };

  /** The warm state of one bundled compiler, loaded on first use. */
  const engineFor = (minor: string): Promise<Engine> => {
    let engine = engines.get(minor);
    if (engine === undefined) {
      const compiler = BUNDLED_COMPILERS.find((c) => c.minor === minor) as (typeof BUNDLED_COMPILERS)[number];
      engine = loadCompiler(compiler, defaultLibDir).then((loaded) => {
        const matchFiles = (loaded.ts as unknown as { matchFiles?: MatchFiles }).matchFiles;
        if (typeof matchFiles !== "function") {
          throw new TypeScriptProviderError(
            "ASP_TS_UNSUPPORTED_COMPILER",
            `typescript ${loaded.ts.version} has no matchFiles (needed to expand tsconfig include patterns)`,
            { category: "internal" },
          );
        }
        return {
          loaded,
          matchFiles,
          libTexts: new Map(),
          libFiles: new Map(),
          sourceFiles: new Map(),
          lastPrograms: new Map(),
          lastPaths: undefined,
          lastEnvKey: "",
          imports: new WeakMap(),
          resolutions: new Map(),
        };
      });
      engine.catch(() => engines.delete(minor));
      engines.set(minor, engine);
    }
    return engine;
  };

  async function check(request: CheckRequest, source: ContentSource): Promise<CheckResult> {
    totals.checks++;
    const blobReads0 = texts.blobReads;
    const treeReads0 = lister.treeReads + envTrees.treeReads;
    const changes = request.changes ?? [];
    const env = request.environment ?? null;
    const envKey = env === null ? "" : `${env.tree}|${[...env.roots].sort().join("\n")}`;
    const full = await lister.list(request.tree, source, (name) => SKIP_DIRS.has(name));
    const missing = new Map<string, string>();
    for (const [dir, why] of full.unreadable) missing.set(dir, why);
    // The checked tree overlaid with the environment: inside an environment root the environment answers.
    const fs = new OverlayFs(full, env, envTrees, texts, missing);
    const listing = fs.listing;

    /** Run `build` until everything it read was available (each round fetches what the last one missed). */
    let rounds = 0;
    const settle = async <T>(build: (round: number) => T, programBuild = false): Promise<T> => {
      for (let round = 0; ; round++) {
        throwIfAborted(source.signal);
        fs.pending.clear();
        if (programBuild) rounds++;
        const out = build(round);
        if (fs.pending.size === 0) return out;
        if (round >= MAX_ROUNDS) {
          for (const p of fs.pending.keys()) missing.set(relOf(p) ?? p, "not read within the round limit");
          return out;
        }
        await fs.fetch(source);
      }
    };

    // ---- the compiler: the one the project pins, from those bundled in the signed plugin (issue 26)
    const pinned = await settle(() => pinnedTypeScript((rel) => fs.readFile(abs(rel)), parentOf(project) ?? ""));
    const choice = chooseCompiler(pinned, allowed);
    if (!choice.ok) {
      return {
        status: "unsupported",
        diagnostics: [],
        coverage: { sources: ["ts"], paths: 0 },
        error: { code: "ASP_TS_UNSUPPORTED_VERSION", message: choice.reason },
        stats: zeroStats(texts.blobReads - blobReads0, lister.treeReads + envTrees.treeReads - treeReads0),
      };
    }
    const engine = await engineFor(choice.compiler.minor);
    const { ts, libDir } = engine.loaded;
    const { matchFiles, libTexts, libFiles, imports, resolutions } = engine;
    const tool = {
      name: "typescript",
      version: engine.loaded.compiler.version,
      selectedBy: choice.selectedBy,
    } as const;
    const inLib = (path: string): boolean => path.startsWith(`${libDir}/`);
    const readLib = (path: string): string | undefined => {
      let text = libTexts.get(path);
      if (text === undefined) {
        text = existsSync(path) ? readFileSync(path, "utf8") : null;
        libTexts.set(path, text);
      }
      return text ?? undefined;
    };
    const stats0 = (): CheckStats => ({
      files: 0,
      checkedFiles: 0,
      parsedFiles: 0,
      reusedSourceFiles: 0,
      oldProgram: engine.lastPrograms.size > 0,
      structureReused: "none",
      blobReads: texts.blobReads - blobReads0,
      treeReads: lister.treeReads + envTrees.treeReads - treeReads0,
      rounds: 0,
      projects: 0,
    });

    const fileExists = (path: string): boolean =>
      relOf(path) !== null ? fs.fileExists(path) : inLib(path) && readLib(path) !== undefined;
    const readFile = (path: string): string | undefined =>
      relOf(path) !== null ? fs.readFile(path) : inLib(path) ? readLib(path) : undefined;
    const directoryExists = (path: string): boolean =>
      relOf(path) !== null ? fs.directoryExists(path) : path === libDir;

    // ---- tsconfig, read through the same callbacks (extends chains, also from packages, included)
    const configFiles = new Set<string>();
    const configHost: ts.ParseConfigHost & ts.ModuleResolutionHost = {
      useCaseSensitiveFileNames: true,
      fileExists,
      readFile: (p) => {
        const rel = relOf(p);
        if (rel !== null) configFiles.add(rel);
        return readFile(p);
      },
      readDirectory: (root, extensions, excludes, includes, depth) =>
        matchFiles(root, extensions, excludes, includes, true, ROOT, depth, fs.entries, fs.realpath),
      directoryExists,
      realpath: fs.realpath,
      getDirectories: fs.getDirectories,
    };
    const configPath = listing.files.has(project) ? project : null;
    if (configPath === null && explicitProject) {
      // Checking something other than the named project would be a different check.
      return {
        status: "incomplete",
        diagnostics: [],
        coverage: { sources: ["ts"], paths: 0, missing: [project, ...missing.keys()] },
        stats: stats0(),
        tool,
      };
    }
    const rootParsed = await settle(() => parseConfig(ts, configPath, configHost));
    if (configPath === null && rootParsed.fileNames.length === 0 && missing.size === 0) {
      // No tsconfig and no TypeScript file: nothing for a type check to judge. `tsc` here would
      // report TS18003 about a tsconfig.json that does not exist; the requirement does not apply,
      // so the answer is complete over zero files (issue 26), never a deny.
      return { status: "complete", diagnostics: [], coverage: { sources: ["ts"], paths: 0 }, stats: stats0(), tool };
    }

    // ---- project references: every referenced project, dependencies first, like `tsc -b`
    const parsedConfigs = new Map<string, ts.ParsedCommandLine>();
    const projects: { config: string | null; parsed: ts.ParsedCommandLine }[] = [];
    if ((rootParsed.projectReferences ?? []).length > 0) {
      const seen = new Set<string>([configPath === null ? "" : abs(configPath)]);
      const visit = async (parsed: ts.ParsedCommandLine): Promise<void> => {
        for (const ref of parsed.projectReferences ?? []) {
          const refPath = ts.resolveProjectReferencePath(ref);
          const rel = relOf(refPath);
          if (seen.has(refPath) || rel === null) continue;
          seen.add(refPath);
          // A missing referenced config is reported by the program that references it.
          if (!(await settle(() => fileExists(refPath)))) continue;
          const sub = await settle(() => parseConfig(ts, rel, configHost));
          parsedConfigs.set(refPath, sub);
          await visit(sub);
          projects.push({ config: rel, parsed: sub });
        }
      };
      await visit(rootParsed);
    }
    projects.push({ config: configPath, parsed: rootParsed });

    const { lastPaths, lastPrograms, sourceFiles } = engine;
    const filesChanged =
      envKey !== engine.lastEnvKey ||
      lastPaths === undefined ||
      lastPaths.size !== listing.files.size ||
      [...listing.files.keys()].some((p) => !lastPaths?.has(p));
    let parsedFiles = 0;
    let reused = 0;
    const used = new Map<string, ts.SourceFile>();
    const raw: ts.Diagnostic[] = [];
    const repoNames = new Set<string>();
    const checkedNames = new Set<string>();
    let structureReused: CheckStats["structureReused"] = "none";
    const hadOldProgram = lastPrograms.size > 0;
    const programs = new Map<string, ts.Program>();

    for (const [index, { config, parsed }] of projects.entries()) {
      // `tsc -b` (a root with references) emits, so `emitDeclarationOnly` there is no conflict; only
      // `tsc --noEmit -p` itself reports it against noEmit (TS5053), as this then does too.
      const { emitDeclarationOnly, ...emitting } = parsed.options;
      const compilerOptions: ts.CompilerOptions =
        projects.length > 1 || emitDeclarationOnly !== true
          ? { ...emitting, noEmit: true }
          : { ...parsed.options, noEmit: true };
      const optionsKey = createHash("sha256").update(JSON.stringify(compilerOptions)).digest("hex").slice(0, 16);
      const parseKey = parseKeyOf(ts, compilerOptions);
      const rootNames = parsed.fileNames;

      // ---- prefetch: root files and the package.json files above them (module format lookups)
      await settle(() => {
        const dirsSeen = new Set<string>();
        for (const f of rootNames) {
          const rel = relOf(f);
          if (rel === null) continue;
          readFile(f);
          for (let dir = parentOf(rel); dir !== null && !dirsSeen.has(dir); dir = parentOf(dir)) {
            dirsSeen.add(dir);
            const pj = dir === "" ? "package.json" : `${dir}/package.json`;
            if (listing.files.has(pj)) readFile(abs(pj));
          }
        }
      });

      // ---- the program, rebuilt until every file it asked for was available
      const host: ts.CompilerHost = {
        getSourceFile(fileName, languageVersionOrOptions) {
          const opts: ts.CreateSourceFileOptions =
            typeof languageVersionOrOptions === "object"
              ? languageVersionOrOptions
              : { languageVersion: languageVersionOrOptions };
          const tail = `${opts.languageVersion}|${opts.impliedNodeFormat ?? ""}|${opts.jsDocParsingMode ?? ""}|${parseKey}`;
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
          const digest = fs.digestOf(fileName);
          const text = readFile(fileName);
          if (digest === undefined || text === undefined) return undefined;
          const key = `${rel}|${digest}|${tail}`;
          let sf = used.get(key) ?? sourceFiles.get(key);
          if (sf === undefined) {
            sf = ts.createSourceFile(fileName, text, opts, false);
            parsedFiles++;
          } else {
            if (!used.has(key)) reused++;
            // TypeScript 4.x keeps a file's module resolutions on the SourceFile and reuses them
            // for a file that is not the old program's: resolved in an earlier round, before the
            // package they name was fetched, they would say "not found" (TS2307) for good.
            if (oldProgram?.getSourceFile(fileName) !== sf) forgetResolutions(sf);
          }
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
        getDirectories: fs.getDirectories,
        realpath: fs.realpath,
        hasInvalidatedResolutions: () => filesChanged,
        getParsedCommandLine: (fileName) => {
          const hit = parsedConfigs.get(fileName);
          if (hit !== undefined) return hit;
          const rel = relOf(fileName);
          if (rel === null || !fileExists(fileName)) return undefined;
          const sub = parseConfig(ts, rel, configHost);
          if (fs.pending.size === 0) parsedConfigs.set(fileName, sub);
          return sub;
        },
      };
      // Referenced projects are read from their sources: their outputs (dist/) are not in the tree.
      // (An internal host hook of the compiler; the language service uses it the same way.)
      Object.assign(host, { useSourceOfProjectReferenceRedirect: () => true });
      const projectKey = config ?? "";
      // Only a program built from complete reads is reused: a round that missed a package.json
      // may have resolved a module differently.
      const oldProgram = lastPrograms.get(projectKey);
      const program = await settle(() => {
        totals.programs++;
        return ts.createProgram({
          rootNames,
          options: compilerOptions,
          host,
          ...(parsed.projectReferences === undefined ? {} : { projectReferences: parsed.projectReferences }),
          ...(oldProgram === undefined ? {} : { oldProgram }),
          configFileParsingDiagnostics: ts.getConfigFileParsingDiagnostics(parsed),
        });
      }, true);
      programs.set(projectKey, program);
      if (index === projects.length - 1 && oldProgram !== undefined) {
        const s = (program as unknown as { structureIsReused?: number }).structureIsReused;
        structureReused = typeof s === "number" ? (STRUCTURE[s] ?? "unknown") : "unknown";
      }

      // ---- which files to report on: repository files; dependency files only when the whole project is checked
      const byName = (a: ts.SourceFile, b: ts.SourceFile) =>
        a.fileName < b.fileName ? -1 : a.fileName > b.fileName ? 1 : 0;
      const inRepo = program.getSourceFiles().filter((sf) => relOf(sf.fileName) !== null);
      const isDependency = (sf: ts.SourceFile) => {
        const rel = relOf(sf.fileName) as string;
        return fs.inEnvironment(rel) || inNodeModules(rel);
      };
      const repoFiles = inRepo.filter((sf) => !isDependency(sf)).sort(byName);
      const everyFile = [...repoFiles, ...inRepo.filter(isDependency).sort(byName)];
      for (const sf of repoFiles) repoNames.add(sf.fileName);
      let targets: ts.SourceFile[];
      if (changes.length === 0 || scope === "all") targets = everyFile;
      else {
        const changed = changes
          .map((c) => program.getSourceFile(abs(c.path)))
          .filter((sf): sf is ts.SourceFile => sf !== undefined && !isDependency(sf));
        const escalate =
          changes.some((c) => c.kind === "deleted" || isConfigFile(c.path) || configFiles.has(c.path)) ||
          changed.some((sf) => sf.isDeclarationFile || !ts.isExternalModule(sf));
        if (escalate) targets = everyFile;
        else if (scope === "changed") targets = changed;
        else {
          const resolutionKey = `${envKey}|${resolutionKeyOf(optionsKey, listing)}`;
          let res = resolutions.get(projectKey);
          if (res?.key !== resolutionKey) {
            res = { key: resolutionKey, cache: ts.createModuleResolutionCache(ROOT, (f) => f, compilerOptions) };
            resolutions.set(projectKey, res);
          }
          targets = withDependents(ts, changed, repoFiles, compilerOptions, host, res.cache, imports, resolutionKey);
        }
      }

      // ---- diagnostics, staged like tsc: syntax errors hide the rest, option and global errors hide
      // semantic ones, any of those hides declaration diagnostics
      throwIfAborted(source.signal);
      const targetNames = new Set(targets.map((sf) => sf.fileName));
      const own: ts.Diagnostic[] = [...program.getConfigFileParsingDiagnostics()];
      const configCount = own.length;
      for (const sf of targets) own.push(...program.getSyntacticDiagnostics(sf));
      if (own.length === configCount) {
        own.push(...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics());
        if (own.length === configCount) {
          for (const sf of targets) {
            if (source.signal?.aborted) break;
            own.push(...program.getSemanticDiagnostics(sf));
          }
          // tsc without emit still reports what declaration emit would (e.g. isolatedDeclarations).
          if (own.length === configCount && (compilerOptions.declaration || compilerOptions.composite)) {
            for (const sf of targets) {
              if (source.signal?.aborted) break;
              if (!isDependency(sf) && !sf.isDeclarationFile) own.push(...program.getDeclarationDiagnostics(sf));
            }
          }
        }
      }
      for (const sf of targets) if (!isDependency(sf)) checkedNames.add(sf.fileName);
      throwIfAborted(source.signal);
      raw.push(
        ...own.filter((d) => {
          if (d.file === undefined) return true;
          const rel = relOf(d.file.fileName);
          return rel !== null && (targetNames.has(d.file.fileName) || configFiles.has(rel) || rel === config);
        }),
      );
    }
    // Keep exactly what these programs use: the warm set follows the lineage.
    engine.sourceFiles = used;
    engine.lastPrograms = programs;
    engine.lastPaths = listing.files;
    engine.lastEnvKey = envKey;
    totals.parsedFiles += parsedFiles;

    let diagnostics = toAspDiagnostics(raw, ts);
    const coverageMissing = [...missing.keys()].sort();
    const total = diagnostics.length;
    if (total > maxDiagnostics) {
      // Honest about the cap (issue 26 item 4): how many there were, and the files whose diagnostics were cut.
      const cutFiles = new Set(
        diagnostics.slice(maxDiagnostics).map((d) => d.range?.path ?? "(no file: option or global diagnostics)"),
      );
      diagnostics = diagnostics.slice(0, maxDiagnostics);
      for (const f of [...cutFiles].sort()) if (!missing.has(f)) coverageMissing.push(f);
    }
    const incomplete = coverageMissing.length > 0;
    const bounded =
      coverageMissing.length <= 10_000
        ? coverageMissing
        : [...coverageMissing.slice(0, 9_999), `… and ${coverageMissing.length - 9_999} more paths`];
    return {
      status: incomplete ? "incomplete" : "complete",
      diagnostics,
      coverage: {
        sources: ["ts"],
        paths: checkedNames.size,
        ...(incomplete ? { missing: bounded } : {}),
        ...(total > diagnostics.length ? { truncated: { total, reported: diagnostics.length } } : {}),
      },
      stats: {
        ...stats0(),
        files: repoNames.size,
        checkedFiles: checkedNames.size,
        parsedFiles,
        reusedSourceFiles: reused,
        oldProgram: hadOldProgram,
        structureReused,
        rounds,
        projects: projects.length,
      },
      tool,
    };
  }

  return {
    check,
    get totals() {
      return { ...totals };
    },
    libDir: defaultLibDir,
  };
}

/** Drop the module and type-reference resolutions TypeScript 4.x stores on a SourceFile (5.x keeps them on the program). */
function forgetResolutions(sf: ts.SourceFile): void {
  const f = sf as unknown as { resolvedModules?: unknown; resolvedTypeReferenceDirectiveNames?: unknown };
  if (f.resolvedModules !== undefined) f.resolvedModules = undefined;
  if (f.resolvedTypeReferenceDirectiveNames !== undefined) f.resolvedTypeReferenceDirectiveNames = undefined;
}

function zeroStats(blobReads: number, treeReads: number): CheckStats {
  return {
    files: 0,
    checkedFiles: 0,
    parsedFiles: 0,
    reusedSourceFiles: 0,
    oldProgram: false,
    structureReused: "none",
    blobReads,
    treeReads,
    rounds: 0,
    projects: 0,
  };
}

function isConfigFile(rel: string): boolean {
  const name = rel.slice(rel.lastIndexOf("/") + 1);
  return /^(?:tsconfig|jsconfig)(?:\..*)?\.json$/.test(name) || name === "package.json";
}

/** Options that change how a file parses or binds: a parsed source file is shared across programs that agree on them. */
function parseKeyOf(ts: Compiler, options: ts.CompilerOptions): string {
  const affecting = (ts as unknown as { sourceFileAffectingCompilerOptions?: readonly { name: string }[] })
    .sourceFileAffectingCompilerOptions;
  if (affecting === undefined) return createHash("sha256").update(JSON.stringify(options)).digest("hex").slice(0, 16);
  const picked = affecting.map((o) => [o.name, options[o.name] ?? null]);
  return createHash("sha256").update(JSON.stringify(picked)).digest("hex").slice(0, 16);
}

const DEFAULT_CONFIG = JSON.stringify({ compilerOptions: {}, exclude: ["node_modules"] });

function parseConfig(ts: Compiler, configPath: string | null, host: ts.ParseConfigHost): ts.ParsedCommandLine {
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
  ts: Compiler,
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
 * fingerprint. Duplicates (same code, place and message) are reported once. `compiler` is the
 * one that produced them (default: the bundled default compiler).
 */
export function toAspDiagnostics(raw: readonly ts.Diagnostic[], compiler: Compiler = ts): Diagnostic[] {
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
    const message = compiler.flattenDiagnosticMessageText(d.messageText, "\n").replaceAll(`${ROOT}/`, "");
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
