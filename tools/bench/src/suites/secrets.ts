import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_RULES } from "@asp/provider-secrets";
import { BIN, ROOT } from "../example-host.js";
import { commitAll } from "../git.js";
import { compare } from "../measure.js";
import type { Suite } from "../suite.js";

// The secrets check alone on a large change: `asp gate` (whole process, the signed secrets plugin
// the only provider) over a change that adds thousands of small files, against a one-pass scan of
// the same files with the same rule patterns. gitleaks is not installable from the registries this
// machine reaches (npm, Debian), so the baseline is the floor the issue names: one `grep -P` pass
// (PCRE, the rule set's own patterns joined into one) over the same files. Issue 26: 6,483 files
// got no answer within the 60 s gate budget; the cause was @secretlint/core 12's profiler.

const FILES = 6_500;

/** One small source file, ~250 bytes, no secret (the common case a gate sees). */
function source(i: number): string {
  return [
    `// module ${i}: part of a generated change`,
    `export const name${i} = "item-${i}";`,
    `export function value${i}(x: number): number {`,
    `  return x * ${i} + ${i % 7};`,
    "}",
    `const url = "https://example.com/api/v1/items/${i}";`,
    "",
  ].join("\n");
}

/** The rule set's patterns as one PCRE (named groups may repeat across alternatives: `(?J)`). */
function combinedPattern(): string {
  // Path rules decide by a file's path, which one pattern over the contents cannot express.
  const parts = DEFAULT_RULES.rules
    .filter((r) => r.path === undefined)
    .map((r) => {
      const flags = (r.flags ?? "").replace(/[^ims]/g, "");
      // PCRE bounds a quantifier at 65,535 (the private-key body allows 65,536 characters).
      const pattern = r.pattern.replace(
        /\{(\d+),(\d+)\}/g,
        (_m, lo: string, hi: string) => `{${lo},${Math.min(Number(hi), 65_535)}}`,
      );
      return flags === "" ? `(?:${pattern})` : `(?${flags}:${pattern})`;
    });
  return `(?J)${parts.join("|")}`;
}

function run(file: string, args: readonly string[], cwd?: string): Promise<{ code: number; stdout: string }> {
  return new Promise((done) => {
    execFile(
      file,
      args,
      { cwd, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout) => done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout }),
    );
  });
}

const suite: Suite = {
  name: "secrets",
  description: `asp gate with the secrets provider alone on a change adding ${FILES} small files (whole process) vs one grep -P pass with the same patterns over the same files`,
  async run(ctx) {
    const files = ctx.size === "smoke" ? 40 : FILES;
    const dir = mkdtempSync(join(tmpdir(), "asp-bench-secrets-"));
    try {
      const repo = join(dir, "repo");
      mkdirSync(join(repo, "src"), { recursive: true });
      writeFileSync(join(repo, "README.md"), "bench\n");
      commitAll(repo);
      ctx.progress(`writing ${files} files as an uncommitted change`);
      for (let i = 0; i < files; i++) {
        mkdirSync(join(repo, "src", `d${i % 50}`), { recursive: true });
        writeFileSync(join(repo, "src", `d${i % 50}`, `f${i}.ts`), source(i));
      }
      // The example policy with only its secrets requirement: the gate decides on the secrets
      // check alone, so an allow is the answer a user wants on this clean change.
      const policy = JSON.parse(readFileSync(join(ROOT, "examples", "asp.policy.json"), "utf8")) as {
        requirements: Array<{ id: string }>;
        grants: Array<{ requirement: string }>;
      };
      policy.requirements = policy.requirements.filter((r) => r.id === "secrets");
      policy.grants = policy.grants.filter((g) => g.requirement === "secrets");
      writeFileSync(join(dir, "policy.json"), JSON.stringify(policy));
      const config = join(dir, "host.json");
      writeFileSync(
        config,
        JSON.stringify({
          store: join(dir, "store"),
          policy: join(dir, "policy.json"),
          trustRoots: [join(ROOT, "examples", "keys", "example.key.pub")],
          plugins: [join(ROOT, "plugins", "provider-secrets", "dist", "plugin")],
          providers: [],
        }),
      );
      const gateArgs = [BIN, "gate", "--config", config, "--repo", repo, "--base", "HEAD", "--json"];
      const first = await run(process.execPath, gateArgs);
      const verdict = JSON.parse(first.stdout) as { decision: string; coverage: { ran: string[] } };
      if (verdict.decision !== "allow" || !verdict.coverage.ran.includes("secrets")) {
        throw new Error(`asp gate did not allow the clean change (exit ${first.code}): ${first.stdout.slice(0, 3000)}`);
      }
      ctx.progress(`the gate allows the ${files}-file change with the secrets check`);
      const grepArgs = ["-P", "-r", "-c", "-e", combinedPattern(), "src"];
      const grep = await run("grep", grepArgs, repo);
      // grep exits 1 when nothing matched (the clean change); 2 is an error (a pattern PCRE refused).
      if (grep.code > 1) throw new Error(`grep -P could not run the rule patterns (exit ${grep.code})`);
      const rounds = ctx.size === "smoke" ? 1 : 5;
      ctx.report(
        await compare({
          name: `asp gate, secrets provider alone, change adding ${files} files (whole process)`,
          baselineName: "grep -P -r, the rule set's patterns in one pass (gitleaks not installable here)",
          baseline: async () => {
            await run("grep", grepArgs, repo);
          },
          subject: async () => {
            const r = await run(process.execPath, gateArgs);
            if (r.code !== 0) throw new Error(`asp gate exited ${r.code}`);
          },
          rounds,
          warmup: ctx.size === "smoke" ? 0 : 1,
          target: 1.0,
          headline: true,
        }),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
