import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { TypeScriptProviderError } from "./errors.js";
import { parentOf } from "./vfs.js";

/** The TypeScript compiler API, as the checker uses it (typed by the default compiler's declarations). */
export type Compiler = typeof ts;

/** A compiler the plugin carries: one per `major.minor` (patch releases do not change what tsc reports). */
export interface BundledCompiler {
  /** `major.minor`, e.g. `5.9`. */
  readonly minor: string;
  /** The exact version bundled, e.g. `5.9.3`. */
  readonly version: string;
  /** The package it comes from (an npm alias of `typescript`); the default compiler is `typescript` itself. */
  readonly spec: string;
}

/**
 * The compilers this plugin bundles, newest first. The first is the default (the checker's own
 * `typescript`), for a project that pins none. The others are packed into the signed plugin as
 * `compilers/<minor>/typescript.mjs` with their own `lib*.d.ts` beside them
 * (package.json `aspPlugin.modules` / `assets`); adding one is a dependency alias plus those two lines.
 */
export const BUNDLED_COMPILERS: readonly BundledCompiler[] = [
  { minor: minorOf(ts.version) as string, version: ts.version, spec: "typescript" },
  { minor: "5.9", version: "5.9.3", spec: "typescript-5.9" },
  { minor: "4.9", version: "4.9.5", spec: "typescript-4.9" },
];

/** `major.minor` of a version (`5.9.3` → `5.9`), or null when it is not one. */
export function minorOf(version: string): string | null {
  const m = /^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$/.exec(version.trim());
  return m === null ? null : `${Number(m[1])}.${Number(m[2])}`;
}

/** Where the project's TypeScript version was read. */
export interface PinnedVersion {
  /** The exact version, when the source names one (installed, lockfile, exact package.json entry). */
  readonly version: string | null;
  /** The declared range, when only package.json names one (`^5.4.0`). */
  readonly range: string | null;
  /** Human-readable: which file said so, e.g. `pnpm-lock.yaml pins 5.4.5`. */
  readonly from: string;
  /** Several versions were found and none of them is the root's: nothing can be chosen truthfully. */
  readonly ambiguous?: readonly string[];
}

/** Reads a repository-relative file of the checked tree or its environment; undefined when absent. */
export type ReadFile = (rel: string) => string | undefined;

const VERSION = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/;

/**
 * The TypeScript version the project's own `tsc` would be, read the way it would be found:
 * 1. the installed `node_modules/typescript/package.json` (in the environment or the tree),
 *    nearest the project's folder first: what `tsc` really runs;
 * 2. the lockfile at the root (`package-lock.json`, `npm-shrinkwrap.json`, `pnpm-lock.yaml`,
 *    `yarn.lock`): what an install would give;
 * 3. `typescript` in the nearest `package.json`'s dependencies or devDependencies (an exact
 *    version, or a range).
 * Null when the project names no TypeScript at all.
 */
export function pinnedTypeScript(read: ReadFile, projectDir: string): PinnedVersion | null {
  const dirs: string[] = [];
  for (let d: string | null = projectDir; d !== null; d = parentOf(d)) dirs.push(d);
  for (const dir of dirs) {
    const rel = join2(dir, "node_modules/typescript/package.json");
    const text = read(rel);
    if (text === undefined) continue;
    const version = jsonField(text, (j) => (j as { version?: unknown }).version);
    if (typeof version === "string" && VERSION.test(version)) {
      return { version, range: null, from: `${rel} is installed at ${version}` };
    }
  }
  const locked = lockfileVersion(read);
  if (locked !== null) return locked;
  for (const dir of dirs) {
    const rel = join2(dir, "package.json");
    const text = read(rel);
    if (text === undefined) continue;
    const spec = jsonField(text, (j) => {
      const p = j as { devDependencies?: Record<string, unknown>; dependencies?: Record<string, unknown> };
      return p.devDependencies?.typescript ?? p.dependencies?.typescript;
    });
    if (typeof spec !== "string") continue;
    const exact = spec.replace(/^=/, "").trim();
    if (VERSION.test(exact)) return { version: exact, range: null, from: `${rel} pins ${exact}` };
    return { version: null, range: spec.slice(0, 200), from: `${rel} asks for ${spec.slice(0, 200)}` };
  }
  return null;
}

