import { builtinModules } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Plugin } from "esbuild";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** A Node builtin as an import specifier: `node:fs`, or a bare `fs` / `fs/promises`. */
const BUILTINS = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
function isNodeBuiltin(specifier: string): boolean {
  return specifier.startsWith("node:") || BUILTINS.has(specifier);
}

interface BuiltinImport {
  readonly specifier: string;
  readonly importer: string;
}

/**
 * Bundles `packages/<pkg>` (its public API, `src/index.ts`) for a browser the way a web app would consume it, and returns every Node
 * builtin the import graph reaches, with the file that imports it. The builtins are marked
 * external so the bundle completes and every offender is named, not only the first.
 */
async function nodeBuiltinsReachedFrom(pkg: string): Promise<BuiltinImport[]> {
  const found: BuiltinImport[] = [];
  const recordBuiltins: Plugin = {
    name: "record-node-builtins",
    setup(b) {
      b.onResolve({ filter: /.*/ }, (args) => {
        if (!isNodeBuiltin(args.path)) return undefined;
        found.push({ specifier: args.path, importer: relative(root, args.importer) });
        return { path: args.path, external: true };
      });
    },
  };
  await build({
    entryPoints: [join(root, "packages", pkg, "src", "index.ts")],
    bundle: true,
    write: false,
    platform: "browser",
    format: "esm",
    // Resolve workspace packages to their sources, as the vitest projects do, so no prebuild is needed.
    conditions: ["@asp/source"],
    logLevel: "silent",
    plugins: [recordBuiltins],
  });
  return found;
}

describe("portable packages (STYLE 2: contracts, policy and arbitration run anywhere)", () => {
  it.each(["contracts", "policy", "arbitration"])(
    "@asp/%s bundles for a browser without importing any Node builtin",
    async (pkg) => {
      // Named offenders ("node:crypto from packages/evidence/src/hash.ts") make a failure actionable.
      const offenders = (await nodeBuiltinsReachedFrom(pkg)).map((i) => `${i.specifier} from ${i.importer}`).sort();
      expect(offenders).toEqual([]);
    },
    60_000,
  );

  it("the check names a Node builtin reached transitively (proof it can fail)", async () => {
    const offenders = await nodeBuiltinsReachedFrom("evidence");
    expect(offenders.map((i) => i.specifier)).toContain("node:crypto");
  }, 60_000);
});
