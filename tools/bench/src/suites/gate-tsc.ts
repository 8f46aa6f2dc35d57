import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { exampleConfigCopy, runProcess } from "../example-host.js";
import { commitAll } from "../git.js";
import { compare } from "../measure.js";
import { FEATURES, featureModule, generateProject, writeProject } from "../project.js";
import type { Suite } from "../suite.js";

// What a user pays for the gate over the type-checker alone (issue 17): `asp gate` as a whole
// process (apps/cli/dist, the example host configuration: its signed plugins, its policy, its
// sandboxes) on a generated TypeScript project with a one-file change, against `tsc --noEmit -p`
// as a whole process on the same worktree. Before each round (untimed, for both sides) the edited
// file gets new, still type-correct content, so neither side answers from a cache of the last
// round; the gate diffs against HEAD, so every round is the same one-file change.

const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));
const BIN = join(ROOT, "apps", "cli", "dist", "bin.js");
const req = createRequire(import.meta.url);
const TSC = join(dirname(req.resolve("typescript/package.json")), "bin", "tsc");

const suite: Suite = {
  name: "gate-tsc",
  description: `asp gate (whole process, example host) on a ${FEATURES + 10}-file TypeScript project with a one-file change, and asp sweep of it on a new store, vs tsc --noEmit -p (whole process)`,
  async run(ctx) {
    const features = ctx.size === "smoke" ? 4 : FEATURES;
    const edited = ctx.size === "smoke" ? "src/features/f2.ts" : "src/features/f105.ts";
    const index = Number(/f(\d+)\.ts$/.exec(edited)?.[1]);
    const dir = mkdtempSync(join(tmpdir(), "asp-bench-gate-tsc-"));
    try {
      const repo = join(dir, "repo");
      const files = generateProject(features);
      writeProject(repo, files);
      commitAll(repo);
      const config = exampleConfigCopy(dir);
      let edit = 0;
      const change = () => writeFileSync(join(repo, edited), featureModule(index, ++edit));
      const gateArgs = [BIN, "gate", "--config", config, "--repo", repo, "--base", "HEAD"];
      const tscArgs = [TSC, "--noEmit", "-p", repo];

      // Both sides must give the answer a user wants on a type-correct change, else the figure
      // compares a failure with a success.
      change();
      const tsc = await runProcess(process.execPath, tscArgs);
      if (tsc.code !== 0) throw new Error(`tsc --noEmit failed on the generated project: ${tsc.stdout.slice(0, 2000)}`);
      const first = await runProcess(process.execPath, [...gateArgs, "--json"]);
      const verdict = JSON.parse(first.stdout) as {
        decision: string;
        assurance: { mode: string };
        coverage: { ran: string[] };
      };
      if (verdict.decision !== "allow") {
        throw new Error(
          `asp gate did not allow the type-correct change (exit ${first.code}): ${first.stdout.slice(0, 3000)}`,
        );
      }
      ctx.progress(
        `${files.size - 2} TypeScript files; the gate allows the one-file change (${edited}) at ${verdict.assurance.mode}, requirements ran: ${verdict.coverage.ran.join(", ")}`,
      );

      const expectExit = (what: string, r: { code: number; stdout: string }): void => {
        if (r.code !== 0) throw new Error(`${what} exited ${r.code}: ${r.stdout.slice(0, 2000)}`);
      };
      const rounds = ctx.size === "smoke" ? 1 : 7;
      ctx.report(
        await compare({
          name: `asp gate, example host, ${files.size - 2} files, one-file change (whole process)`,
          baselineName: "tsc --noEmit -p (whole process)",
          baseline: async () => expectExit("tsc --noEmit", await runProcess(process.execPath, tscArgs)),
          subject: async () => expectExit("asp gate", await runProcess(process.execPath, gateArgs)),
          before: change,
          rounds,
          warmup: ctx.size === "smoke" ? 0 : 1,
          // Issue 26: a one-file change on a warm environment snapshot (the store already holds
          // the project's snapshot from the first gate) at most 0.3x tsc.
          target: 0.3,
          headline: true,
          details: { files: files.size - 2, assurance: verdict.assurance.mode },
        }),
      );
      // The whole-tree sweep, cold: a new store each round, so the worktree and its environment are
      // snapshotted from nothing and every provider starts cold, as on a fresh CI runner.
      const store = join(dir, "store");
      const sweepArgs = [BIN, "sweep", "--config", config, "--repo", repo];
      ctx.report(
        await compare({
          name: `asp sweep, example host, ${files.size - 2} files, new store (whole process)`,
          baselineName: "tsc --noEmit -p (whole process)",
          baseline: async () => expectExit("tsc --noEmit", await runProcess(process.execPath, tscArgs)),
          subject: async () => expectExit("asp sweep", await runProcess(process.execPath, sweepArgs)),
          before: () => rmSync(store, { recursive: true, force: true }),
          rounds: ctx.size === "smoke" ? 1 : 5,
          warmup: ctx.size === "smoke" ? 0 : 1,
          target: 1.2,
          details: { files: files.size - 2 },
        }),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
