import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Policy } from "@asp/contracts";
import { type ComposedHost, composeHost } from "@asp/ths";
import { commitAll } from "../git.js";
import { compare } from "../measure.js";
import type { Suite } from "../suite.js";

// The host's own snapshot work on a gate: the baseline snapshot before the providers, and the
// re-snapshot after them that proves the worktree did not move (issue 11). Both go through the
// per-repository stat cache beside a level store, so an unchanged repository costs an lstat per
// file, like `git status` over its index. No providers: what is left is the host's own path
// (two snapshots, decide, durable receipt).

const FILES = 3000;
const POLICY: Policy = { apiVersion: "asp.policy/v1", requirements: [], providers: [], grants: [] };

function repository(): string {
  const repo = mkdtempSync(join(tmpdir(), "asp-bench-resnap-"));
  for (let d = 0; d < 30; d++) {
    mkdirSync(join(repo, `dir${d}`));
    for (let f = 0; f < FILES / 30; f++) {
      writeFileSync(join(repo, `dir${d}`, `f${f}.ts`), `export const v${d}_${f} = ${d * f};\n`.repeat(20));
    }
  }
  commitAll(repo);
  return repo;
}

const suite: Suite = {
  name: "gate-resnapshot",
  description: `asp gate's own path on an unchanged ${FILES}-file repository (snapshot, re-snapshot, decide, receipt) vs git status`,
  async run(ctx) {
    ctx.progress(`writing ${FILES} files and committing them`);
    const repo = repository();
    const root = mkdtempSync(join(tmpdir(), "asp-bench-resnap-store-"));
    const hosts: ComposedHost[] = [];
    try {
      const cached = await composeHost({ store: join(root, "store"), policy: POLICY, failOpenSink: { log() {} } });
      const uncached = await composeHost({ store: "memory:", policy: POLICY, failOpenSink: { log() {} } });
      hosts.push(cached, uncached);
      const gitStatus = () => execFileSync("git", ["status", "--porcelain"], { cwd: repo, stdio: "ignore" });
      ctx.report(
        await compare({
          name: "host gate, level store with the stat cache (two snapshots + durable receipt)",
          baselineName: "git status --porcelain (a subprocess, over its index)",
          baseline: gitStatus,
          subject: () => cached.gate({ repo }),
          rounds: 11,
        }),
      );
      ctx.report(
        await compare({
          name: "host gate, memory store (no stat cache: every file read and hashed, twice)",
          baselineName: "host gate, level store with the stat cache",
          baseline: () => cached.gate({ repo }),
          subject: () => uncached.gate({ repo }),
          rounds: 7,
        }),
      );
    } finally {
      for (const h of hosts) await h.close();
      rmSync(repo, { recursive: true, force: true });
      rmSync(root, { recursive: true, force: true });
    }
  },
};

export default suite;
