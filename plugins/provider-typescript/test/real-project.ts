import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

// Real public projects for the parity tests (issue 26 item 2). A project here is a folder of
// test/fixtures/real-projects: its `project.json` names the npm tarballs its sources come from
// (each pinned by the registry's sha512 integrity) and the dependency lockfile beside it pins
// everything it installs. At test time the sources are fetched with `npm pack`, checked against
// the pinned integrity, unpacked, and the dependencies installed by the project's own package
// manager (`npm ci` / `pnpm install --frozen-lockfile`): the folder is then what a developer of
// that project would have on disk, and its own `node_modules/typescript` is the `tsc` to match.

const run = promisify(execFile);
const FIXTURES = fileURLToPath(new URL("./fixtures/real-projects/", import.meta.url));
const WORKSPACE = fileURLToPath(new URL("../../../", import.meta.url));
const STEP_TIMEOUT = 240_000;

/** One edit that injects an error: replace the only occurrence of `find`, or append text. */
export type Injection =
  | { readonly file: string; readonly find: string; readonly replace: string }
  | { readonly file: string; readonly append: string };

/** A fixture's `project.json`. */
export interface RealProjectSpec {
  /** The shape of the project, for the test names and docs. */
  readonly about: string;
  readonly sources: readonly {
    readonly package: string;
    readonly version: string;
    /** `dist.integrity` of the tarball on the npm registry. */
    readonly integrity: string;
    /** Paths inside the tarball (without `package/`) → where they go in the project. */
    readonly take: Readonly<Record<string, string>>;
  }[];
  readonly install: "npm" | "pnpm";
  /** How the project's own tsc runs: `--noEmit -p PROJECT` or `-b PROJECT`. */
  readonly tsc: { readonly mode: "project" | "build"; readonly project: string };
  /** The dependency environment's roots (every `node_modules` the package manager made). */
  readonly roots: readonly string[];
  /** The TypeScript version the lockfile installs: the compiler that must decide. */
  readonly compiler: string;
  readonly inject: readonly Injection[];
}

/** A real project unpacked and installed in a temp folder. */
export interface RealProject {
  readonly name: string;
  readonly spec: RealProjectSpec;
  /** The project folder (the judged repository). */
  readonly dir: string;
  /** The project's own tsc (`node_modules/typescript/bin/tsc`). */
  readonly tsc: string;
  /** Apply every injection, failing when a `find` is not there exactly once. */
  inject(): void;
  /** Delete tsc -b outputs so each build starts from none, like a fresh clone. */
  clean(): void;
  remove(): void;
}

/** The fixture names, in folder order. */
export function realProjectNames(): string[] {
  return readdirSync(FIXTURES, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
}

export function readSpec(name: string): RealProjectSpec {
  return JSON.parse(readFileSync(join(FIXTURES, name, "project.json"), "utf8")) as RealProjectSpec;
}

/** The environment a user's shell would give npm and pnpm: none of the test runner's `npm_*` settings. */
function userEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)));
  return { ...env, COREPACK_ENABLE_DOWNLOAD_PROMPT: "0", CI: "true" };
}

async function sh(cmd: string, args: readonly string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await run(cmd, [...args], {
      cwd,
      timeout: STEP_TIMEOUT,
      maxBuffer: 64 * 1024 * 1024,
      env: userEnv(),
    });
    return stdout;
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(" ")} failed in ${cwd}: ${e.message}\n${e.stdout ?? ""}${e.stderr ?? ""}`);
  }
}

/** Walk the fixture folder (never project.json) into `to`. */
function copyFixture(from: string, to: string): void {
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (entry.name === "project.json") continue;
    cpSync(join(from, entry.name), join(to, entry.name), { recursive: true });
  }
}

/** Fetch, verify, unpack and install the named fixture; the caller removes it. */
export async function prepareRealProject(name: string, log: (line: string) => void = () => {}): Promise<RealProject> {
  const spec = readSpec(name);
  const work = mkdtempSync(join(tmpdir(), `asp-real-${name}-`));
  const dir = join(work, "project");
  const packs = join(work, "packs");
  mkdirSync(dir);
  mkdirSync(packs);
  const remove = () => rmSync(work, { recursive: true, force: true });
  try {
    copyFixture(join(FIXTURES, name), dir);
    for (const source of spec.sources) {
      const ref = `${source.package}@${source.version}`;
      log(`npm pack ${ref}`);
      const out = JSON.parse(
        await sh("npm", ["pack", ref, "--json", "--pack-destination", packs, "--prefer-offline"], packs),
      ) as { filename: string; integrity: string }[];
      const packed = out[0];
      if (packed === undefined) throw new Error(`npm pack ${ref} printed no tarball`);
      if (packed.integrity !== source.integrity)
        throw new Error(
          `${ref}: the registry's tarball has integrity ${packed.integrity}, the fixture pins ${source.integrity}`,
        );
      const unpacked = join(packs, packed.filename.replace(/\.tgz$/, ""));
      mkdirSync(unpacked);
      await sh("tar", ["-xzf", join(packs, packed.filename), "-C", unpacked], packs);
      for (const [inside, to] of Object.entries(source.take)) {
        const at = join(unpacked, "package", inside);
        if (!existsSync(at)) throw new Error(`${ref} has no ${inside}`);
        mkdirSync(dirname(join(dir, to)), { recursive: true });
        cpSync(at, join(dir, to), { recursive: true });
      }
    }
    writeFileSync(join(dir, ".gitignore"), "node_modules/\ndist/\n*.tsbuildinfo\n");
    log(`${spec.install} install in ${dir}`);
    if (spec.install === "npm")
      await sh(
        "npm",
        ["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"],
        dir,
      );
    else
      await sh(
        "pnpm",
        ["install", "--frozen-lockfile", "--ignore-scripts", "--prefer-offline", "--reporter=silent"],
        dir,
      );
    const tsc = join(dir, "node_modules/typescript/bin/tsc");
    const installed = JSON.parse(readFileSync(join(dir, "node_modules/typescript/package.json"), "utf8")) as {
      version: string;
    };
    if (installed.version !== spec.compiler)
      throw new Error(
        `${name}: the lockfile installed TypeScript ${installed.version}, project.json says ${spec.compiler}`,
      );
    return {
      name,
      spec,
      dir,
      tsc,
      inject() {
        for (const edit of spec.inject) {
          const at = join(dir, edit.file);
          const text = readFileSync(at, "utf8");
          if ("append" in edit) {
            writeFileSync(at, `${text}${edit.append}`);
            continue;
          }
          const first = text.indexOf(edit.find);
          if (first < 0 || text.indexOf(edit.find, first + 1) >= 0)
            throw new Error(`${name}: ${JSON.stringify(edit.find)} is not in ${edit.file} exactly once`);
          writeFileSync(at, `${text.slice(0, first)}${edit.replace}${text.slice(first + edit.find.length)}`);
        }
      },
      clean() {
        rmSync(join(dir, "dist"), { recursive: true, force: true });
        const drop = (folder: string): void => {
          for (const e of readdirSync(folder, { withFileTypes: true })) {
            if (e.name === "node_modules") continue;
            if (e.isDirectory()) drop(join(folder, e.name));
            else if (e.name.endsWith(".tsbuildinfo")) rmSync(join(folder, e.name));
          }
        };
        drop(dir);
      },
      remove,
    };
  } catch (error) {
    remove();
    throw error;
  }
}

/** Where the fixtures live, for messages. */
export const REAL_PROJECTS_DIR = FIXTURES.slice(WORKSPACE.length);
