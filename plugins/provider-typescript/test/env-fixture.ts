import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import type { Diagnostic } from "@asp/contracts";
import { createMemoryStore, type Digest, snapshotEnvironment, snapshotWorktree } from "@asp/evidence";
import { MemoryRepo } from "@asp/sdk/testing";

// Fixture projects on disk with real installed packages copied from this workspace, the real
// `tsc` run over them, and the same tree + environment loaded into a MemoryRepo for the checker.

const WORKSPACE = fileURLToPath(new URL("../../../", import.meta.url));
const PNPM_STORE = join(WORKSPACE, "node_modules/.pnpm");
/** The workspace's own compiler (the one the provider bundles). */
export const TSC = join(dirname(createRequire(import.meta.url).resolve("typescript/package.json")), "bin/tsc");

/** A real package of this workspace: where pnpm keeps it, its name and version. */
export interface RealPackage {
  readonly name: string;
  readonly version: string;
  /** The package's own folder (a real folder in pnpm's virtual store). */
  readonly dir: string;
  /** Its dependencies among the fixture packages. */
  readonly deps: readonly string[];
}

/** Find `name` in this workspace's pnpm store (the first version whose folder name starts with it). */
export function realPackage(name: string, deps: readonly string[] = [], version?: string): RealPackage {
  const prefix = `${name.replace("/", "+")}@${version ?? ""}`;
  const entry = readdirSync(PNPM_STORE)
    .filter((e) => e.startsWith(prefix) && !e.slice(prefix.length).includes("_"))
    .sort()
    .pop();
  if (entry === undefined) throw new Error(`${name} is not installed in this workspace`);
  const dir = join(PNPM_STORE, entry, "node_modules", name);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version: string };
  return { name, version: pkg.version, dir, deps };
}

/** The packages the fixtures install: exports with `types` conditions, `@types/*` with a dependency, plain `types`. */
export const PACKAGES: readonly RealPackage[] = [
  realPackage("@sinclair/typebox"),
  realPackage("vscode-jsonrpc"),
  realPackage("@types/node", ["undici-types"], "20."),
  realPackage("undici-types"),
];

/** A tsconfig package authored in the fixture's node_modules, for `extends: "@fixture/tsconfig"`. */
const TSCONFIG_PACKAGE: Record<string, string> = {
  "package.json": JSON.stringify({ name: "@fixture/tsconfig", version: "1.0.0", files: ["tsconfig.json"] }),
  "tsconfig.json": JSON.stringify({
    compilerOptions: {
      target: "ES2022",
      lib: ["ES2022"],
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      types: ["node"],
      skipLibCheck: true,
    },
  }),
};

/** How the dependencies are installed. */
export type Layout = "npm" | "pnpm" | "yarn";

/** One fixture project on disk. */
export interface Fixture {
  readonly dir: string;
  readonly layout: Layout;
  /** Write (or, with null, delete) project files. */
  write(files: Readonly<Record<string, string | null>>): void;
  /** Remove an installed package the way the package manager would leave it uninstalled. */
  uninstall(name: string): void;
  remove(): void;
}

function writeAll(root: string, files: Readonly<Record<string, string | null>>): void {
  for (const [path, text] of Object.entries(files)) {
    const at = join(root, path);
    if (text === null) rmSync(at, { force: true, recursive: true });
    else {
      mkdirSync(dirname(at), { recursive: true });
      writeFileSync(at, text);
    }
  }
}

/**
 * A project folder with `PACKAGES` and the tsconfig package installed in `layout`:
 * - npm: every package a real folder at `node_modules/<name>` (flat);
 * - yarn (classic): the same flat tree plus `yarn.lock` and `node_modules/.yarn-integrity`;
 * - pnpm: real folders at `node_modules/.pnpm/<name>@<ver>/node_modules/<name>`, each package's
 *   dependencies as relative links next to it, and `node_modules/<name>` a relative link into it.
 */
