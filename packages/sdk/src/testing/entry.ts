import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

/** The newest modification time of a file under `dir` (0 when it has none). */
function newestUnder(dir: string): number {
  if (!existsSync(dir)) return 0;
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestUnder(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * The built entry of the package at `packageDir` (`entry`, default the `aspPlugin.entry` of its
 * package.json, else `dist/main.js`), first rebuilt with `tsc -b` when it is missing or a file
 * in `src/` is newer. A full build (`pnpm build`) makes this a no-op; it helps a bare `vitest`.
 *
 * @throws Error when the entry is still missing after the build, or TypeScript cannot be found.
 */
export function builtEntry(packageDir: string, entry?: string): string {
  const manifest = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as {
    aspPlugin?: { entry?: string };
  };
  const path = join(packageDir, entry ?? manifest.aspPlugin?.entry ?? "dist/main.js");
  if (!existsSync(path) || statSync(path).mtimeMs < newestUnder(join(packageDir, "src"))) {
    const tsc = createRequire(join(packageDir, "package.json")).resolve("typescript/bin/tsc");
    execFileSync(process.execPath, [tsc, "-b"], { cwd: packageDir, stdio: "inherit" });
  }
  if (!existsSync(path)) throw new Error(`${path} is missing after building ${packageDir}`);
  return path;
}
