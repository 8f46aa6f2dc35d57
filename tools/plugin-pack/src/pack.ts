import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire, isBuiltin as isBuiltinModule } from "node:module";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { type Digest, type PluginManifest, validate } from "@asp/contracts";
import { type KeyPair, MANIFEST_FILE, readSecretKey, signPlugin } from "@asp/plugin-host";
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
  /**
   * The manifest, relative to the package (default `asp-plugin.json`, else `plugin/asp-plugin.json`:
   * the template layout).
   */
  readonly manifest?: string;
  /**
   * The built entry to bundle, relative to the package (default `dist/main.js`; with the manifest
   * in a folder such as `plugin/`, the manifest's `entry` inside that folder).
   */
  readonly entry?: string;
  /** Files copied next to the bundle, e.g. TypeScript's default lib `.d.ts` files. */
  readonly assets?: ReadonlyArray<{
    readonly package: string;
    readonly dir: string;
    readonly match: string;
    /** The folder inside the plugin the files go to (default: the plugin's root, next to the entry). */
    readonly to?: string;
  }>;
  /**
   * More dependencies bundled on their own, each into one ESM file inside the plugin (e.g. other
   * TypeScript compilers, `compilers/4.9/typescript.mjs`), for code the entry imports by path at
   * run time: like the entry, each may import only `node:` builtins, and each is covered by the
   * signed digest. `package` is resolved from the plugin package (an npm alias works).
   */
  readonly modules?: ReadonlyArray<{ readonly package: string; readonly out: string }>;
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
  /** The plugin's tree digest, as signed (what policy pins and grants). */
  readonly digest: Digest;
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
        `${input} imports ${JSON.stringify(what)} (${imp.kind}), which is not bundled: a packed plugin may import only node: builtins, so that its signed digest covers all the code that runs`,
        {
          data: { import: what, importer: input, kind: imp.kind },
          next: `install ${JSON.stringify(what)} as a dependency of the plugin package so it is bundled, or, for an optional module required inside a try, list it in package.json aspPlugin.absent`,
        },
      );
    }
  }
}

