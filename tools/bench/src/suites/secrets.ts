import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_RULES } from "@asp/provider-secrets";
import { BIN, ROOT } from "../example-host.js";
import { commitAll } from "../git.js";
import { gitleaks } from "../gitleaks.js";
import { compare } from "../measure.js";
import type { Suite } from "../suite.js";

// The secrets check alone on a large change: `asp gate` (whole process, the signed secrets plugin
// the only provider) over a change that adds thousands of small files, against gitleaks scanning
// the same files (`gitleaks dir`, whole process: the WebAssembly build on npm, the only gitleaks
// the registries this machine reaches carry; a native build would be faster), and against the
// floor the issue names: `grep -P` (PCRE, the rule set's own patterns joined into as few passes as
// PCRE's size limit allows). Issue 26: 6,483 files got no answer within the 60 s gate budget; the cause was
// @secretlint/core 12's profiler.

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

/**
 * The rule set's patterns as few PCREs as PCRE's compiled-size limit allows (named groups may
 * repeat across alternatives: `(?J)`); the floor runs one `grep -P` pass per chunk.
 */
function combinedPatterns(): string[] {
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
  const chunks: string[][] = [[]];
  let size = 0;
  for (const part of parts) {
    if (size + part.length > 12_000 && (chunks.at(-1) as string[]).length > 0) {
      chunks.push([]);
      size = 0;
    }
    (chunks.at(-1) as string[]).push(part);
    size += part.length;
  }
  return chunks.map((c) => `(?J)${c.join("|")}`);
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
  description: `asp gate with the secrets provider alone on a change adding ${FILES} small files (whole process) vs gitleaks dir over the same files, and vs grep -P with the same patterns`,
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
      const greps = combinedPatterns().map((pattern) => ["-P", "-r", "-c", "-e", pattern, "src"]);
      for (const grepArgs of greps) {
        const grep = await run("grep", grepArgs, repo);
        // grep exits 1 when nothing matched (the clean change); 2 is an error (a pattern PCRE refused).
        if (grep.code > 1) throw new Error(`grep -P could not run the rule patterns (exit ${grep.code})`);
      }
      const rounds = ctx.size === "smoke" ? 1 : 5;
      const scanner = gitleaks(join(dir, "gitleaks.wasm"));
      const leaks = scanner.command(join(repo, "src"), join(dir, "gitleaks.json"));
      const firstLeaks = await run(leaks.file, leaks.args);
      if (firstLeaks.code !== 0) throw new Error(`gitleaks dir exited ${firstLeaks.code}`);
      const gate = async () => {
        const r = await run(process.execPath, gateArgs);
        if (r.code !== 0) throw new Error(`asp gate exited ${r.code}`);
      };
      ctx.report(
        await compare({
          name: `asp gate, secrets provider alone, change adding ${files} files (whole process)`,
          baselineName: "gitleaks 8.28.0 dir over the same files (whole process, WebAssembly build)",
          baseline: async () => {
            const r = await run(leaks.file, leaks.args);
            if (r.code !== 0) throw new Error(`gitleaks dir exited ${r.code}`);
          },
          subject: gate,
          rounds,
          warmup: ctx.size === "smoke" ? 0 : 1,
          target: 1.0,
          headline: true,
        }),
      );
      ctx.report(
        await compare({
          name: `asp gate, secrets provider alone, change adding ${files} files (whole process)`,
          baselineName: `grep -P -r, the rule set's patterns in ${greps.length} passes (a floor, not a scanner)`,
          baseline: async () => {
            for (const grepArgs of greps) await run("grep", grepArgs, repo);
          },
          subject: gate,
          rounds,
          warmup: ctx.size === "smoke" ? 0 : 1,
        }),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default suite;