function lockfileVersion(read: ReadFile): PinnedVersion | null {
  for (const name of ["package-lock.json", "npm-shrinkwrap.json"]) {
    const text = read(name);
    if (text === undefined) continue;
    const version = jsonField(text, (j) => {
      const l = j as {
        packages?: Record<string, { version?: unknown }>;
        dependencies?: Record<string, { version?: unknown }>;
      };
      return l.packages?.["node_modules/typescript"]?.version ?? l.dependencies?.typescript?.version;
    });
    if (typeof version === "string" && VERSION.test(version)) {
      return { version, range: null, from: `${name} pins ${version}` };
    }
  }
  const pnpm = read("pnpm-lock.yaml");
  if (pnpm !== undefined) {
    const found = pnpmVersions(pnpm);
    const pick = choose(found.all, found.root);
    if (pick !== null) return { ...pick, from: `pnpm-lock.yaml ${pick.from}` };
  }
  const yarn = read("yarn.lock");
  if (yarn !== undefined) {
    const all = new Set<string>();
    // A block's header names the package (`typescript@^5.0.0, typescript@~5.1:` or
    // `"typescript@npm:^5.0.0":`); its `version` line follows.
    const block = /^"?typescript@[^\n]*:\n(?:[ \t]+[^\n]*\n)*?[ \t]+version:? "?([0-9][^"\s]*)"?/gm;
    for (const m of yarn.matchAll(block)) if (VERSION.test(m[1] as string)) all.add(m[1] as string);
    const pick = choose(all, null);
    if (pick !== null) return { ...pick, from: `yarn.lock ${pick.from}` };
  }
  return null;
}

/** Every TypeScript version a pnpm lockfile resolves, and the root importer's. */
function pnpmVersions(text: string): { all: Set<string>; root: string | null } {
  const all = new Set<string>();
  // Package keys: `/typescript@5.4.5:` (v6), `typescript@5.4.5:` (v9), `/typescript/4.9.5:` (v5).
  for (const m of text.matchAll(
    /^\s+['"]?\/?typescript[@/](\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)(?:\([^)]*\))?['"]?:/gm,
  )) {
    all.add(m[1] as string);
  }
  const importerVersion = (section: string): string | null => {
    const v6 = /^\s+typescript:\s*\n\s+specifier:[^\n]*\n\s+version:\s*['"]?(\d+\.\d+\.\d+[^\s('"]*)/m.exec(section);
    if (v6 !== null) return v6[1] as string;
    const v5 = /^\s+typescript:\s*['"]?(\d+\.\d+\.\d+[^\s('"]*)/m.exec(section);
    return v5 === null ? null : (v5[1] as string);
  };
  let root: string | null = null;
  const importers = /^importers:\s*\n([\s\S]*?)(?=^\S|$(?![\s\S]))/m.exec(text);
  if (importers !== null) {
    const dot = /^ {2}['"]?\.['"]?:\s*\n((?: {4}[^\n]*\n|\s*\n)*)/m.exec(importers[1] as string);
    if (dot !== null) root = importerVersion(dot[1] as string);
  } else {
    // A single-project lockfile: the dependency sections are at the top level.
    const top = /^(?:devDependencies|dependencies):\s*\n((?: {2}[^\n]*\n)*)/gm;
    for (const m of text.matchAll(top)) root ??= importerVersion(m[1] as string);
  }
  if (root !== null) all.add(root);
  return { all, root };
}

function choose(all: ReadonlySet<string>, root: string | null): PinnedVersion | null {
  if (root !== null) return { version: root, range: null, from: `pins ${root}` };
  if (all.size === 1) {
    const [only] = all as Set<string>;
    return { version: only as string, range: null, from: `pins ${only}` };
  }
  if (all.size > 1) {
    const versions = [...all].sort();
    return { version: null, range: null, from: `resolves ${versions.join(", ")}`, ambiguous: versions };
  }
  return null;
}

/** The compiler chosen for a project, or why none can answer truthfully. */
export type CompilerChoice =
  | { readonly ok: true; readonly compiler: BundledCompiler; readonly selectedBy: string }
  | { readonly ok: false; readonly reason: string; readonly pinned: PinnedVersion };

/**
 * Choose the bundled compiler equal to the project's pinned `major.minor` (`allowed`: the minors
 * trusted configuration lets answer; default all bundled). A project that pins none gets the
 * default; a range gets the newest allowed compiler inside it. Anything else is no choice: the
 * check is `unsupported`, never answered by another compiler.
 */
export function chooseCompiler(
  pinned: PinnedVersion | null,
  allowed: readonly string[] = BUNDLED_COMPILERS.map((c) => c.minor),
): CompilerChoice {
  const usable = BUNDLED_COMPILERS.filter((c) => allowed.includes(c.minor));
  const list = usable.map((c) => c.minor).join(", ") || "none";
  if (pinned === null) {
    const first = usable[0];
    if (first === undefined) {
      return {
        ok: false,
        reason: "no TypeScript compiler is allowed (--compilers is empty)",
        pinned: { version: null, range: null, from: "" },
      };
    }
    return { ok: true, compiler: first, selectedBy: `the project pins no TypeScript: the default ${first.version}` };
  }
  if (pinned.ambiguous !== undefined) {
    return {
      ok: false,
      pinned,
      reason: `${pinned.from} and none of them at the root: which one the project's tsc is cannot be told; pin one TypeScript version at the root`,
    };
  }
  if (pinned.version !== null) {
    const minor = minorOf(pinned.version);
    const hit = usable.find((c) => c.minor === minor);
    if (hit !== undefined) return { ok: true, compiler: hit, selectedBy: pinned.from };
    return {
      ok: false,
      pinned,
      reason: `${pinned.from}, and this plugin serves TypeScript ${list} only: another compiler would not give the answers of the project's own tsc; pin one of those (major.minor), or use a plugin build that bundles ${minor ?? pinned.version}`,
    };
  }
  const range = pinned.range ?? "";
  const inRange = usable.filter((c) => satisfies(c.version, range));
  const best = inRange[0];
  if (best !== undefined) return { ok: true, compiler: best, selectedBy: `${pinned.from}: the newest bundled in it` };
  return {
    ok: false,
    pinned,
    reason: `${pinned.from}, and no bundled TypeScript (${list}) satisfies it; pin one of those, or install the project's dependencies so the installed version decides`,
  };
}

/**
 * Whether `version` satisfies an npm range, for the forms package.json uses for TypeScript:
 * `^x.y.z`, `~x.y.z`, `x`, `x.y`, `x.y.x`, `>=a <b`, `*`, `latest`, alternatives with `||`.
 * An unknown form satisfies nothing (so it falls to `unsupported`, never a guess).
 */
export function satisfies(version: string, range: string): boolean {
  const v = parts(version);
  if (v === null) return false;
  return range.split("||").some((alt) => {
    const terms = alt.trim().split(/\s+/).filter(Boolean);
    if (terms.length === 0) return false;
    return terms.every((term) => {
      if (term === "*" || term === "latest" || term === "x") return true;
      const m = /^(\^|~|>=|<=|>|<|=)?v?(\d+|x|\*)(?:\.(\d+|x|\*))?(?:\.(\d+|x|\*))?(?:-[0-9A-Za-z.-]+)?$/.exec(term);
      if (m === null) return false;
      const op = m[1] ?? "";
      const nums = [m[2], m[3], m[4]].map((n) => (n === undefined || n === "x" || n === "*" ? null : Number(n)));
      const [maj, min, pat] = nums as [number | null, number | null, number | null];
      const lo = [maj ?? 0, min ?? 0, pat ?? 0] as const;
      const cmp = compare(v, lo);
      if (op === ">=") return cmp >= 0;
      if (op === ">") return cmp > 0;
      if (op === "<=") return cmp <= 0;
      if (op === "<") return cmp < 0;
      if (maj === null) return true;
      if (op === "^") {
        const hi: [number, number, number] =
          maj > 0 ? [maj + 1, 0, 0] : (min ?? 0) > 0 ? [0, (min ?? 0) + 1, 0] : [0, 0, (pat ?? 0) + 1];
        return cmp >= 0 && compare(v, hi) < 0;
      }
      if (op === "~" || min === null || pat === null) {
        // `~x.y.z`, `x.y`, `x`: the same minor (or major when no minor is given).
        const hi: [number, number, number] = min === null ? [maj + 1, 0, 0] : [maj, min + 1, 0];
        return cmp >= 0 && compare(v, hi) < 0;
      }
      return cmp === 0;
    });
  });
}

function parts(version: string): [number, number, number] | null {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version);
  return m === null ? null : [Number(m[1]), Number(m[2]), Number(m[3])];
}

function compare(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
  return 0;
}

/** A loaded compiler and the folder of its own `lib*.d.ts`. */
export interface LoadedCompiler {
  readonly compiler: BundledCompiler;
  readonly ts: Compiler;
  readonly libDir: string;
}

const HERE = (() => {
  try {
    return dirname(fileURLToPath(import.meta.url));
  } catch {
    return null;
  }
})();

/**
 * Load a bundled compiler. Inside a packed plugin (an `asp-plugin.json` next to this module) it
 * is only ever `compilers/<minor>/typescript.mjs` of the plugin folder, covered by the signed
 * digest; as a library, the dependency alias from this package's `node_modules`.
 *
 * @throws TypeScriptProviderError `ASP_TS_UNSUPPORTED_COMPILER` when the bundled files are
 *   missing or the loaded module is another version.
 */
export async function loadCompiler(compiler: BundledCompiler, defaultLibDir: string): Promise<LoadedCompiler> {
  if (compiler.spec === "typescript") return { compiler, ts, libDir: defaultLibDir };
  let mod: unknown;
  let libDir: string;
  const packed = HERE !== null && existsSync(join(HERE, "asp-plugin.json"));
  try {
    if (packed) {
      libDir = join(HERE as string, "compilers", compiler.minor);
      mod = await import(pathToFileURL(join(libDir, "typescript.mjs")).href);
    } else {
      // A variable specifier: the bundler leaves it alone (it is never reached inside a packed plugin).
      const spec = compiler.spec;
      mod = await import(spec);
      libDir = "";
    }
  } catch (cause) {
    throw new TypeScriptProviderError(
      "ASP_TS_UNSUPPORTED_COMPILER",
      `the bundled TypeScript ${compiler.version} cannot be loaded: ${(cause as Error).message}`,
      { category: "internal", cause, data: { compiler: compiler.version } },
    );
  }
  const loaded = ((mod as { default?: unknown }).default ?? mod) as Compiler;
  if (typeof loaded?.version !== "string" || minorOf(loaded.version) !== compiler.minor) {
    throw new TypeScriptProviderError(
      "ASP_TS_UNSUPPORTED_COMPILER",
      `the bundled compiler for ${compiler.minor} is ${String(loaded?.version)}`,
      { category: "internal", data: { compiler: compiler.version } },
    );
  }
  // As a library, the compiler's own folder (where it looks for its libraries itself).
  if (!packed) libDir = dirname(loaded.getDefaultLibFilePath({}));
  if (!existsSync(join(libDir, "lib.es5.d.ts"))) {
    throw new TypeScriptProviderError("ASP_TS_LIB_NOT_FOUND", `no lib.es5.d.ts in ${libDir}`, {
      category: "internal",
      data: { candidates: [libDir] },
    });
  }
  return { compiler: { ...compiler, version: loaded.version }, ts: loaded, libDir: libDir.replaceAll("\\", "/") };
}

function join2(dir: string, rel: string): string {
  return dir === "" ? rel : `${dir}/${rel}`;
}

function jsonField(text: string, pick: (json: unknown) => unknown): unknown {
  try {
    const json: unknown = JSON.parse(text);
    return typeof json === "object" && json !== null ? pick(json) : undefined;
  } catch {
    return undefined;
  }
}
