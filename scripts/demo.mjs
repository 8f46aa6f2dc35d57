#!/usr/bin/env node
// `pnpm demo`: a change denied with its next step, then allowed after the fix (issue 17, "Done when").
//
// Copies examples/demo-repo into a fresh git repository in the system temp folder, writes a trusted
// host configuration beside it (never inside it), and runs the real `asp gate` CLI twice on a
// change with a type error and a fake AWS key (DENY, each finding with its next step), then on the
// fix (ALLOW). Exits 0 only when the two decisions are exactly those; `--keep` keeps the folder.
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const examples = join(root, "examples");
const bin = join(root, "apps/cli/dist/bin.js");
const work = mkdtempSync(join(tmpdir(), "asp-demo-"));
const repo = join(work, "demo-repo");
const keep = process.argv.includes("--keep");

function git(...args) {
  const r = spawnSync("git", ["-c", "user.name=asp demo", "-c", "user.email=demo@example.invalid", ...args], {
    cwd: repo,
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
}

function gate(title) {
  process.stdout.write(
    `\n=== ${title}\n$ asp gate --config ${join(work, "asp.host.json")} --repo ${repo} --base HEAD\n`,
  );
  const r = spawnSync(
    process.execPath,
    [bin, "gate", "--config", join(work, "asp.host.json"), "--repo", repo, "--base", "HEAD"],
    {
      encoding: "utf8",
      stdio: ["ignore", "inherit", "inherit"],
    },
  );
  return r.status;
}

// A made-up key in the shape of an AWS access key id, assembled so this file holds none.
const fakeKey = ["AKIA", "Q7XJ3KZP", "2M4N8RTB"].join("");
const report = (score) => `import { clamp, mean } from "./math.js";

export interface Report {
  readonly label: string;
  readonly average: number | undefined;
  readonly score: number;
}

/** Summarize a series of measurements into a report with a score in [0, 100]. */
export function summarize(label: string, values: readonly number[]): Report {
  const average = mean(values);
  const score: number = ${score};
  return { label, average, score: clamp(score, 0, 100) };
}
`;

let failed = false;
try {
  cpSync(join(examples, "demo-repo"), repo, { recursive: true });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "base");
  const plugins = [
    "sandbox-bubblewrap",
    "sandbox-staged-snapshot",
    "provider-typescript",
    "provider-secrets",
    "provider-text-edit",
    "provider-import-graph",
  ].map((p) => join(root, "plugins", p, "dist", "plugin"));
  writeFileSync(
    join(work, "asp.host.json"),
    `${JSON.stringify(
      {
        description: "Trusted host configuration of `pnpm demo`, outside the repository it judges.",
        store: join(work, "store"),
        policy: join(examples, "asp.policy.json"),
        trustRoots: [join(examples, "keys", "example.key.pub")],
        plugins,
        providers: [],
      },
      null,
      2,
    )}\n`,
  );

  const denied = (() => {
    writeFileSync(join(repo, "src/report.ts"), report('"high"'));
    writeFileSync(join(repo, "src/upload.ts"), `export const AWS_ACCESS_KEY_ID = "${fakeKey}";\n`);
    return gate("1. a change with a type error and a (fake) AWS key: expect DENY, each finding with its next step");
  })();
  const allowed = (() => {
    writeFileSync(join(repo, "src/report.ts"), report("Math.round(average ?? 0)"));
    rmSync(join(repo, "src/upload.ts"));
    return gate("2. the fix: a numeric score, the key removed: expect ALLOW");
  })();
  process.stdout.write(
    `\ndemo: change ${denied === 1 ? "DENIED (exit 1)" : `exit ${denied} (expected 1)`}, fix ${allowed === 0 ? "ALLOWED (exit 0)" : `exit ${allowed} (expected 0)`}\n`,
  );
  failed = denied !== 1 || allowed !== 0;
} finally {
  if (keep) process.stdout.write(`demo: kept ${work}\n`);
  else rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
