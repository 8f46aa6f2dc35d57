import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { corpus } from "../plugins/provider-secrets/test/corpus.js";
import { ROOT } from "./lib/workspace.js";

// Issue 17 item 5: the dogfood report's false positives and negatives, measured against a labelled
// fixture set through the whole product path. A repository is generated from the secrets corpus
// (every format's true positives and near misses; generated shapes, never real credentials) and a
// few TypeScript fixtures; `asp sweep` runs the real signed example plugins over it; `asp dogfood
// report --labels` compares the stored receipts with the labels and names each miss by receipt.

const BIN = join(ROOT, "apps/cli/dist/bin.js");
const examples = join(ROOT, "examples");
const work = mkdtempSync(join(tmpdir(), "asp-dogfood-labelled-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function run(args: string[], cwd = work): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd, encoding: "utf8", timeout: 300_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function git(repo: string, ...args: string[]): void {
  const r = spawnSync("git", ["-c", "user.name=asp", "-c", "user.email=asp@example.invalid", ...args], { cwd: repo });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
}

interface Sample {
  readonly ref: string;
  readonly detail: string;
}
interface Report {
  readonly capabilities: ReadonlyArray<{
    readonly family: string;
    readonly falsePositives: readonly Sample[];
    readonly falseNegatives: readonly Sample[];
  }>;
}

function labelledRepository(options: { readonly dropRule?: boolean; readonly formats?: number } = {}): {
  repo: string;
  labels: Record<string, "tp" | "fp">;
} {
  const repo = mkdtempSync(join(work, "repo-"));
  const labels: Record<string, "tp" | "fp"> = {};
  // One true positive and one near miss per format keeps the sweep short on CI's two cores; the
  // plugin's corpus test measures every sample of every format.
  for (const f of corpus().slice(0, options.formats)) {
    const dir = join(repo, "corpus", f.format.replace(/[^A-Za-z0-9._-]+/g, "-"));
    mkdirSync(dir, { recursive: true });
    // A format found by where it sits (a path rule: `.p12`, `nuget.config`, `.tf`) keeps its file name.
    const at = (kind: string, i: number, path: string | undefined) =>
      path === undefined ? `${kind}-${i}.txt` : `${kind}-${i}/${basename(path)}`;
    f.positives.slice(0, 1).forEach((text, i) => {
      const name = at("tp", i, f.path);
      mkdirSync(dirname(join(dir, name)), { recursive: true });
      writeFileSync(join(dir, name), text);
      labels[`corpus/${dir.split("/corpus/")[1]}/${name}#secrets/*`] = "tp";
    });
    f.negatives.slice(0, 1).forEach((text, i) => {
      const name = at("near", i, f.negativePath ?? f.path);
      mkdirSync(dirname(join(dir, name)), { recursive: true });
      writeFileSync(join(dir, name), text);
      labels[`corpus/${dir.split("/corpus/")[1]}/${name}#*`] = "fp";
    });
  }
  mkdirSync(join(repo, "ts"));
  writeFileSync(join(repo, "ts/ok.ts"), "export const n: number = 1;\n");
  writeFileSync(join(repo, "ts/bad.ts"), 'export const s: number = "one";\n');
  labels["ts/ok.ts#*"] = "fp";
  labels["ts/bad.ts#ts/2322"] = "tp";
  if (options.dropRule === true) {
    // A fault injection in the labels: a file labelled tp that holds no secret, so no provider
    // reports it. The report must name it as a false negative.
    writeFileSync(join(repo, "ts/missed.txt"), "nothing to see here\n");
    labels["ts/missed.txt#secrets/*"] = "tp";
  }
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "labelled fixtures");
  return { repo, labels };
}

function hostConfig(name: string): string {
  const path = join(work, `${name}.host.json`);
  writeFileSync(
    path,
    JSON.stringify({
      store: join(work, `${name}.store`),
      policy: join(examples, "asp.policy.json"),
      trustRoots: [join(examples, "keys", "example.key.pub")],
      plugins: ["provider-typescript", "provider-secrets"].map((p) => join(ROOT, "plugins", p, "dist", "plugin")),
      providers: [],
    }),
  );
  return path;
}

describe("the dogfood report against the labelled fixture set (secrets corpus + TypeScript fixtures)", () => {
  it("H9.3 a sweep over every labelled fixture: no false positive, no false negative, each labelled finding tied to the receipt", () => {
    const { repo, labels } = labelledRepository();
    const config = hostConfig("clean");
    const labelsFile = join(work, "labels.json");
    writeFileSync(labelsFile, JSON.stringify(labels));
    expect(Object.values(labels).filter((l) => l === "tp").length).toBeGreaterThan(60);
    expect(Object.values(labels).filter((l) => l === "fp").length).toBeGreaterThan(60);

    const sweep = run(["sweep", "--json", "--config", config, "--repo", repo]);
    const envelope = JSON.parse(sweep.stdout) as { decision: string; receiptId?: string };
    expect(envelope.decision, sweep.stderr).toBe("deny");

    const r = run(["dogfood", "report", "--json", "--config", config, "--labels", labelsFile]);
    expect(r.status, r.stderr).toBe(0);
    const check = (JSON.parse(r.stdout) as Report).capabilities.find((c) => c.family === "check");
    expect(check?.falsePositives).toEqual([]);
    expect(check?.falseNegatives).toEqual([]);
  }, 300_000);

  it("H9.3 a labelled true positive nobody reports is a false negative naming the receipt; a labelled near miss reported is a false positive", () => {
    const { repo, labels } = labelledRepository({ dropRule: true, formats: 3 });
    // Label a real finding fp: the report must count it as a false positive.
    labels["ts/bad.ts#ts/2322"] = "fp";
    const config = hostConfig("faults");
    const labelsFile = join(work, "labels-faults.json");
    writeFileSync(labelsFile, JSON.stringify(labels));
    run(["sweep", "--json", "--config", config, "--repo", repo]);
    const r = run(["dogfood", "report", "--json", "--config", config, "--labels", labelsFile]);
    const check = (JSON.parse(r.stdout) as Report).capabilities.find((c) => c.family === "check");
    expect(check?.falseNegatives.map((s) => s.detail)).toEqual([
      expect.stringContaining("ts/missed.txt#secrets/*: labelled tp"),
    ]);
    expect(check?.falsePositives.map((s) => s.detail)).toEqual([expect.stringContaining("ts/bad.ts#ts/2322")]);
    for (const s of [...(check?.falseNegatives ?? []), ...(check?.falsePositives ?? [])])
      expect(s.ref).toMatch(/^rcpt-/);
  }, 300_000);
});
