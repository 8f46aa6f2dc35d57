import { execFile } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
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

/**
 * Pack every public package (built by `pnpm test`'s build step) with `pnpm pack` into `dest`,
 * as a release would (`workspace:*` rewritten). Throws when a package is not built.
 */
export async function packPublicPackages(dest: string, log: (m: string) => void = () => {}): Promise<PackedPackage[]> {
  for (const p of PUBLIC_PACKAGES) {
    if (!existsSync(join(ROOT, p.dir, "dist/index.js")))
      throw new Error(`${p.dir} is not built: run \`pnpm build\` first (pnpm test builds before vitest runs)`);
  }
  mkdirSync(dest, { recursive: true });
  log(`packing ${PUBLIC_PACKAGES.length} packages into ${dest}`);
  const packed: PackedPackage[] = [];
  for (const p of PUBLIC_PACKAGES) {
    const info = JSON.parse(await sh("pnpm", ["pack", "--json", "--pack-destination", dest], join(ROOT, p.dir))) as {
      filename: string;
    };
    const tarball = info.filename;
    const list = (await sh("tar", ["-tzf", tarball], dest)).split("\n").filter(Boolean);
    const manifest = JSON.parse(await sh("tar", ["-xOzf", tarball, "package/package.json"], dest));
    packed.push({ dir: p.dir, name: p.name, tarball, files: list.map((f) => f.replace(/^package\//, "")), manifest });
  }
  return packed;
}
