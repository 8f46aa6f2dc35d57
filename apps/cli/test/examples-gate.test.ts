import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type DecisionEnvelope, validate } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { EXAMPLE_PLUGINS, exampleCopy, FAKE_AWS_KEY } from "./example-copy.js";
import { REPO_ROOT, runBinary } from "./helpers.js";

// Issue 7, end to end: the real, signed example plugins (built by `pnpm build`, pinned and
// granted by examples/asp.policy.json) run as subprocesses under the real host, on a git copy
// of examples/demo-repo.
const PLUGINS = EXAMPLE_PLUGINS;

function setup(): { repo: string; config: string } {
  const { repo, config } = exampleCopy();
  return { repo, config };
}

function gate(repo: string, config: string): { code: number | null; envelope: DecisionEnvelope } {
  const r = runBinary(["gate", "--json", "--config", config, "--repo", repo, "--base", "HEAD"]);
  const envelope = JSON.parse(r.stdout) as DecisionEnvelope;
  const valid = validate("verdict", envelope);
  expect(valid.ok ? [] : valid.errors).toEqual([]);
  return { code: r.code, envelope };
}

describe("asp gate on the example repository with the signed example plugins", { timeout: 180_000 }, () => {
  it("H1b.5 H1b.6 denies a change with a type error and a fake AWS key (two gating findings, each with a next step), and allows the fix", () => {
    const { repo, config } = setup();
    writeFileSync(
      join(repo, "src", "report.ts"),
      `import { clamp, mean } from "./math.js";

export interface Report {
  readonly label: string;
  readonly average: number | undefined;
  readonly score: number;
}

export function summarize(label: string, values: readonly number[]): Report {
  const average = mean(values);
  const score: number = "high";
  return { label, average, score: clamp(score, 0, 100) };
}
`,
    );
    writeFileSync(join(repo, "src", "upload.ts"), `export const AWS_ACCESS_KEY_ID = "${FAKE_AWS_KEY}";\n`);

    const denied = gate(repo, config);
    expect(denied.code).toBe(1);
    expect(denied.envelope.decision).toBe("deny");
    expect(denied.envelope.coverage.degraded).toEqual([]);
    const gating = denied.envelope.findings.filter((f) => f.disposition === "gating");
    expect(gating.map((f) => f.diagnostic.code).sort()).toEqual(["secrets/aws-access-key-id", "ts/2322"]);
    for (const f of gating) expect(f.nextStep, f.diagnostic.code).toMatch(/\S/);
    // The secret never appears in what the host prints.
    expect(JSON.stringify(denied.envelope)).not.toContain(FAKE_AWS_KEY);

    // The fix: a numeric score and no key in the source.
    writeFileSync(
      join(repo, "src", "report.ts"),
      `import { clamp, mean } from "./math.js";

export interface Report {
  readonly label: string;
  readonly average: number | undefined;
  readonly score: number;
}

export function summarize(label: string, values: readonly number[]): Report {
  const average = mean(values);
  const score: number = Math.round(average ?? 0);
  return { label, average, score: clamp(score, 0, 100) };
}
`,
    );
    writeFileSync(
      join(repo, "src", "upload.ts"),
      "/** The key comes from the caller's environment, never from source. */\nexport const accessKeyId = (env: Readonly<Record<string, string | undefined>>) => env.AWS_ACCESS_KEY_ID;\n",
    );
    const allowed = gate(repo, config);
    expect(allowed.envelope.findings.filter((f) => f.disposition === "gating")).toEqual([]);
    expect(allowed.envelope.decision).toBe("allow");
    expect(allowed.code).toBe(0);
    expect([...allowed.envelope.coverage.ran].sort()).toEqual(["secrets", "types"]);
  });

  it("the README's main command gates the example repository as it is: allow, with a receipt", () => {
    const r = runBinary(["gate", "--config", "examples/asp.host.json", "--repo", "examples/demo-repo"]);
    expect(r.stdout).toMatch(/^ALLOW \(gate\)/);
    expect(r.stdout).toMatch(/receipt {2}rcpt-\S+ stored in \S+/);
    expect(r.code).toBe(0);
  });

  it.each(PLUGINS)("the signed %s passes the conformance kit (asp conformance --plugin)", (name) => {
    const dir = join(REPO_ROOT, "plugins", name, "dist", "plugin");
    const r = runBinary(["conformance", "--json", "--plugin", dir]);
    const report = JSON.parse(r.stdout) as { passed: boolean; checks: Array<{ id: string; status: string }> };
    expect(report.checks.filter((c) => c.status !== "pass")).toEqual([]);
    expect(report.passed).toBe(true);
    expect(r.code).toBe(0);
  });
});
