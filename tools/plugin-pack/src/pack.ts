import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { type PluginManifest, validate } from "@asp/contracts";
import { MANIFEST_FILE, signPlugin } from "@asp/plugin-host";
import { build } from "esbuild";
import { PackError } from "./errors.js";

/** Where the packed, signed plugin folder goes, relative to the plugin package. */
export const PACKED_DIR = "dist/plugin";

/**
 * `aspPlugin` in a plugin package's package.json: what to bundle and which trusted assets to ship.
 *
 * @example
 * ```json
 * { "aspPlugin": { "entry": "dist/main.js", "assets": [{ "package": "typescript", "dir": "lib", "match": "^lib\\..*\\.d\\.ts$" }] } }
 * ```
 */
export interface PackConfig {
  /** The built entry to bundle (default `dist/main.js`). */
  readonly entry?: string;
  /** Files copied next to the bundle, e.g. TypeScript's default lib `.d.ts` files. */
  readonly assets?: ReadonlyArray<{ readonly package: string; readonly dir: string; readonly match: string }>;
}

/** What {@link packPlugin} produced. */
export interface PackResult {
  readonly id: string;
  readonly version: string;
  /** Absolute path of the signed plugin folder. */
  readonly dir: string;
  /** The plugin's tree digest, as signed. */
  readonly digest: string;
  readonly manifest: PluginManifest;
}

// An ESM bundle of CommonJS dependencies (typescript, vscode-jsonrpc, ajv) needs `require`,
// `__filename` and `__dirname`; TypeScript locates its default lib files from `__dirname`, so
// they resolve next to the bundle.
const BANNER = [
  'import { createRequire as __aspCreateRequire } from "node:module";',
  'import { fileURLToPath as __aspFileURLToPath } from "node:url";',
  'import { dirname as __aspDirname } from "node:path";',
  "const require = __aspCreateRequire(import.meta.url);",
  "const __filename = __aspFileURLToPath(import.meta.url);",
  "const __dirname = __aspDirname(__filename);",
].join("\n");

function readJson(path: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new PackError("ASP_PACK_BAD_PACKAGE", `cannot read ${what} ${path}: ${(error as Error).message}`, {
      cause: error,
      data: { path },
    });
  }
}

/**
 * Pack the plugin package at `packageDir`: bundle its entry and every dependency into one
 * `main.mjs` (so the signed digest covers all the code that runs), copy its manifest and
 * assets, and sign the folder with `keyFile`. The output is deterministic for the same inputs.
 *
 * @throws PackError `ASP_PACK_BAD_PACKAGE` (no or invalid `asp-plugin.json`, missing entry or asset),
 *   `ASP_PACK_BUNDLE_FAILED` (esbuild errors); PluginError from signing (bad key).
 */
export async function packPlugin(packageDir: string, keyFile: string): Promise<PackResult> {
  const root = resolve(packageDir);
  const pkg = readJson(join(root, "package.json"), "package.json") as { aspPlugin?: PackConfig };
  const config = pkg.aspPlugin ?? {};
  const manifestResult = validate("plugin-manifest", readJson(join(root, MANIFEST_FILE), "plugin manifest"));
  if (!manifestResult.ok) {
    const first = manifestResult.errors[0];
    throw new PackError(
      "ASP_PACK_BAD_PACKAGE",
      `${join(root, MANIFEST_FILE)} is invalid: ${first?.pointer} ${first?.message}`,
      {
        data: { errors: manifestResult.errors },
      },
    );
  }
  const manifest = manifestResult.value;
  const entry = join(root, config.entry ?? "dist/main.js");
  if (!existsSync(entry)) {
    throw new PackError("ASP_PACK_BAD_PACKAGE", `entry ${entry} does not exist: build the package first`, {
      data: { entry },
    });
  }
  const out = join(root, PACKED_DIR);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });

  const result = await build({
    absWorkingDir: root,
    entryPoints: [entry],
    outfile: join(out, manifest.entry),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    banner: { js: BANNER },
    legalComments: "eof",
    logLevel: "silent",
    metafile: false,
  }).catch((error: unknown) => {
    throw new PackError("ASP_PACK_BUNDLE_FAILED", `bundling ${entry} failed: ${(error as Error).message}`, {
      cause: error,
    });
  });
  if (result.errors.length > 0) {
    throw new PackError("ASP_PACK_BUNDLE_FAILED", `bundling ${entry} failed: ${result.errors[0]?.text}`);
  }

  writeFileSync(join(out, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  const requireFromPackage = createRequire(join(root, "package.json"));
  for (const asset of config.assets ?? []) {
    const pkgDir = dirname(requireFromPackage.resolve(`${asset.package}/package.json`));
    const from = join(pkgDir, asset.dir);
    const match = new RegExp(asset.match);
    const files = readdirSync(from)
      .filter((f) => match.test(f))
      .sort();
    if (files.length === 0) {
      throw new PackError(
        "ASP_PACK_BAD_PACKAGE",
        `asset ${asset.package}/${asset.dir} matched no file (${asset.match})`,
      );
    }
    for (const file of files) cpSync(join(from, file), join(out, file));
  }

  const signed = signPlugin(out, keyFile);
  return { id: manifest.id, version: manifest.version, dir: out, digest: signed.digest, manifest };
}
