import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

export interface WorkspacePackage {
  /** e.g. `packages/evidence` */
  readonly dir: string;
  /** e.g. `@asp/evidence` */
  readonly name: string;
  readonly manifest: {
    name: string;
    private?: boolean;
    type?: string;
    sideEffects?: unknown;
    files?: string[];
    exports?: Record<string, unknown>;
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    scripts?: Record<string, string>;
  };
}

/** Every workspace package (packages/*, plugins/*, apps/*, tools/* with a package.json). */
export function workspacePackages(root = ROOT): WorkspacePackage[] {
  const found: WorkspacePackage[] = [];
  for (const group of ["packages", "plugins", "apps", "tools"]) {
    const groupDir = join(root, group);
    if (!existsSync(groupDir)) continue;
    for (const entry of readdirSync(groupDir).sort()) {
      const file = join(groupDir, entry, "package.json");
      if (!existsSync(file)) continue;
      const manifest = JSON.parse(readFileSync(file, "utf8")) as WorkspacePackage["manifest"];
      found.push({ dir: `${group}/${entry}`, name: manifest.name, manifest });
    }
  }
  return found;
}

/**
 * DESIGN §2: which workspace packages each one may import (the transitive closure of the
 * arrows). `tools/*` and `apps/*` may import any library package; `@asp/test-utils` is allowed
 * everywhere, but only as a devDependency.
 */
const UPSTREAM: Record<string, string[]> = {
  contracts: [],
  evidence: ["contracts"],
  policy: ["contracts", "evidence"],
  arbitration: ["contracts", "evidence", "policy"],
  "plugin-host": ["contracts", "evidence", "policy"],
  protocol: ["contracts"],
  ths: ["contracts", "evidence", "policy", "arbitration", "plugin-host", "protocol"],
  rollout: ["contracts", "evidence"],
  "store-postgres": ["contracts", "evidence"],
  "auto-mode": ["contracts", "evidence", "policy", "arbitration", "plugin-host", "protocol", "ths", "rollout"],
  sdk: ["contracts", "protocol"],
  "test-utils": ["contracts"],
};

/**
 * What a plugin's TESTS may import besides its own allowed packages (as devDependencies only):
 * the host's loader, snapshot and packer, and the Auto Mode runner with its stage flags, so a
 * plugin is proven through the very code that will verify, load, measure and (a Reviewer) select
 * it. Its src never may.
 */
const PLUGIN_TEST_HARNESS: ReadonlySet<string> = new Set([
  "@asp/evidence",
  "@asp/plugin-host",
  "@asp/plugin-pack",
  "@asp/auto-mode",
  "@asp/rollout",
]);

/** Names a package in `dir` may depend on, or `null` for "any library package under packages/". */
export function allowedImports(
  dir: string,
  libraryNames: ReadonlyArray<string>,
  pluginNames: ReadonlyArray<string> = [],
): Set<string> {
  const [group, entry] = dir.split("/") as [string, string];
  if (group === "plugins") return new Set(["@asp/sdk", "@asp/contracts"]);
  // The CLI embeds the conformance kit (`asp conformance`) and runs the server (`asp serve
  // --http`); the server never imports the CLI. The console's end-to-end tests run the server
  // it is served by (its browser code imports only contracts' types). Tools may use any library.
  if (group === "apps") {
    const server = entry === "cli" || entry === "console" ? ["@asp/server"] : [];
    return new Set([...libraryNames, "@asp/conformance", ...server]);
  }
  // Tools (benchmarks, the packer) may use any library, and measure plugins too.
  if (group === "tools") return new Set([...libraryNames, ...pluginNames]);
  const upstream = UPSTREAM[entry];
  if (upstream === undefined) {
    throw new Error(`${dir} is not in the dependency DAG of DESIGN §2: add it to UPSTREAM in test/lib/workspace.ts`);
  }
  return new Set(upstream.map((p) => `@asp/${p}`));
}

/** One import that goes against the DAG, or escapes its package. */
export interface Violation {
  readonly file: string;
  readonly specifier: string;
  readonly why: string;
}

const IMPORT_RE =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|^\s*import\s*["']([^"']+)["']/gm;

