import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import {
  checkPackage,
  importsOf,
  ROOT,
  rawProtocolImports,
  sourceFilesOf,
  type WorkspacePackage,
  workspacePackages,
} from "./lib/workspace.js";

const packages = workspacePackages();
const libraryNames = packages.filter((p) => p.dir.startsWith("packages/")).map((p) => p.name);
const pluginNames = packages.filter((p) => p.dir.startsWith("plugins/")).map((p) => p.name);

describe("dependency direction (DESIGN §2)", () => {
  it.each(packages.map((p) => [p.dir, p] as const))("%s imports only what the DAG allows", (_dir, pkg) => {
    expect(checkPackage(pkg, libraryNames, undefined, pluginNames)).toEqual([]);
  });

  // One protocol layer (contracts -> protocol -> ths | sdk | conformance): only @asp/protocol
  // speaks vscode-jsonrpc; the host, the SDK and the conformance kit go through it, so there is
  // one framing, one frame-size guard and one table of methods and error codes.
  it("only @asp/protocol imports vscode-jsonrpc in the host, the SDK and the conformance kit", () => {
    const layers = packages.filter((p) => ["packages/ths", "packages/sdk", "tools/conformance"].includes(p.dir));
    expect(layers.map((p) => p.dir).sort()).toEqual(["packages/sdk", "packages/ths", "tools/conformance"]);
    expect(layers.flatMap((p) => rawProtocolImports(p))).toEqual([]);
  });

  it("@asp/protocol sits between contracts and ths / sdk / conformance", () => {
    const protocol = packages.find((p) => p.name === "@asp/protocol");
    expect(Object.keys(protocol?.manifest.dependencies ?? {}).filter((d) => d.startsWith("@asp/"))).toEqual([
      "@asp/contracts",
    ]);
    for (const name of ["@asp/ths", "@asp/sdk", "@asp/conformance"]) {
      expect(packages.find((p) => p.name === name)?.manifest.dependencies, name).toHaveProperty(["@asp/protocol"]);
    }
  });

  // STYLE §6-7: the plugin brands and the Verifier / Sandbox ports are declared once, in contracts.
  it("declares the plugin brand strings only in @asp/contracts", () => {
    const brands = ["@asp/VerifierPlugin", "@asp/SandboxPlugin", "@asp/DependencyRef", "@asp/ProviderDefinition"];
    const hits: string[] = [];
    for (const p of packages) {
      for (const file of sourceFilesOf(p, ["src"])) {
        const text = readFileSync(file, "utf8");
        for (const b of brands) if (text.includes(`"${b}"`)) hits.push(`${relative(ROOT, file)}: ${b}`);
      }
    }
    expect(hits.map((h) => h.split(":")[0]).every((f) => f === "packages/contracts/src/ports.ts")).toBe(true);
    expect(hits).toHaveLength(brands.length);
  });

  describe("the checker itself", () => {
    function fakePackage(
      dir: string,
      deps: Record<string, string>,
      source: string,
      devDeps?: Record<string, string>,
    ): { root: string; pkg: WorkspacePackage } {
      const root = mkdtempSync(join(tmpdir(), "asp-dag-"));
      mkdirSync(join(root, dir, "src"), { recursive: true });
      writeFileSync(join(root, dir, "src", "index.ts"), source);
      if (devDeps !== undefined) {
        // The same import from a test file is allowed for a plugin's harness packages.
        mkdirSync(join(root, dir, "test"), { recursive: true });
        writeFileSync(join(root, dir, "test", "a.test.ts"), source);
      }
      return {
        root,
        pkg: {
          dir,
          name: `@asp/${dir.split("/")[1]}`,
          manifest: {
            name: `@asp/${dir.split("/")[1]}`,
            dependencies: deps,
            ...(devDeps === undefined ? {} : { devDependencies: devDeps }),
          },
        },
      };
    }

    it("fails when contracts imports evidence (an arrow against the DAG)", () => {
      const { root, pkg } = fakePackage(
        "packages/contracts",
        { "@asp/evidence": "workspace:*" },
        `import { digest } from "@asp/evidence";\n`,
      );
      const v = checkPackage(pkg, [], root);
      expect(v.map((x) => x.specifier)).toEqual(["@asp/evidence", "@asp/evidence"]);
    });
    it("fails when a plugin imports the host", () => {
      const { root, pkg } = fakePackage(
        "plugins/provider-x",
        { "@asp/ths": "workspace:*" },
        `import type { Host } from "@asp/ths";\n`,
      );
      expect(checkPackage(pkg, [], root).length).toBeGreaterThan(0);
    });
    it("lets a plugin's tests, never its src, use the host's loader and snapshot (devDependencies only)", () => {
      const { root, pkg } = fakePackage("plugins/sandbox-x", {}, `import { loadPlugins } from "@asp/plugin-host";\n`, {
        "@asp/plugin-host": "workspace:*",
      });
      expect(checkPackage(pkg, [], root).map((v) => v.file)).toEqual(["plugins/sandbox-x/src/index.ts"]);
    });
    it("fails on deep imports and relative escapes", () => {
      const { root, pkg } = fakePackage(
        "packages/evidence",
        { "@asp/contracts": "workspace:*" },
        `import { x } from "@asp/contracts/src/validate.js";\nimport { y } from "../../policy/src/index.js";\n`,
      );
      expect(
        checkPackage(pkg, [], root)
          .map((v) => v.why)
          .sort(),
      ).toEqual(["deep import: use the package's exports", "relative import out of its package"]);
    });
    it("fails on an undeclared but allowed import", () => {
      const { root, pkg } = fakePackage("packages/policy", {}, `export * as e from "@asp/evidence";\n`);
      expect(checkPackage(pkg, [], root).map((v) => v.why)).toEqual([
        "@asp/evidence is imported but not declared in package.json",
      ]);
    });
    it("fails when protocol imports the host, or contracts imports protocol", () => {
      const up = fakePackage("packages/protocol", { "@asp/ths": "workspace:*" }, `import { Host } from "@asp/ths";\n`);
      expect(checkPackage(up.pkg, [], up.root).map((v) => v.specifier)).toEqual(["@asp/ths", "@asp/ths"]);
      const down = fakePackage("packages/contracts", {}, `export { METHODS } from "@asp/protocol";\n`);
      expect(checkPackage(down.pkg, [], down.root).map((v) => v.specifier)).toEqual(["@asp/protocol"]);
    });
    it("finds a second protocol stack (a direct vscode-jsonrpc import) in a layer above protocol", () => {
      const { root, pkg } = fakePackage(
        "packages/sdk",
        { "vscode-jsonrpc": "10.0.0" },
        `import { createMessageConnection } from "vscode-jsonrpc/node";\n`,
      );
      expect(rawProtocolImports(pkg, root)).toEqual([`packages/sdk/src/index.ts`]);
    });
    it("fails for a package the DAG does not know", () => {
      const { root, pkg } = fakePackage("packages/mystery", {}, "");
      expect(() => checkPackage(pkg, [], root)).toThrow(/not in the dependency DAG/);
    });
    it("reads static, type-only, side-effect and dynamic imports", () => {
      expect(
        importsOf(
          `import a from "x";\nimport type { B } from "y";\nexport { c } from "z";\nimport "w";\nconst d = await import("v");`,
        ),
      ).toEqual(expect.arrayContaining(["x", "y", "z", "w", "v"]));
    });
  });
});
