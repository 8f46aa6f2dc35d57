import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { ROOT, workspacePackages } from "./workspace.js";

const run = promisify(execFile);

/** The packages a user installs: public, outside plugins/ (plugins ship as signed plugin folders). */
export const PUBLIC_PACKAGES = workspacePackages().filter(
  (p) => p.manifest.private !== true && !p.dir.startsWith("plugins/"),
);

/** The environment without the `npm_*` variables the runner (pnpm, npx vitest) sets, so npm acts as a user's would. */
export const USER_ENV: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)),
);

/** One packed public package. */
export interface PackedPackage {
  /** Workspace folder, e.g. `packages/sdk`. */
  readonly dir: string;
  readonly name: string;
  /** Absolute path of the tarball. */
  readonly tarball: string;
  /** Paths inside the tarball, without the leading `package/`. */
  readonly files: readonly string[];
  readonly manifest: {
    license?: string;
    engines?: { node?: string };
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
  };
}

async function sh(cmd: string, args: readonly string[], cwd: string): Promise<string> {
  const { stdout } = await run(cmd, [...args], { cwd, timeout: 240_000, maxBuffer: 16 * 1024 * 1024, env: USER_ENV });
  return stdout;
}

/** What goes into the tarballs, as a key: each package's manifest and the size and mtime of every shipped file. */
function buildKey(): string {
  const hash = createHash("sha256");
  const walk = (path: string): void => {
    if (!existsSync(path)) return;
    const st = statSync(path);
    if (!st.isDirectory()) {
      hash.update(`${path}\0${st.size}\0${st.mtimeMs}\n`);
      return;
    }
    for (const name of readdirSync(path).sort()) walk(join(path, name));
  };
  for (const p of PUBLIC_PACKAGES) {
    const dir = join(ROOT, p.dir);
    hash.update(readFileSync(join(dir, "package.json")));
    for (const f of ["README.md", "API.md", "LICENSE"]) walk(join(dir, f));
    walk(join(dir, "dist"));
  }
  return hash.digest("hex").slice(0, 16);
}

async function packInto(dir: string, log: (m: string) => void): Promise<PackedPackage[]> {
  log(`packing ${PUBLIC_PACKAGES.length} packages into ${dir}`);
  const packed: PackedPackage[] = [];
  for (const p of PUBLIC_PACKAGES) {
    const info = JSON.parse(await sh("pnpm", ["pack", "--json", "--pack-destination", dir], join(ROOT, p.dir))) as {
      filename: string;
    };
    const tarball = info.filename;
    const list = (await sh("tar", ["-tzf", tarball], dir)).split("\n").filter(Boolean);
    const manifest = JSON.parse(await sh("tar", ["-xOzf", tarball, "package/package.json"], dir));
    packed.push({ dir: p.dir, name: p.name, tarball, files: list.map((f) => f.replace(/^package\//, "")), manifest });
  }
  return packed;
}

/**
 * Pack every public package (built by `pnpm test`'s build step) with `pnpm pack`, as a release
 * would (`workspace:*` rewritten), and put the tarballs in `dest`. Packing is done once per build:
 * the tarballs are kept in the system temp folder under a key of what goes into them (manifests,
 * sizes and mtimes of the shipped files), so the install test and the guides pack once between
 * them. Throws when a package is not built.
 */
export async function packPublicPackages(dest: string, log: (m: string) => void = () => {}): Promise<PackedPackage[]> {
  for (const p of PUBLIC_PACKAGES) {
    if (!existsSync(join(ROOT, p.dir, "dist/index.js")))
      throw new Error(`${p.dir} is not built: run \`pnpm build\` first (pnpm test builds before vitest runs)`);
  }
  const cache = join(tmpdir(), `asp-packs-${buildKey()}`);
  const index = join(cache, "packed.json");
  if (!existsSync(index)) {
    const staging = `${cache}.${process.pid}.${Date.now()}`;
    mkdirSync(staging, { recursive: true });
    const packed = await packInto(staging, log);
    writeFileSync(
      join(staging, "packed.json"),
      JSON.stringify(packed.map((p) => ({ ...p, tarball: basename(p.tarball) }))),
    );
    try {
      renameSync(staging, cache);
    } catch {
      // Another test file packed the same build first: use its tarballs.
      rmSync(staging, { recursive: true, force: true });
    }
  } else {
    log(`reusing the tarballs packed for this build in ${cache}`);
  }
  mkdirSync(dest, { recursive: true });
  const cached = JSON.parse(readFileSync(index, "utf8")) as PackedPackage[];
  return cached.map((p) => {
    const tarball = join(dest, p.tarball);
    copyFileSync(join(cache, p.tarball), tarball);
    return { ...p, tarball };
  });
}
