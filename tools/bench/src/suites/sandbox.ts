import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, EXAMPLE_PROVIDERS, exampleHostConfig, ROOT } from "../example-host.js";
import { commitAll } from "../git.js";
import { compare } from "../measure.js";
import type { Suite } from "../suite.js";

// What confinement costs a user (issue 13): `asp gate` as a whole process on a copy of the
// example repository, its check providers launched under sandbox-bubblewrap, against the same
// command with the providers as plain subprocesses. Both hosts use the signed example plugins,
// the example policy and a persistent store of their own; each run launches the providers anew.

const SANDBOXES = ["sandbox-bubblewrap", "sandbox-staged-snapshot"];

const suite: Suite = {
  name: "sandbox",
  description: "asp gate (whole process) on the example with providers under bubblewrap vs as plain subprocesses",
  async run(ctx) {
    const dir = mkdtempSync(join(tmpdir(), "asp-bench-sandbox-"));
    try {
      const repo = join(dir, "repo");
      cpSync(join(ROOT, "examples", "demo-repo"), repo, { recursive: true });
      commitAll(repo);
      const confined = exampleHostConfig(dir, "bubblewrap", [...SANDBOXES, ...EXAMPLE_PROVIDERS]);
      const plain = exampleHostConfig(dir, "plain", EXAMPLE_PROVIDERS);
      const gate = (config: string) => () => {
        execFileSync(process.execPath, [BIN, "gate", "--config", config, "--repo", repo], {
          stdio: "ignore",
          env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        });
      };
      const mode = execFileSync(process.execPath, [BIN, "gate", "--json", "--config", confined, "--repo", repo], {
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      });
      ctx.progress(
        `providers run ${(JSON.parse(mode) as { assurance: { mode: string } }).assurance.mode} under the sandbox plugin`,
      );
      ctx.report(
        await compare({
          name: "asp gate, providers under sandbox-bubblewrap",
          baselineName: "asp gate, providers as plain subprocesses",
          baseline: gate(plain),
          subject: gate(confined),
          rounds: 7,
        }),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
