import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runGuide, type StepOutcome } from "./lib/guide.js";
import { packPublicPackages, USER_ENV } from "./lib/pack.js";
import { type LocalRegistry, scopedNpmrc, startRegistry } from "./lib/registry.js";
import { ROOT } from "./lib/workspace.js";

// Issue 18 item 6 and "Done when": the plugin author's journey, exactly as docs/plugins.md tells
// it, in an empty temp folder outside this repository with ONLY the packed tarballs (no
// workspace links): `npx @asp/cli plugin new demo-check`, npm install, build, test, conformance,
// keygen, pack + sign, `asp plugin pin` into a trusted policy, a host configuration, a git
// repository with a TODO, `asp gate` -> DENY (exit 1), the fix -> ALLOW (exit 0).
//
// No command of the guide is rewritten. The only difference from a reader's machine is where
// npm finds the `@asp` packages: the packed tarballs (`pnpm pack`, as released) are served by a
// local registry (test/lib/registry-server.mjs) that npm uses for the `@asp` scope only
// (`npm_config_userconfig` = the user's own npmrc + `@asp:registry=...`); every other package
// comes from the user's registry, `--prefer-offline` (npm_config_prefer_offline) so the cache
// serves what it holds. One `npx` (the CLI) and one `npm install` (the scaffolded project).

const GUIDE = join(ROOT, "docs/plugins.md");
const log = (message: string): void => {
  console.log(`[author-journey] ${message}`);
};

let work: string;
let registry: LocalRegistry | undefined;
let outcomes: StepOutcome[] = [];

/**
 * Remove npx's installs of `@asp/*` left by an earlier run on this machine: npx reuses its folder
 * for the same spec, and npm keeps an installed package of the same version without comparing its
 * bytes, so a rebuilt `@asp/evidence` at an unchanged version would never replace the old one (a
 * fresh CI machine has none). Other npx installs are left alone.
 */
function forgetEarlierNpxInstalls(env: NodeJS.ProcessEnv): void {
  const cache = execFileSync("npm", ["config", "get", "cache"], { env, encoding: "utf8" }).trim();
  const npx = join(cache, "_npx");
  if (cache === "" || !existsSync(npx)) return;
  for (const dir of readdirSync(npx)) {
    if (existsSync(join(npx, dir, "node_modules", "@asp"))) rmSync(join(npx, dir), { recursive: true, force: true });
  }
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "asp-author-"));
  expect(relative(ROOT, work).startsWith("..")).toBe(true);
  await packPublicPackages(join(work, "tarballs"), log);
  registry = await startRegistry(join(work, "tarballs"));
  const folder = join(work, "author");
  mkdirSync(folder);
  const env: NodeJS.ProcessEnv = {
    ...USER_ENV,
    npm_config_userconfig: scopedNpmrc(join(work, "npmrc"), registry.url),
    npm_config_prefer_offline: "true",
    npm_config_update_notifier: "false",
  };
  // Trusted host configuration comes only from --config in the guide; no ambient one may leak in.
  delete env.ASP_HOST_CONFIG;
  forgetEarlierNpxInstalls(env);
  outcomes = runGuide(GUIDE, {
    cwd: folder,
    env,
    onStep: (o) => log(`docs/plugins.md:${o.step.line} exit ${String(o.status)}`),
  });
}, 1_080_000);

afterAll(() => {
  registry?.close();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
}, 120_000);

describe("the plugin author's journey (docs/plugins.md, issue 18)", () => {
  it("scaffolds, builds, tests, conforms, packs, signs, pins and reaches DENY then ALLOW", () => {
    const gates = outcomes.filter((o) => /\basp gate\b/.test(o.step.text));
    expect(gates.map((o) => o.status)).toEqual([1, 0]);
    expect(gates[0]?.output).toMatch(/^DENY \(gate\)/m);
    expect(gates[0]?.output).toContain("demo-check/todo");
    expect(gates[1]?.output).toMatch(/^ALLOW \(gate\)/m);
    const conformance = outcomes.filter((o) => /conformance/.test(o.step.text));
    expect(conformance.length).toBe(2);
    for (const o of conformance) expect(o.output).toContain("16/16 checks passed");
  });
});
