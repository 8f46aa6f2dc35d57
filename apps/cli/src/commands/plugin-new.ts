import { existsSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import type { Command } from "commander";
import { type CliContext, cliVersion } from "../context.js";
import { UsageError } from "../errors.js";
import { inert } from "../terminal.js";
import { FILES_OF } from "./plugin-templates.js";

export { SCAFFOLD_TOOL_VERSIONS } from "./plugin-templates.js";

/** The plugin kinds `asp plugin new` knows (the manifest's `kind`). */
export const PLUGIN_KINDS = ["provider", "verifier", "sandbox"] as const;

/** One of {@link PLUGIN_KINDS}. */
export type PluginKind = (typeof PLUGIN_KINDS)[number];

/**
 * A plugin name: an npm package name without a scope that is also a plugin id (lower case
 * letters, digits, `.`, `_`, `-`, starting with a letter or digit, at most 64 characters).
 */
const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** Options of {@link scaffoldPlugin}. */
export interface ScaffoldOptions {
  /** The plugin's name: package name, plugin id, diagnostic source. */
  readonly name: string;
  /** Default `provider`. */
  readonly kind?: string;
  /** The folder to create (default `./NAME` under `cwd`); it must not exist or be empty. */
  readonly dir?: string;
  /** The `@asp/sdk` dependency: a registry range or a tarball path (default `^<this CLI's version>`). */
  readonly sdk?: string;
  /** Resolves `dir` and a relative tarball `sdk`. */
  readonly cwd: string;
}

/** What {@link scaffoldPlugin} wrote. */
export interface ScaffoldResult {
  readonly name: string;
  readonly kind: PluginKind;
  /** Absolute path of the new project. */
  readonly dir: string;
  /** The `@asp/sdk` spec written into package.json. */
  readonly sdk: string;
  /** The files written, relative to `dir`, in order. */
  readonly files: readonly string[];
}

/** A registry range (`^0.1.0`, `0.1.x`, `latest`) rather than a path to a tarball or folder. */
const isPath = (spec: string): boolean =>
  spec.startsWith(".") || spec.startsWith("/") || spec.startsWith("file:") || /\.(tgz|tar\.gz)$/.test(spec);

/**
 * The `@asp/sdk` spec for package.json: a registry range as given, a path as `file:` + its
 * absolute path (so it still resolves from the new project's folder).
 */
function sdkSpec(spec: string, cwd: string): string {
  if (!isPath(spec)) return spec;
  const path = spec.startsWith("file:") ? spec.slice("file:".length) : spec;
  return `file:${resolve(cwd, path)}`;
}

/**
 * Check the name and kind and pick the folder.
 *
 * @throws UsageError `ASP_CLI_BAD_PLUGIN_NAME` for a name that is not a plugin id / package name;
 *   `ASP_CLI_UNKNOWN_KIND` for a kind outside {@link PLUGIN_KINDS}; `ASP_CLI_DIR_NOT_EMPTY` when the
 *   folder exists and is not an empty folder.
 */
function plan(options: ScaffoldOptions): { kind: PluginKind; dir: string } {
  const { name } = options;
  if (!NAME.test(name)) {
    throw new UsageError(
      "ASP_CLI_BAD_PLUGIN_NAME",
      `${JSON.stringify(name)} is not a plugin name: use lower-case letters, digits, ".", "_" or "-", starting with a letter or digit, at most 64 characters (it becomes the package name, the plugin id and the diagnostic source)`,
      { data: { name } },
    );
  }
  const kind = options.kind ?? "provider";
  if (!(PLUGIN_KINDS as readonly string[]).includes(kind)) {
    throw new UsageError(
      "ASP_CLI_UNKNOWN_KIND",
      `unknown plugin kind ${JSON.stringify(kind)}; use ${PLUGIN_KINDS.join(", ")}`,
      {
        data: { kind, known: PLUGIN_KINDS },
      },
    );
  }
  const dir = resolve(options.cwd, options.dir ?? name);
  if (existsSync(dir) || isDanglingLink(dir)) {
    const st = lstatSync(dir);
    if (!st.isDirectory() || readdirSync(dir).length > 0) {
      throw new UsageError(
        "ASP_CLI_DIR_NOT_EMPTY",
        `${dir} exists and is not an empty folder; asp plugin new never overwrites: pick another name or --dir`,
        { data: { dir } },
      );
    }
  }
  return { kind: kind as PluginKind, dir };
}

function isDanglingLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Write a standalone plugin project of `kind` (default `provider`) that builds, tests, packs, signs
 * and is checked with no edits: package.json (`@asp/sdk` at `sdk`; build, test, conformance,
 * pack and sign scripts), a strict NodeNext tsconfig, `src/main.ts`, a vitest test, the manifest
 * `asp-plugin.json` and a README.
 *
 * - `provider`: a check that flags added `TODO` lines; its test drives the built provider with
 *   `@asp/sdk/testing`; `npm run conformance` runs `asp conformance` on `dist/main.js`.
 * - `verifier`: a Reviewer that flags a subject whose text holds `TODO` (category, claim,
 *   evidence_refs) and a Guardian that denies one named action class (`defineVerifier`);
 *   `npm run conformance -- --trust KEY.pub` runs `asp plugin check` on the packed `dist/plugin`.
 * - `sandbox`: an honest minimal sandbox (`defineSandbox`) whose `launch` returns the provider's
 *   launch unchanged and reports it `advisory`, with direct write and the reason; checked the same way.
 *
 * @throws UsageError `ASP_CLI_BAD_PLUGIN_NAME`, `ASP_CLI_UNKNOWN_KIND`, `ASP_CLI_DIR_NOT_EMPTY`
 *   (nothing is written in any of these cases).
 */
export function scaffoldPlugin(options: ScaffoldOptions): ScaffoldResult {
  const { kind, dir } = plan(options);
  const version = cliVersion();
  const sdk = sdkSpec(options.sdk ?? `^${version}`, options.cwd);
  const files = FILES_OF[kind](options.name, sdk, `^${version}`);
  mkdirSync(dir, { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    const target = join(dir, path);
    mkdirSync(dirname(target), { recursive: true });
    // "wx": never replace a file, even one created since the folder was found empty.
    writeFileSync(target, text, { flag: "wx" });
  }
  return { name: options.name, kind, dir, sdk, files: Object.keys(files) };
}

/** `asp plugin new NAME`: scaffold a standalone plugin project. */
export function registerPluginNew(plugin: Command, ctx: CliContext): void {
  plugin
    .command("new")
    .description(
      "scaffold a standalone plugin project (provider, verifier or sandbox) that builds, tests, packs, signs and is checked as is",
    )
    .argument("<name>", "package name, plugin id and diagnostic source (lower case, e.g. demo-check)")
    .option("--kind <kind>", "provider, verifier or sandbox", "provider")
    .option("--dir <dir>", "the folder to create (default ./NAME); must not exist or be empty")
    .option("--sdk <spec>", "the @asp/sdk dependency: a registry range or a tarball path (default ^<asp version>)")
    .action((name: string, options: { kind: string; dir?: string; sdk?: string }) => {
      const r = scaffoldPlugin({
        name,
        kind: options.kind,
        cwd: ctx.io.cwd,
        ...(options.dir === undefined ? {} : { dir: options.dir }),
        ...(options.sdk === undefined ? {} : { sdk: options.sdk }),
      });
      const rel = relative(ctx.io.cwd, r.dir) || ".";
      ctx.print(
        [
          `created ${inert(r.name)} (${r.kind}) in ${inert(r.dir)}`,
          ...r.files.map((f) => `  ${inert(f)}`),
          `  @asp/sdk ${inert(r.sdk)}`,
          "",
          "next:",
          r.kind === "provider"
            ? `  cd ${inert(rel)} && npm install && npm run build && npm test && npm run conformance`
            : `  cd ${inert(rel)} && npm install && npm run build && npm test && npm run pack:plugin -- --key KEY && npm run conformance -- --trust KEY.pub`,
        ].join("\n"),
        r,
      );
    });
}
