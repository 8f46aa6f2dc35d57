import { appendFileSync, cpSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DecisionEnvelope, type Policy, validate } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { REPO_ROOT, runBinary } from "./helpers.js";

// Issue 11 item 10, end to end: the real `asp gate` process, the real signed secrets plugin
// from `pnpm build`, and copies of it beside it in the host configuration's plugins list. No
// set of plugin folders ends the gate without a decision (exit 0/1/2) and a stored receipt.
const SIGNED = join(REPO_ROOT, "plugins", "provider-secrets", "dist", "plugin");
const ID = "asp.provider-secrets";
const FAKE_AWS_KEY = ["AKIA", "Q7XJ3KZP", "2M4N8RTB"].join("");

/** A copy of the demo repository and a trusted configuration naming `plugins(root)`. */
function setup(plugins: (root: string) => string[]): { root: string; repo: string; config: string } {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "asp-cli-refusal-")));
  const repo = join(root, "demo-repo");
  cpSync(join(REPO_ROOT, "examples", "demo-repo"), repo, { recursive: true });
  // The example policy, narrowed to the requirement the secrets provider answers.
  const policy = JSON.parse(readFileSync(join(REPO_ROOT, "examples", "asp.policy.json"), "utf8")) as Policy;
  writeFileSync(
    join(root, "asp.policy.json"),
    JSON.stringify({
      ...policy,
      requirements: policy.requirements.filter((r) => r.id === "secrets"),
      grants: policy.grants.filter((g) => g.provider === ID),
    }),
  );
  const config = join(root, "asp.host.json");
  writeFileSync(
    config,
    JSON.stringify({
      store: join(root, "store"),
      policy: join(root, "asp.policy.json"),
      trustRoots: [join(REPO_ROOT, "examples", "keys", "example.key.pub")],
      plugins: plugins(root),
      providers: [],
    }),
  );
  return { root, repo, config };
}

function copyOf(root: string, name: string, tamper: boolean): string {
  const dir = join(root, name);
  cpSync(SIGNED, dir, { recursive: true });
  if (tamper) appendFileSync(join(dir, "main.mjs"), "\n// one more byte\n");
  return dir;
}

/** `asp gate --json`: the exit code, the envelope, and the receipt read back from the store. */
function gate(repo: string, config: string): { code: number | null; envelope: DecisionEnvelope } {
  // No --base: a fresh store's first gate sees the whole repository as the change; a later one
  // sees at least what changed since the previous gate.
  const r = runBinary(["gate", "--json", "--config", config, "--repo", repo]);
  expect(r.stderr).not.toMatch(/internal error/);
  const envelope = JSON.parse(r.stdout) as DecisionEnvelope;
  expect(validate("verdict", envelope).ok).toBe(true);
  const receiptId = envelope.receipt?.id;
  expect(receiptId).toMatch(/^rcpt-/);
  const shown = runBinary(["receipts", "show", "--json", String(receiptId), "--config", config]);
  expect(shown.code).toBe(0);
  expect((JSON.parse(shown.stdout) as { envelope: DecisionEnvelope }).envelope).toEqual(envelope);
  return { code: r.code, envelope };
}

describe("asp gate with a refused copy of a signed plugin beside it", () => {
  it("a tampered copy listed first is refused under its folder: allow (0) on the clean repo, deny (1) on a key", () => {
    const { root, repo, config } = setup((r) => [copyOf(r, "secrets-copy", true), SIGNED]);
    const clean = gate(repo, config);
    expect(clean.code).toBe(0);
    expect(clean.envelope.decision).toBe("allow");
    expect(clean.envelope.coverage.degraded.map((d) => [d.provider, d.reason])).toEqual([
      [`plugin:${join(root, "secrets-copy")}`, "unavailable"],
    ]);

    writeFileSync(join(repo, "src", "upload.ts"), `export const AWS_ACCESS_KEY_ID = "${FAKE_AWS_KEY}";\n`);
    const dirty = gate(repo, config);
    expect(dirty.code).toBe(1);
    expect(dirty.envelope.decision).toBe("deny");
    expect(dirty.envelope.findings.map((f) => [f.provider.id, f.diagnostic.code])).toEqual([
      [ID, "secrets/aws-access-key-id"],
    ]);
  }, 120_000);

  it("two verified copies claiming one id: both refused, indeterminate (2), with a receipt", () => {
    const { root, repo, config } = setup((r) => [SIGNED, copyOf(r, "secrets-verified-copy", false)]);
    const { code, envelope } = gate(repo, config);
    expect(code).toBe(2);
    expect(envelope.decision).toBe("indeterminate");
    const degraded = envelope.coverage.degraded.map((d) => [d.provider ?? d.requirement, d.reason]);
    expect(degraded).toHaveLength(3);
    expect(degraded).toEqual(
      expect.arrayContaining([
        [`plugin:${SIGNED}`, "unavailable"],
        [`plugin:${join(root, "secrets-verified-copy")}`, "unavailable"],
        ["secrets", "missing"],
      ]),
    );
  }, 120_000);
});