/** Import specifiers in a TS/JS source text. */
export function importsOf(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT_RE)) {
    const spec = m[1] ?? m[2] ?? m[3];
    if (spec !== undefined) out.push(spec);
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    if (entry === "node_modules" || entry === "dist" || entry === "fixtures") continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (/\.(?:ts|mts|js|mjs)$/.test(entry) && !entry.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

/**
 * Check one package: its manifest dependencies and every import in src/ and test/ against
 * the DAG; no deep imports (`@asp/x/src/...`); no relative import out of the package.
 */
export function checkPackage(
  pkg: WorkspacePackage,
  libraryNames: ReadonlyArray<string>,
  root = ROOT,
  pluginNames: ReadonlyArray<string> = [],
): Violation[] {
  const allowed = allowedImports(pkg.dir, libraryNames, pluginNames);
  const violations: Violation[] = [];
  const deps = { ...pkg.manifest.dependencies, ...pkg.manifest.peerDependencies };
  for (const dep of Object.keys(deps)) {
    if (dep === "@asp/test-utils")
      violations.push({ file: `${pkg.dir}/package.json`, specifier: dep, why: "test-utils is a devDependency only" });
    else if (dep.startsWith("@asp/") && !allowed.has(dep)) {
      violations.push({
        file: `${pkg.dir}/package.json`,
        specifier: dep,
        why: `${pkg.name} may not depend on ${dep} (DESIGN §2)`,
      });
    }
  }
  // Build tools a package runs but never imports: the plugin packer.
  const buildTools = new Set(["@asp/test-utils", "@asp/plugin-pack"]);
  const harness = pkg.dir.startsWith("plugins/") ? PLUGIN_TEST_HARNESS : new Set<string>();
  for (const dep of Object.keys(pkg.manifest.devDependencies ?? {})) {
    if (dep.startsWith("@asp/") && !buildTools.has(dep) && !harness.has(dep) && !allowed.has(dep)) {
      violations.push({
        file: `${pkg.dir}/package.json`,
        specifier: dep,
        why: `${pkg.name} may not depend on ${dep} (DESIGN §2)`,
      });
    }
  }
  const pkgRoot = join(root, pkg.dir);
  for (const sub of ["src", "test", "bench"]) {
    for (const file of sourceFiles(join(pkgRoot, sub))) {
      const rel = relative(root, file);
      const isTest = sub !== "src";
      for (const spec of importsOf(readFileSync(file, "utf8"))) {
        if (spec.startsWith(".")) {
          const target = relative(pkgRoot, join(file, "..", spec));
          if (target.startsWith(".."))
            violations.push({ file: rel, specifier: spec, why: "relative import out of its package" });
          continue;
        }
        if (!spec.startsWith("@asp/")) continue;
        const base = spec.split("/").slice(0, 2).join("/");
        if (spec !== base && /\/(src|dist)\//.test(`${spec}/`)) {
          violations.push({ file: rel, specifier: spec, why: "deep import: use the package's exports" });
        }
        if (base === pkg.name) continue;
        if (base === "@asp/test-utils" && isTest) continue;
        if (!allowed.has(base) && !(isTest && harness.has(base)))
          violations.push({ file: rel, specifier: spec, why: `${pkg.name} may not import ${base} (DESIGN §2)` });
        else if (
          !(base in { ...pkg.manifest.dependencies, ...pkg.manifest.devDependencies, ...pkg.manifest.peerDependencies })
        ) {
          violations.push({ file: rel, specifier: spec, why: `${base} is imported but not declared in package.json` });
        }
      }
    }
  }
  return violations;
}

/**
 * Files of `pkg` (src/ and test/, fixtures excepted) that import vscode-jsonrpc directly. Above
 * `@asp/protocol` that is a second protocol stack: go through `@asp/protocol` instead.
 */
export function rawProtocolImports(pkg: WorkspacePackage, root = ROOT): string[] {
  const out: string[] = [];
  for (const sub of ["src", "test"]) {
    for (const file of sourceFiles(join(root, pkg.dir, sub))) {
      if (importsOf(readFileSync(file, "utf8")).some((s) => s === "vscode-jsonrpc" || s.startsWith("vscode-jsonrpc/")))
        out.push(relative(root, file));
    }
  }
  return out;
}

/** The TS/JS source files of `pkg` under `subs` (fixtures, dist and node_modules excepted). */
export function sourceFilesOf(pkg: WorkspacePackage, subs: readonly string[], root = ROOT): string[] {
  return subs.flatMap((sub) => sourceFiles(join(root, pkg.dir, sub)));
}
