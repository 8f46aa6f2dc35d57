import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./lib/workspace.js";

const readme = readFileSync(join(ROOT, "README.md"), "utf8");
const ciRun = readFileSync(join(ROOT, ".ci/run"), "utf8");
const rootPkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  packageManager: string;
  scripts: Record<string, string>;
};

function shBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => (m[1] ?? "").trim());
}

describe("README and CI", () => {
  it("the README has the two commands, and .ci/run runs exactly the test one", () => {
    const [main, demo, test] = shBlocks(readme);
    expect(main).toContain("pnpm asp gate --config examples/asp.host.json --repo examples/demo-repo");
    expect(demo).toBe("pnpm demo");
    expect(test).toBe("corepack enable && pnpm install --frozen-lockfile && pnpm test");
    // The one other block: Debian packages the tests need when missing (bubblewrap for the sandbox
    // tests, postgresql for the throwaway clusters of the PostgreSQL store and queue tests).
    const aptBlock = /^missing=\(\)\n[\s\S]*?^fi$/m;
    expect(ciRun).toMatch(aptBlock);
    const apt = ciRun.match(aptBlock)?.[0] ?? "";
    expect(apt).toContain("missing+=(bubblewrap)");
    expect(apt).toContain("missing+=(postgresql)");
    expect(apt).toContain("missing+=(chromium)");
    expect(apt).toContain('apt-get install -y -qq "${missing[@]}"');
    const commands = ciRun
      .replace(aptBlock, "")
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.startsWith("#") && !/^(set|cd|export) /.test(l));
    // Exactly the test command (its status kept), then the self-gate (issue 17) only when it passed.
    expect(commands.filter((l) => l.includes("pnpm test"))).toEqual([`${test} || status=$?`]);
    const at = (needle: string) => commands.findIndex((l) => l.includes(needle));
    expect(at(".ci/self-gate")).toBeGreaterThan(at("pnpm test"));
    expect(commands.at(-2)).toBe('echo "$passed passed, $failed failed, $skipped skipped"');
  });

  it("pins pnpm with its sha512 hash so corepack works without registry signatures", () => {
    expect(rootPkg.packageManager).toMatch(/^pnpm@10\.\d+\.\d+\+sha512\.[0-9a-f]{128}$/);
  });

  it("the test script builds, typechecks, lints and builds the API docs through turbo, then runs vitest", () => {
    expect(rootPkg.scripts.test).toMatch(/turbo run build typecheck lint docs:build.*biome check.*vitest run/);
  });
});
