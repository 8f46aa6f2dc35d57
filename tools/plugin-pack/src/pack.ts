import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire, isBuiltin as isBuiltinModule } from "node:module";
import { dirname, join, resolve } from "node:path";
import { type PluginManifest, validate } from "@asp/contracts";
import { MANIFEST_FILE, signPlugin } from "@asp/plugin-host";
import { build, type Metafile, type Plugin } from "esbuild";
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
  /**
   * Optional modules the code requires inside a try and the plugin does not ship (TypeScript's
   * `source-map-support`): bundled as a module that throws `MODULE_NOT_FOUND`, never resolved at run time.
   */
  readonly absent?: readonly string[];
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

// An ESM bundle of CommonJS dependencies (typescript, vscode-jsonrpc, ajv) reads `__filename`
// and `__dirname` (TypeScript locates its default lib files from them, next to the bundle):
// defined from the bundle's own URL. There is deliberately no `require`: a `createRequire`
// resolver would let a leftover `require` load code from a parent `node_modules`, outside the
// signed digest. CommonJS `require` of a builtin is bundled instead (see `nodeBuiltins`), and
// esbuild's shim throws on any other runtime `require`.
const BANNER = [
  'import { fileURLToPath as __aspFileURLToPath } from "node:url";',
  'import { dirname as __aspDirname } from "node:path";',
  "const __filename = __aspFileURLToPath(import.meta.url);",
  "const __dirname = __aspDirname(__filename);",
].join("\n");

const BUILTIN_CJS = "asp-builtin-cjs";
const BUILTIN_ESM = "asp-builtin-esm";
const ABSENT = "asp-absent";

/** `fs`, `node:fs`, `node:test`: what Node itself serves, never from a folder. */
const isBuiltin = (specifier: string): boolean => isBuiltinModule(specifier);

/**
 * Node builtins, the only thing a packed plugin imports from outside its folder, always as
 * `node:` imports: an `import` becomes an external `node:` import, and a CommonJS `require` of a
 * builtin becomes a bundled module that re-exports the builtin's default export (imported
 * statically, `import m from "node:fs"`), so no runtime `require` is needed. Modules the package
 * declares `absent` (optional dependencies it does not ship, required inside a try) become a
 * module that throws `MODULE_NOT_FOUND` when required.
 */
function nodeBuiltins(absent: readonly string[]): Plugin {
  return {
    name: "asp-node-builtins",
    setup(b) {
      b.onResolve({ filter: new RegExp(`^${BUILTIN_ESM}:`) }, (args) => ({
        path: args.path.slice(BUILTIN_ESM.length + 1),
        namespace: BUILTIN_ESM,
      }));
      b.onResolve({ filter: /.*/ }, (args) => {
        if (absent.includes(args.path)) return { path: args.path, namespace: ABSENT };
        if (!isBuiltin(args.path)) return undefined;
        const path = args.path.startsWith("node:") ? args.path : `node:${args.path}`;
        return args.kind === "require-call" ? { path, namespace: BUILTIN_CJS } : { path, external: true };
      });
      b.onLoad({ filter: /.*/, namespace: BUILTIN_CJS }, (args) => ({
        contents: `module.exports = require(${JSON.stringify(`${BUILTIN_ESM}:${args.path}`)}).default;\n`,
        loader: "js",
      }));
      b.onLoad({ filter: /.*/, namespace: BUILTIN_ESM }, (args) => ({
        contents: `import m from ${JSON.stringify(args.path)};\nexport default m;\n`,
        loader: "js",
      }));
      b.onLoad({ filter: /.*/, namespace: ABSENT }, (args) => ({
        contents: `throw Object.assign(new Error(${JSON.stringify(`Cannot find module '${args.path}' (not shipped in this plugin)`)}), { code: "MODULE_NOT_FOUND" });\n`,
        loader: "js",
      }));
    },
  };
}

/**
 * Every import the bundle leaves to the runtime, from esbuild's metafile: anything but a `node:`
 * builtin would be resolved outside the plugin folder, so outside the signed digest.
 *
 * @throws PackError `ASP_PACK_EXTERNAL_IMPORT` naming the first such import and its importer.
 */
function assertOnlyBuiltinImports(metafile: Metafile): void {
  for (const [input, { imports }] of Object.entries(metafile.inputs)) {
    for (const imp of imports) {
      // `<runtime>` is esbuild's own helper module, part of the bundle.
      if (imp.external !== true || imp.path === "<runtime>" || (imp.path.startsWith("node:") && isBuiltin(imp.path)))
        continue;
      const what = imp.original ?? imp.path;
      throw new PackError(
        "ASP_PACK_EXTERNAL_IMPORT",
        `${input} imports ${JSON.stringify(what)} (${imp.kind}), which is not bundled: a packed plugin may import only node: builtins, so that its signed digest covers all the code that runs. Bundle it (install it as a dependency), or, for an optional module the code requires inside a try, list it in aspPlugin.absent`,
        { data: { import: what, importer: input, kind: imp.kind } },
      );
    }
  }
}

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
 * The bundle imports nothing but `node:` builtins (read from esbuild's metafile) and has no
 * runtime `require` resolver, so no code can come from a parent `node_modules`.
 *
 * @throws PackError `ASP_PACK_BAD_PACKAGE` (no or invalid `asp-plugin.json`, missing entry or asset),
 *   `ASP_PACK_BUNDLE_FAILED` (esbuild errors), `ASP_PACK_EXTERNAL_IMPORT` (the bundle would import
 *   something other than a `node:` builtin); PluginError from signing (bad key).
 */
export async function packPlugin(packageDir: string, keyFile: string): Promise<PackResult> {
  const root = resolve(packageDir);
  const pkg = readJson(join(root, "package.json"), "package.json") as { aspPlugin?: PackConfig };
  const config = pkg.aspPlugin ?? {};
  if (
    config.absent !== undefined &&
    !(Array.isArray(config.absent) && config.absent.every((a) => typeof a === "string"))
  ) {
    throw new PackError("ASP_PACK_BAD_PACKAGE", "aspPlugin.absent must be an array of module names", {
      data: { absent: config.absent },
    });
  }
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
    plugins: [nodeBuiltins(config.absent ?? [])],
    legalComments: "eof",
    logLevel: "silent",
    metafile: true,
  }).catch((error: unknown) => {
    throw new PackError("ASP_PACK_BUNDLE_FAILED", `bundling ${entry} failed: ${(error as Error).message}`, {
      cause: error,
    });
  });
  if (result.errors.length > 0) {
    throw new PackError("ASP_PACK_BUNDLE_FAILED", `bundling ${entry} failed: ${result.errors[0]?.text}`);
  }
  assertOnlyBuiltinImports(result.metafile);

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
