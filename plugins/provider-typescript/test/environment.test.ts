import { type Files, MemoryRepo } from "@asp/sdk/testing";
import { describe, expect, it } from "vitest";
import { createTypeScriptChecker } from "../src/index.js";

// The environment as the checker sees it: overlaid at repository paths, links resolved inside
// the repository only, read lazily, and a failed read never a silent pass.

const PROJECT: Files = {
  "package.json": JSON.stringify({ name: "app", type: "module" }),
  "tsconfig.json": JSON.stringify({
    compilerOptions: { target: "ES2022", lib: ["ES2022"], module: "NodeNext", strict: true, types: [] },
    include: ["src"],
  }),
  "src/index.ts": 'import { greet } from "dep";\n\nexport const message: string = greet("ada");\n',
};

const dep = (returns: string): Files => ({
  "package.json": JSON.stringify({ name: "dep", version: "1.0.0", type: "module", types: "./index.d.ts" }),
  "index.d.ts": `export declare function greet(name: string): ${returns};\n`,
});

/** `files` under `prefix/`. */
const under = (prefix: string, files: Files): Files =>
  Object.fromEntries(Object.entries(files).map(([p, f]) => [`${prefix}/${p}`, f]));
const link = (target: string) => ({ content: target, mode: "120000" as const });

async function check(env: Files | null, project: Files = PROJECT, prepare?: (repo: MemoryRepo) => void) {
  const repo = new MemoryRepo();
  const tree = repo.tree(project);
  const environment = env === null ? null : { tree: repo.tree(env), roots: ["node_modules"] };
  prepare?.(repo);
  const r = await createTypeScriptChecker({ scope: "all" }).check({ tree, environment }, repo.source());
  return { ...r, codes: r.diagnostics.map((d) => d.code), repo };
}

describe("the dependency environment", () => {
  it("host §9: without an environment a dependency import is ts/2307 (the old false error)", async () => {
    const r = await check(null);
    expect(r.codes).toEqual(["ts/2307"]);
  });

  it("host §9: an installed dependency's types are used (npm layout)", async () => {
    const r = await check(under("node_modules/dep", dep("string")));
    expect(r.status).toBe("complete");
    expect(r.codes).toEqual([]);
    const bad = await check(under("node_modules/dep", dep("number")));
    expect(bad.codes).toEqual(["ts/2322"]);
  });

  it("host §9: typesVersions picks the typings folder for this compiler version", async () => {
    const versioned: Files = {
      "node_modules/dep/package.json": JSON.stringify({
        name: "dep",
        version: "1.0.0",
        types: "./index.d.ts",
        typesVersions: { ">=4.0": { "*": ["ts4/*"] } },
      }),
      "node_modules/dep/index.d.ts": "export declare function greet(name: string): number;\n",
      "node_modules/dep/ts4/index.d.ts": "export declare function greet(name: string): string;\n",
    };
    const r = await check(versioned);
    expect(r.codes).toEqual([]);
  });

  it("host §9: a relative link (pnpm layout) is followed and deduped by its real path", async () => {
    const env = {
      ...under("node_modules/.pnpm/dep@1.0.0/node_modules/dep", dep("number")),
      "node_modules/dep": link(".pnpm/dep@1.0.0/node_modules/dep"),
    };
    const r = await check(env);
    expect(r.codes).toEqual(["ts/2322"]);
    expect(r.diagnostics[0]?.range?.path).toBe("src/index.ts");
  });

  it("host §9: a link to a workspace folder outside the root resolves into the checked tree", async () => {
    const project = { ...PROJECT, ...under("packages/dep", dep("string")) };
    const r = await check({ "node_modules/dep": link("../packages/dep") }, project);
    expect(r.codes).toEqual([]);
  });

  it("host §9: an absolute link target does not resolve, nor one escaping the repository", async () => {
    for (const target of ["/etc", "/repo/packages/dep", "../../outside/dep", "../../../../../etc"]) {
      const project = { ...PROJECT, ...under("packages/dep", dep("string")) };
      const r = await check({ "node_modules/dep": link(target) }, project);
      expect({ target, codes: r.codes }).toEqual({ target, codes: ["ts/2307"] });
    }
  });

  it("host §9: a link loop does not resolve and does not hang", async () => {
    const r = await check({ "node_modules/dep": link("loop"), "node_modules/loop": link("dep") });
    expect(r.codes).toEqual(["ts/2307"]);
  });

  it("host §9: inside an environment root the environment answers, not a node_modules in the checked tree", async () => {
    const project = { ...PROJECT, ...under("node_modules/dep", dep("number")) };
    const r = await check(under("node_modules/dep", dep("string")), project);
    expect(r.codes).toEqual([]);
  });

  it("host §9: an unreadable dependency file makes the check incomplete, never a silent pass", async () => {
    const env = under("node_modules/dep", dep("string"));
    const r = await check(env, PROJECT, (repo) => {
      repo.refuse.add(repo.blob(env["node_modules/dep/index.d.ts"] as string));
    });
    expect(r.status).toBe("incomplete");
    expect(r.coverage.missing).toContain("node_modules/dep/index.d.ts");
  });

  it("host §9: an unreadable environment folder makes the check incomplete", async () => {
    const env = under("node_modules/dep", dep("string"));
    const r = await check(env, PROJECT, (repo) => {
      // The folder node_modules/dep: drop its tree so readTree fails.
      const depTree = repo.tree(dep("string"));
      repo.trees.delete(depTree);
    });
    expect(r.status).toBe("incomplete");
    expect(r.coverage.missing).toContain("node_modules/dep");
  });

  it("host §9: only what resolution touches is read, and dependency files are never changed files", async () => {
    const many: Files = {};
    for (let i = 0; i < 50; i++) Object.assign(many, under(`node_modules/unused${i}`, dep("string")));
    const env = { ...many, ...under("node_modules/dep", dep("string")) };
    const repo = new MemoryRepo();
    const before = repo.tree(PROJECT);
    const after = { ...PROJECT, "src/index.ts": `${PROJECT["src/index.ts"] as string}export const n = 1;\n` };
    const tree = repo.tree(after);
    const environment = { tree: repo.tree(env), roots: ["node_modules"] };
    const checker = createTypeScriptChecker();
    const r = await checker.check({ tree, environment, changes: MemoryRepo.changes(PROJECT, after) }, repo.source());
    expect(before).not.toBe(tree);
    expect(r.diagnostics).toEqual([]);
    expect(r.status).toBe("complete");
    // The root tree, node_modules, node_modules/dep: not the 50 unused packages.
    expect(r.stats.treeReads).toBeLessThan(10);
    expect(r.coverage.paths).toBe(1);
  });
});