export function createFixture(layout: Layout, extraLinks: Readonly<Record<string, string>> = {}): Fixture {
  const dir = mkdtempSync(join(tmpdir(), `asp-ts-${layout}-`));
  const nm = join(dir, "node_modules");
  mkdirSync(nm, { recursive: true });
  const all: RealPackage[] = [...PACKAGES, { name: "@fixture/tsconfig", version: "1.0.0", dir: "", deps: [] }];
  const place = (pkg: RealPackage, to: string): void => {
    mkdirSync(dirname(to), { recursive: true });
    if (pkg.dir === "") writeAll(to, TSCONFIG_PACKAGE);
    else cpSync(pkg.dir, to, { recursive: true });
  };
  if (layout === "pnpm") {
    const storeDir = (p: RealPackage) => `.pnpm/${p.name.replace("/", "+")}@${p.version}/node_modules`;
    for (const pkg of all) {
      place(pkg, join(nm, storeDir(pkg), pkg.name));
      for (const dep of pkg.deps) {
        const target = all.find((p) => p.name === dep) as RealPackage;
        const link = join(nm, storeDir(pkg), dep);
        mkdirSync(dirname(link), { recursive: true });
        symlinkSync(relative(dirname(link), join(nm, storeDir(target), dep)), link);
      }
      const top = join(nm, pkg.name);
      mkdirSync(dirname(top), { recursive: true });
      symlinkSync(relative(dirname(top), join(nm, storeDir(pkg), pkg.name)), top);
    }
    writeFileSync(join(nm, ".modules.yaml"), "layoutVersion: 5\nnodeLinker: isolated\n");
    writeFileSync(join(dir, "pnpm-lock.yaml"), "lockfileVersion: '9.0'\n");
  } else {
    for (const pkg of all) place(pkg, join(nm, pkg.name));
    if (layout === "yarn") {
      const lock = all.map((p) => `"${p.name}@^${p.version}":\n  version "${p.version}"\n`).join("\n");
      writeFileSync(join(dir, "yarn.lock"), `# yarn lockfile v1\n\n\n${lock}`);
      writeFileSync(join(nm, ".yarn-integrity"), JSON.stringify({ systemParams: "linux-x64-115", flags: [] }));
    } else writeFileSync(join(nm, ".package-lock.json"), JSON.stringify({ name: "fixture", lockfileVersion: 3 }));
  }
  for (const [link, target] of Object.entries(extraLinks)) {
    mkdirSync(dirname(join(dir, link)), { recursive: true });
    symlinkSync(target, join(dir, link));
  }
  writeFileSync(join(dir, ".gitignore"), "node_modules/\ndist/\n*.tsbuildinfo\n");
  return {
    dir,
    layout,
    write: (files) => writeAll(dir, files),
    uninstall(name) {
      rmSync(join(nm, name), { recursive: true, force: true });
      if (layout === "pnpm") {
        const pkg = all.find((p) => p.name === name) as RealPackage;
        rmSync(join(nm, `.pnpm/${pkg.name.replace("/", "+")}@${pkg.version}`), { recursive: true, force: true });
      }
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** One diagnostic as both sides can state it: file (relative, or "" for none), 1-based line and column, TS code. */
export type Finding = string;

/** Run the real `tsc` in `dir` (`-p` with `--noEmit`, or `-b`; default the workspace's own compiler); its findings, sorted. */
export function runTsc(dir: string, mode: "project" | "build", project = "tsconfig.json", tsc = TSC): Finding[] {
  const args =
    mode === "build" ? ["-b", project, "--pretty", "false"] : ["--noEmit", "-p", project, "--pretty", "false"];
  const r = spawnSync(process.execPath, [tsc, ...args], { cwd: dir, encoding: "utf8" });
  if (r.error !== undefined) throw r.error;
  const out: Finding[] = [];
  for (const line of r.stdout.split("\n")) {
    const m = /^(.+?)\((\d+),(\d+)\): (?:error|warning) TS(\d+):/.exec(line);
    if (m !== null) out.push(`${m[1]}:${m[2]}:${m[3]} TS${m[4]}`);
    else {
      const g = /^(?:error|warning) TS(\d+):/.exec(line);
      if (g !== null) out.push(`:0:0 TS${g[1]}`);
    }
  }
  if (out.length === 0 && r.status !== 0) throw new Error(`tsc failed without diagnostics: ${r.stdout}${r.stderr}`);
  return out.sort();
}

/** The provider's diagnostics in the same shape (errors and warnings, as tsc prints them). */
export function findingsOf(diagnostics: readonly Diagnostic[]): Finding[] {
  return diagnostics
    .filter((d) => d.severity === "error" || d.severity === "warning")
    .map((d) =>
      d.range === undefined
        ? `:0:0 TS${d.code.slice(3)}`
        : `${d.range.path}:${d.range.start.line + 1}:${d.range.start.character + 1} TS${d.code.slice(3)}`,
    )
    .sort();
}

/** The project's tree (`.gitignore` honoured) and its dependency environment, loaded into a MemoryRepo. */
export async function snapshotFixture(
  dir: string,
  roots: readonly string[] = ["node_modules"],
  repo: MemoryRepo = new MemoryRepo(),
): Promise<{
  repo: MemoryRepo;
  tree: string;
  environment: { tree: string; roots: string[] } | null;
  envTrees: number;
}> {
  const store = await createMemoryStore();
  try {
    const snap = await snapshotWorktree(dir, { store });
    const env = await snapshotEnvironment(dir, roots, { store });
    let envTrees = 0;
    const copy = async (digest: string, counting: boolean): Promise<void> => {
      if (repo.trees.has(digest)) return;
      const tree = await store.objects.readTree(digest as Digest);
      if (counting) envTrees++;
      repo.trees.set(
        digest,
        tree.entries.map((e) => ({ name: e.name, mode: e.mode, digest: e.digest })),
      );
      for (const e of tree.entries) {
        if (e.mode === "040000") await copy(e.digest, counting);
        else if (!repo.blobs.has(e.digest)) repo.blobs.set(e.digest, await store.objects.readBlob(e.digest));
      }
    };
    await copy(snap.tree, false);
    if (env !== null) await copy(env.tree, true);
    return {
      repo,
      tree: snap.tree,
      environment: env === null ? null : { tree: env.tree, roots: [...env.roots] },
      envTrees,
    };
  } finally {
    await store.close();
  }
}
