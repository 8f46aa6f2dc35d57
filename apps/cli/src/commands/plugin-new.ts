import { existsSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import type { Command } from "commander";
import { type CliContext, cliVersion } from "../context.js";
import { UsageError } from "../errors.js";
import { inert } from "../terminal.js";

/** The plugin kinds `asp plugin new` knows (the manifest's `kind`). */
export const PLUGIN_KINDS = ["provider", "verifier", "sandbox"] as const;

/** One of {@link PLUGIN_KINDS}. */
export type PluginKind = (typeof PLUGIN_KINDS)[number];

/**
 * Versions of the tools the scaffold's package.json pins. They are this repository's own
 * (root package.json devDependencies; `apps/cli/test/plugin-new.test.ts` keeps them equal), so a
 * scaffold builds and tests with exactly what the toolkit is built and tested with.
 */
export const SCAFFOLD_TOOL_VERSIONS = Object.freeze({
  typescript: "6.0.3",
  vitest: "4.1.12",
  "@types/node": "20.19.43",
});

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
 *   `ASP_CLI_UNKNOWN_KIND` for a kind outside {@link PLUGIN_KINDS}; `ASP_CLI_KIND_UNSUPPORTED` for
 *   `verifier` and `sandbox` (see {@link scaffoldPlugin}); `ASP_CLI_DIR_NOT_EMPTY` when the folder
 *   exists and is not an empty folder.
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
    throw new UsageError("ASP_CLI_UNKNOWN_KIND", `unknown plugin kind ${JSON.stringify(kind)}; use provider`, {
      data: { kind, known: PLUGIN_KINDS },
    });
  }
  if (kind !== "provider") {
    // A scaffold must build, test, pack, sign and pass conformance with no edits. For in-process
    // plugins two of those do not exist today: the conformance kit and @asp/sdk/testing drive
    // provider subprocesses only. Emitting a project that cannot be checked would be a stub.
    throw new UsageError(
      "ASP_CLI_KIND_UNSUPPORTED",
      `asp plugin new cannot scaffold a ${kind} yet: the conformance kit and @asp/sdk/testing drive providers only, so a ${kind} scaffold could not be tested and checked as a provider's is; start from docs/plugins.md ("Verifiers and sandboxes")${kind === "sandbox" ? " and the toolkit's plugins/sandbox-staged-snapshot" : ""}`,
      { data: { kind, supported: ["provider"] } },
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
  return { kind, dir };
}

function isDanglingLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Write a standalone provider plugin project: package.json (`@asp/sdk` at `sdk`, with build,
 * test, conformance, pack and sign scripts), a strict NodeNext tsconfig, `src/main.ts` (a check
 * that flags added `TODO` lines), a vitest test driving the built provider with
 * `@asp/sdk/testing`, the manifest `asp-plugin.json` and a README. The project builds, tests,
 * packs, signs and passes conformance with no edits.
 *
 * Only `provider` is scaffolded: `verifier` and `sandbox` are refused, because the conformance kit
 * and `@asp/sdk/testing` cannot check them yet.
 *
 * @throws UsageError `ASP_CLI_BAD_PLUGIN_NAME`, `ASP_CLI_UNKNOWN_KIND`, `ASP_CLI_KIND_UNSUPPORTED`,
 *   `ASP_CLI_DIR_NOT_EMPTY` (nothing is written in any of these cases).
 */
export function scaffoldPlugin(options: ScaffoldOptions): ScaffoldResult {
  const { kind, dir } = plan(options);
  const version = cliVersion();
  const sdk = sdkSpec(options.sdk ?? `^${version}`, options.cwd);
  const files = providerFiles(options.name, sdk, `^${version}`);
  mkdirSync(dir, { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    const target = join(dir, path);
    mkdirSync(dirname(target), { recursive: true });
    // "wx": never replace a file, even one created since the folder was found empty.
    writeFileSync(target, text, { flag: "wx" });
  }
  return { name: options.name, kind, dir, sdk, files: Object.keys(files) };
}

const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

/** The files of a provider project, by path, in the order they are written. */
function providerFiles(name: string, sdk: string, toolkit: string): Record<string, string> {
  const source = name;
  return {
    "package.json": json({
      name,
      version: "0.1.0",
      private: true,
      description: `An ASP check provider: flags added TODO lines (scaffolded by asp plugin new).`,
      type: "module",
      engines: { node: ">=20.19.0" },
      scripts: {
        build: "tsc -p tsconfig.json",
        test: "vitest run",
        conformance: "asp conformance -- node dist/main.js",
        "pack:plugin": "asp-plugin-pack .",
        sign: "asp plugin sign dist/plugin",
        digest: "asp plugin digest dist/plugin",
      },
      dependencies: { "@asp/sdk": sdk },
      devDependencies: {
        "@asp/cli": toolkit,
        "@asp/plugin-pack": toolkit,
        ...SCAFFOLD_TOOL_VERSIONS,
      },
      aspPlugin: { entry: "dist/main.js" },
    }),
    "tsconfig.json": json({
      compilerOptions: {
        target: "ES2022",
        lib: ["ES2022"],
        module: "NodeNext",
        moduleResolution: "NodeNext",
        types: ["node"],
        strict: true,
        noUncheckedIndexedAccess: true,
        exactOptionalPropertyTypes: true,
        verbatimModuleSyntax: true,
        skipLibCheck: true,
        rootDir: "src",
        outDir: "dist",
      },
      include: ["src"],
    }),
    "asp-plugin.json": json({
      id: name,
      version: "0.1.0",
      kind: "provider",
      entry: "main.js",
      capabilities: ["check"],
      diagnosticSources: [source],
      protocolVersion: "1.0",
      engines: { node: ">=20.19.0" },
    }),
    "src/main.ts": `// An ASP check provider. The host launches the packed bundle (dist/plugin/main.js) as a
// subprocess and speaks JSON-RPC over stdio; the SDK handles framing, initialize, cancellation
// and validAsOf. Keep id, version and diagnosticSources equal to asp-plugin.json.
import { type AssessOutcome, defineProvider } from "@asp/sdk";

const MARKER = /\\bTODO\\b/;

defineProvider({
  initialize: { provider: { id: ${JSON.stringify(name)}, version: "0.1.0" }, diagnosticSources: [${JSON.stringify(source)}] },

  async assess(ctx): Promise<AssessOutcome> {
    const diagnostics: NonNullable<AssessOutcome["diagnostics"]>[number][] = [];
    for (const change of ctx.changes) {
      if (change.after === null || ctx.signal.aborted) continue;
      // Content comes only from the host (host/readBlob), never from the disk.
      const lines = (await ctx.readText(change.after)).split("\\n");
      lines.forEach((line, i) => {
        if (!MARKER.test(line)) return;
        diagnostics.push({
          source: ${JSON.stringify(source)},
          code: ${JSON.stringify(`${source}/todo`)},
          severity: "error",
          message: "A TODO marker was added; resolve it or track it in an issue.",
          range: { path: change.path, start: { line: i, character: 0 }, end: { line: i, character: line.length } },
          fingerprint: \`\${change.path}:\${line.trim()}\`,
        });
      });
    }
    return {
      status: ctx.signal.aborted ? "incomplete" : "complete",
      diagnostics,
      coverage: { sources: [${JSON.stringify(source)}] },
    };
  },
}).listen();
`,
    "test/main.test.ts": `import { fileURLToPath } from "node:url";
import { builtEntry, MemoryRepo, TestHost } from "@asp/sdk/testing";
import { afterEach, describe, expect, it } from "vitest";

// Drives the built provider (dist/main.js, rebuilt when src/ is newer) as the host does: a
// subprocess speaking the real protocol, content served from an in-memory repository.
const entry = builtEntry(fileURLToPath(new URL("..", import.meta.url)));
let host: TestHost | undefined;

afterEach(async () => {
  await host?.shutdown();
  host = undefined;
});

async function assess(before: Record<string, string>, after: Record<string, string>) {
  host = new TestHost(entry, { repo: new MemoryRepo() });
  await host.initialize();
  const cs = host.repo.changeset(before, after);
  const assessment = await host.assess({ baseline: cs.after, changeset: cs });
  return { assessment, reads: host.reads(assessment.requestId) };
}

describe(${JSON.stringify(name)}, () => {
  it("flags a TODO line the change adds", async () => {
    const { assessment, reads } = await assess({ "a.ts": "x\\n" }, { "a.ts": "x // TODO\\n" });
    expect(assessment.status).toBe("complete");
    expect(assessment.diagnostics.map((d) => d.code)).toEqual([${JSON.stringify(`${source}/todo`)}]);
    // validAsOf.reads lists exactly the blobs the provider read through the host.
    expect(assessment.validAsOf.reads).toEqual(reads);
  });

  it("passes a change without TODO", async () => {
    const { assessment } = await assess({ "a.ts": "x\\n" }, { "a.ts": "y\\n" });
    expect(assessment.diagnostics).toEqual([]);
  });
});
`,
    "README.md": readme(name),
    ".gitignore": "node_modules/\ndist/\n*.key\n",
  };
}

function readme(name: string): string {
  return `# ${name}

An ASP check provider scaffolded by \`asp plugin new\`: it flags lines with \`TODO\` that a change
adds (diagnostic source \`${name}\`, code \`${name}/todo\`, severity \`error\`). Edit \`src/main.ts\`; keep
\`asp-plugin.json\` (the manifest the host verifies) in step with it.

\`\`\`sh
npm install
npm run build                      # tsc -> dist/main.js
npm test                           # vitest, driving dist/main.js with @asp/sdk/testing
npm run conformance                # the host's protocol suite against dist/main.js
npx asp plugin keygen --out ../keys/team              # once; never commit the secret key
npm run pack:plugin -- --key ../keys/team            # bundle + sign -> dist/plugin/ (what a host runs)
npx asp conformance --plugin dist/plugin              # the packed plugin, digest bound
npx asp plugin digest dist/plugin --requirement todo  # the policy entries that admit it
\`\`\`

\`npm run sign -- --key KEY\` signs \`dist/plugin\` again (packing already signs it). To give the plugin
gate authority, pin it into a trusted policy with \`asp plugin pin\` and load \`dist/plugin\` from a
host configuration: see the toolkit's docs/plugins.md.
`;
}

/** `asp plugin new NAME`: scaffold a standalone plugin project. */
export function registerPluginNew(plugin: Command, ctx: CliContext): void {
  plugin
    .command("new")
    .description(
      "scaffold a standalone provider plugin project that builds, tests, packs, signs and passes conformance as is",
    )
    .argument("<name>", "package name, plugin id and diagnostic source (lower case, e.g. demo-check)")
    .option("--kind <kind>", "provider (verifier and sandbox are refused: they cannot be checked yet)", "provider")
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
          `  cd ${inert(rel)} && npm install && npm run build && npm test && npm run conformance`,
        ].join("\n"),
        r,
      );
    });
}