function readJson(path: string, code: "ASP_PACK_BAD_PACKAGE" | "ASP_PACK_BAD_MANIFEST", next: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new PackError(
      code,
      `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      {
        cause: error,
        data: { path },
        next,
      },
    );
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new PackError(code, `${path} is not JSON: ${(error as Error).message}`, {
      cause: error,
      data: { path },
      next,
    });
  }
}

/** A relative path that stays inside the plugin folder (no `..`, not absolute, not empty). */
const isInsidePath = (v: unknown): v is string =>
  typeof v === "string" && v !== "" && !isAbsolute(v) && !v.split(/[\\/]/).some((seg) => seg === ".." || seg === "");

const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((a) => typeof a === "string");

/**
 * The `aspPlugin` section of the package's package.json, checked field by field.
 *
 * @throws PackError `ASP_PACK_BAD_PACKAGE` naming the malformed field.
 */
function readConfig(root: string): PackConfig {
  const path = join(root, "package.json");
  const pkg = readJson(
    path,
    "ASP_PACK_BAD_PACKAGE",
    "run asp-plugin-pack in the plugin package's folder (the one with package.json), or pass that folder as DIR",
  ) as { aspPlugin?: unknown } | null;
  const config = (typeof pkg === "object" && pkg !== null ? pkg.aspPlugin : undefined) ?? {};
  const bad = (field: string, want: string): never => {
    throw new PackError("ASP_PACK_BAD_PACKAGE", `${path}: aspPlugin${field} must be ${want}`, {
      data: { path, field: `aspPlugin${field}` },
      next: `fix aspPlugin${field} in ${path} (see tools/plugin-pack/README.md), or remove it to use the default`,
    });
  };
  if (typeof config !== "object" || config === null || Array.isArray(config)) return bad("", "an object");
  const c = config as Record<string, unknown>;
  for (const field of ["manifest", "entry"] as const) {
    const v = c[field];
    if (v !== undefined && (typeof v !== "string" || v === "" || isAbsolute(v)))
      bad(`.${field}`, "a path relative to the package");
  }
  if (c.absent !== undefined && !isStringArray(c.absent)) bad(".absent", "an array of module names");
  /** An optional array whose every entry is an object that `ok` accepts. */
  const badList = (v: unknown, ok: (o: Record<string, unknown>) => boolean): boolean =>
    v !== undefined &&
    !(
      Array.isArray(v) &&
      v.every((o: unknown) => typeof o === "object" && o !== null && ok(o as Record<string, unknown>))
    );
  if (
    badList(
      c.assets,
      (a) =>
        ["package", "dir", "match"].every((k) => typeof a[k] === "string") &&
        (a.to === undefined || isInsidePath(a.to)),
    )
  ) {
    bad(".assets", "an array of { package, dir, match, to? } strings (to: a folder inside the plugin)");
  }
  if (badList(c.modules, (m) => typeof m.package === "string" && isInsidePath(m.out) && m.out.endsWith(".mjs"))) {
    bad(".modules", "an array of { package, out } with out a .mjs path inside the plugin");
  }
  return c as PackConfig;
}

/** Where a package keeps its manifest and the entry to bundle. */
interface Layout {
  readonly manifestPath: string;
  readonly manifest: PluginManifest;
  readonly entry: string;
}

/** The template layout: the plugin folder `plugin/` holds the manifest and the entry. */
const TEMPLATE_MANIFEST = `plugin/${MANIFEST_FILE}`;

/**
 * Find the manifest (`aspPlugin.manifest`, else `asp-plugin.json`, else `plugin/asp-plugin.json`)
 * and the entry to bundle (`aspPlugin.entry`, else the manifest's entry next to a manifest in a
 * folder, else `dist/main.js`).
 *
 * @throws PackError `ASP_PACK_NO_MANIFEST`, `ASP_PACK_BAD_MANIFEST`, `ASP_PACK_NO_ENTRY`.
 */
function locate(root: string, config: PackConfig): Layout {
  const candidates = config.manifest !== undefined ? [config.manifest] : [MANIFEST_FILE, TEMPLATE_MANIFEST];
  const rel = candidates.find((c) => existsSync(join(root, c)));
  if (rel === undefined) {
    throw new PackError("ASP_PACK_NO_MANIFEST", `no plugin manifest in ${root} (looked for ${candidates.join(", ")})`, {
      data: { dir: root, searched: candidates },
      next: `create ${TEMPLATE_MANIFEST} (copy plugins/provider-example, see docs/plugins.md), or set aspPlugin.manifest in package.json`,
    });
  }
  const manifestPath = join(root, rel);
  const fixManifest = `fix ${manifestPath} against the plugin-manifest schema (docs/plugins.md, section 1)`;
  const result = validate("plugin-manifest", readJson(manifestPath, "ASP_PACK_BAD_MANIFEST", fixManifest));
  if (!result.ok) {
    const first = result.errors[0];
    throw new PackError("ASP_PACK_BAD_MANIFEST", `${manifestPath} is invalid: ${first?.pointer} ${first?.message}`, {
      data: { path: manifestPath, errors: result.errors },
      next: fixManifest,
    });
  }
  const manifest = result.value;
  const manifestDir = dirname(manifestPath);
  const entry =
    config.entry !== undefined
      ? join(root, config.entry)
      : manifestDir === root
        ? join(root, "dist/main.js")
        : join(manifestDir, manifest.entry);
  if (!existsSync(entry) || !statSync(entry).isFile()) {
    throw new PackError("ASP_PACK_NO_ENTRY", `the entry to bundle, ${entry}, does not exist`, {
      data: { entry },
      next: "build the package first (pnpm build), or set aspPlugin.entry in package.json to the built entry",
    });
  }
  return { manifestPath, manifest, entry };
}

/** The nearest folder at or above `from` whose package.json has a name, with its name and version. */
function owningPackage(from: string): { dir: string; name: string; version: string } | null {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      try {
        const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: unknown; version?: unknown };
        if (typeof pkg.name === "string" && pkg.name !== "") {
          return { dir, name: pkg.name, version: typeof pkg.version === "string" ? pkg.version : "0.0.0" };
        }
      } catch {
        // A package.json that is not JSON names nothing: keep looking upward.
      }
    }
    if (dirname(dir) === dir) return null;
  }
}

/**
 * A name for a bundled input that does not depend on where the package or its dependencies sit
 * on disk: the package's own files keep their path inside the package; any other file (a
 * dependency under `node_modules`, pnpm's `.pnpm/<name>@<version>/...`, a linked workspace
 * package) becomes `<package name>@<version>/<path inside that package>`. esbuild prints each
 * input's path relative to the working folder (`// ../../node_modules/.pnpm/...` comments and
 * `__commonJS({ "<path>"() {} })` keys), so without this the bundle, and the signed digest,
 * changed with the checkout's location and the package manager's layout.
 *
 * @throws PackError `ASP_PACK_UNSTABLE_PATH` for a file outside the package that no named package owns.
 */
function stableName(root: string, input: string): string {
  // Inputs of our own namespaces (`asp-builtin-cjs:node:fs`) name no file.
  if ([BUILTIN_CJS, BUILTIN_ESM, ABSENT].some((ns) => input.startsWith(`${ns}:`))) return input;
  const abs = resolve(root, input);
  const inside = relative(root, abs);
  if (!inside.startsWith("..") && !isAbsolute(inside) && !inside.split(sep).includes("node_modules")) {
    return inside.split(sep).join("/");
  }
  const owner = owningPackage(dirname(abs));
  if (owner === null || owner.dir === root) {
    throw new PackError("ASP_PACK_UNSTABLE_PATH", `bundled file ${abs} belongs to no named package`, {
      data: { input },
      next: "move the file into the plugin package, or into a dependency with a package.json that has a name and version",
    });
  }
  return `${owner.name}@${owner.version}/${relative(owner.dir, abs).split(sep).join("/")}`;
}

/**
 * Rewrite every location-dependent input path esbuild printed into `code` to its
 * {@link stableName}, then make sure none is left.
 *
 * @throws PackError `ASP_PACK_UNSTABLE_PATH` when a path could not be rewritten.
 */
function withStablePaths(root: string, code: string, metafile: Metafile): string {
  let out = code;
  const renamed: Array<[string, string]> = [];
  for (const input of Object.keys(metafile.inputs).sort()) {
    const name = stableName(root, input);
    if (name === input) continue;
    renamed.push([input, name]);
    // The module comment (non-minified output), the key of a CommonJS / lazy ESM wrapper, and
    // the file heading a legal comment at the end of the bundle.
    out = out
      .split(`// ${input}\n`)
      .join(`// ${name}\n`)
      .split(`${JSON.stringify(input)}(`)
      .join(`${JSON.stringify(name)}(`)
      .split(`\n${input}:\n`)
      .join(`\n${name}:\n`);
  }
  // Fail closed: a build path esbuild printed somewhere else would make the digest depend on
  // where the package sits. (The package's own absolute path is not searched for: a short one,
  // such as a container's `/app`, also occurs in ordinary strings.)
  const left = renamed.find(([input]) => out.includes(input));
  if (left !== undefined) {
    const what = left[0];
    throw new PackError("ASP_PACK_UNSTABLE_PATH", `the bundle still names the build path ${what}`, {
      data: { path: what },
      next: "report this to the toolkit's maintainers with the package layout; a bundle that names build paths would not reproduce elsewhere",
    });
  }
  return out;
}

/**
 * Read the signing key before anything is built, so a bad key fails first and says how to make one.
 *
 * @throws PackError `ASP_PACK_BAD_KEY`.
 */
function readKey(keyFile: string): KeyPair {
  try {
    return readSecretKey(keyFile);
  } catch (error) {
    throw new PackError("ASP_PACK_BAD_KEY", `cannot use ${keyFile} as a signing key: ${(error as Error).message}`, {
      cause: error,
      data: { key: keyFile },
      next: "pass the secret key written by `asp plugin keygen --out PATH` with --key PATH (or ASP_PLUGIN_SIGNING_KEY)",
    });
  }
}

/**
 * Bundle `entry` and everything it imports into one ESM file for `outfile` (not written):
 * only `node:` builtins left to the runtime, no build path left in the text.
 *
 * @throws PackError `ASP_PACK_BUNDLE_FAILED`, `ASP_PACK_EXTERNAL_IMPORT`, `ASP_PACK_UNSTABLE_PATH`.
 */
async function bundleFile(root: string, entry: string, outfile: string, absent: readonly string[]): Promise<string> {
  const result = await build({
    absWorkingDir: root,
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    banner: { js: BANNER },
    plugins: [nodeBuiltins(absent)],
    legalComments: "eof",
    charset: "ascii",
    logLevel: "silent",
    metafile: true,
    write: false,
  }).catch((error: unknown) => {
    const first = (error as { errors?: Array<{ text?: string }> }).errors?.[0]?.text;
    throw new PackError("ASP_PACK_BUNDLE_FAILED", `bundling ${entry} failed: ${first ?? (error as Error).message}`, {
      cause: error,
      data: { entry },
      next: "fix the error above in the entry or install the missing dependency, then pack again",
    });
  });
  assertOnlyBuiltinImports(result.metafile);
  const bundle = result.outputFiles.find((f) => f.path === outfile);
  if (bundle === undefined || result.outputFiles.length !== 1) {
    throw new PackError("ASP_PACK_BUNDLE_FAILED", `bundling ${entry} produced ${result.outputFiles.length} files`, {
      data: { entry, outputs: result.outputFiles.map((f) => f.path) },
      next: "bundle a single entry with no dynamic chunks or file loaders",
    });
  }
  return withStablePaths(root, bundle.text, result.metafile);
}

/**
 * Pack the plugin package at `packageDir`: bundle its entry and every dependency into one
 * file named by the manifest's `entry` (so the signed digest covers all the code that runs),
 * copy its manifest and assets into `dist/plugin/`, and sign that folder with `keyFile`.
 *
 * Accepts both layouts: `asp-plugin.json` at the package root with a built `dist/main.js`, and
 * the template's `plugin/asp-plugin.json` with the entry beside it (see {@link PackConfig}).
 *
 * Reproducible: the same sources and dependency versions give byte-identical files and the same
 * digest wherever the package sits on disk and whichever package manager laid out
 * `node_modules` (no build path is left in the bundle; files are written in a fixed order).
 *
 * The bundle imports nothing but `node:` builtins (read from esbuild's metafile) and has no
 * runtime `require` resolver, so no code can come from a parent `node_modules`.
 *
 * @throws PackError `ASP_PACK_BAD_PACKAGE`, `ASP_PACK_NO_MANIFEST`, `ASP_PACK_BAD_MANIFEST`,
 *   `ASP_PACK_NO_ENTRY`, `ASP_PACK_BAD_KEY`, `ASP_PACK_BUNDLE_FAILED`, `ASP_PACK_EXTERNAL_IMPORT`,
 *   `ASP_PACK_UNSTABLE_PATH`, `ASP_PACK_NO_ASSET`; each names the next step (`data.next`).
 * @example
 * ```ts
 * const { id, digest, dir } = await packPlugin("plugins/provider-todo", "keys/team");
 * ```
 */
export async function packPlugin(packageDir: string, keyFile: string): Promise<PackResult> {
  const root = resolve(packageDir);
  const config = readConfig(root);
  const { manifest, entry } = locate(root, config);
  const key = readKey(keyFile);
  const out = join(root, PACKED_DIR);

  const code = await bundleFile(root, entry, join(out, manifest.entry), config.absent ?? []);
  const requireFromPackage = createRequire(join(root, "package.json"));
  const modules: Array<[string, string]> = [];
  for (const mod of config.modules ?? []) {
    let modEntry: string;
    try {
      modEntry = requireFromPackage.resolve(mod.package);
    } catch (error) {
      throw new PackError("ASP_PACK_NO_ASSET", `module package ${mod.package} cannot be resolved from ${root}`, {
        cause: error,
        data: { module: mod },
        next: `add ${mod.package} to the plugin package's dependencies and install, or remove it from aspPlugin.modules`,
      });
    }
    modules.push([mod.out, await bundleFile(root, modEntry, join(out, mod.out), config.absent ?? [])]);
  }

  rmSync(out, { recursive: true, force: true });
  mkdirSync(dirname(join(out, manifest.entry)), { recursive: true });
  writeFileSync(join(out, manifest.entry), code);
  writeFileSync(join(out, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  for (const [rel, text] of modules) {
    mkdirSync(dirname(join(out, rel)), { recursive: true });
    writeFileSync(join(out, rel), text);
  }
  for (const asset of config.assets ?? []) {
    let pkgDir: string;
    try {
      pkgDir = dirname(requireFromPackage.resolve(`${asset.package}/package.json`));
    } catch (error) {
      throw new PackError("ASP_PACK_NO_ASSET", `asset package ${asset.package} cannot be resolved from ${root}`, {
        cause: error,
        data: { asset },
        next: `add ${asset.package} to the plugin package's dependencies and install, or remove the asset from aspPlugin.assets`,
      });
    }
    const from = join(pkgDir, asset.dir);
    const match = new RegExp(asset.match);
    const files = existsSync(from)
      ? readdirSync(from)
          .filter((f) => match.test(f))
          .sort()
      : [];
    if (files.length === 0) {
      throw new PackError("ASP_PACK_NO_ASSET", `asset ${asset.package}/${asset.dir} matched no file (${asset.match})`, {
        data: { asset },
        next: "fix the asset's dir or match in aspPlugin.assets",
      });
    }
    const to = asset.to === undefined ? out : join(out, asset.to);
    mkdirSync(to, { recursive: true });
    for (const file of files) cpSync(join(from, file), join(to, file));
  }

  const signed = signPlugin(out, key);
  return { id: manifest.id, version: manifest.version, dir: out, digest: signed.digest, manifest };
}
