import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { digestPlugin } from "@asp/plugin-host";
import { createStreamConnection } from "@asp/protocol";
import { git } from "@asp/test-utils";
import { describe, expect, it } from "vitest";
import { exampleCopy, FAKE_AWS_KEY } from "./example-copy.js";
import { BIN, REPO_ROOT, runBinary } from "./helpers.js";

// Issue 13 item 3, end to end as a user runs it: `asp edit propose` records a plan from the real,
// signed provider-text-edit; `asp apply` applies it only after the gate's required checks allow
// the hypothetical after-state, and prints the apply receipt (host §6).

const json = (stdout: string): Record<string, unknown> => JSON.parse(stdout) as Record<string, unknown>;

function propose(config: string, repo: string, args: unknown, intent = "replace") {
  return runBinary([
    "edit",
    "propose",
    "--json",
    "--config",
    config,
    "--repo",
    repo,
    "--provider",
    "asp.provider-text-edit",
    "--intent",
    intent,
    "--args",
    JSON.stringify(args),
  ]);
}

/** `asp serve --stdio` for `repo`, and a JSON-RPC connection to it. */
function serve(config: string, repo: string) {
  const child = spawn(process.execPath, [BIN, "serve", "--stdio", "--config", config, "--repo", repo], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const conn = createStreamConnection(child.stdout, child.stdin);
  conn.listen();
  return { child, conn };
}

describe("asp edit propose, then asp apply, on the example repository", () => {
  it("H1b.10 H6.2 H6.4 H6.7 H3.2 host §6: an allowed plan is applied under the sandboxes; the receipt names both baselines and the guarantee", () => {
    const { repo, config } = exampleCopy({ sandboxes: true });
    const before = readFileSync(join(repo, "src", "math.ts"), "utf8");
    const p = propose(config, repo, {
      path: "src/math.ts",
      oldText: "/** Clamp `value` into `[min, max]`. */",
      newText: "/** Clamp `value` into the closed range `[min, max]`. */",
    });
    expect(p.code, p.stderr).toBe(0);
    const proposal = json(p.stdout);
    expect(proposal.rejection ?? null).toBeNull();
    // Proposing writes nothing.
    expect(readFileSync(join(repo, "src", "math.ts"), "utf8")).toBe(before);

    const a = runBinary(["apply", String(proposal.proposalId), "--json", "--config", config, "--repo", repo]);
    expect(a.code, a.stderr).toBe(0);
    const { receipt, envelope } = json(a.stdout) as {
      receipt: Record<string, unknown>;
      envelope: { decision: string } | null;
    };
    expect(receipt.applied).toBe(true);
    expect(receipt.decision).toBe("allow");
    expect(envelope?.decision).toBe("allow");
    expect(receipt.baselineBefore).toBe(proposal.baseline);
    expect(receipt.baselineAfter).not.toBeNull();
    expect(receipt.baselineAfter).not.toBe(receipt.baselineBefore);
    // Published through the granted staged-snapshot sandbox (journal + atomic renames), and the
    // providers that validated the after-state ran under bubblewrap.
    expect(receipt.transactionGuarantee).toBe("staged_snapshot");
    // H3.2: the edit provider proposed under bubblewrap too, so the apply claims isolation.
    expect(receipt).toMatchObject({ assuranceMode: "isolated", directWriteRisk: false });
    expect(receipt.sandbox).toMatchObject({ id: "asp.sandbox-staged-snapshot" });
    const modes = (envelope as unknown as { assurance: { providers: Array<{ provider: string; mode: string }> } })
      .assurance.providers;
    expect(modes.filter((m) => m.provider !== "asp.provider-text-edit").map((m) => m.mode)).toEqual(
      modes.filter((m) => m.provider !== "asp.provider-text-edit").map(() => "isolated"),
    );
    expect(readFileSync(join(repo, "src", "math.ts"), "utf8")).toContain("the closed range");

    // The human rendering of the same kind of run, and a second apply of the same proposal is refused.
    const again = runBinary(["apply", String(proposal.proposalId), "--config", config, "--repo", repo]);
    expect(again.code).not.toBe(0);
  }, 300_000);

  it("H6.6 host §6: a plan whose after-state the gate denies is not applied, and nothing is written", () => {
    const { repo, config } = exampleCopy({ sandboxes: true });
    const p = propose(
      config,
      repo,
      { path: "src/keys.ts", content: `export const AWS_ACCESS_KEY_ID = "${FAKE_AWS_KEY}";\n` },
      "create",
    );
    expect(p.code, p.stderr).toBe(0);
    const proposal = json(p.stdout);
    const a = runBinary(["apply", String(proposal.proposalId), "--config", config, "--repo", repo]);
    expect(a.code, a.stderr).toBe(1);
    expect(a.stdout).toMatch(/^NOT APPLIED/);
    expect(a.stdout).toMatch(/baseline after {2}- \(nothing written\)/);
    expect(git(repo, "status", "--porcelain")).toBe("");
  }, 300_000);

  it("H6.9 H6.10 H3.3 host §6: host/applyProposal on asp serve --stdio applies on request, never on a notification", async () => {
    const { repo, config } = exampleCopy();
    const p = propose(config, repo, { path: "src/math.ts", oldText: "Arithmetic mean", newText: "The mean" });
    expect(p.code, p.stderr).toBe(0);
    const proposalId = String(json(p.stdout).proposalId);

    const { child, conn } = serve(config, repo);
    try {
      // A notification is not an apply intent.
      await conn.sendNotification("host/applyProposal", { proposalId });
      const status = (await conn.sendRequest("host/status", null)) as { $$type: string };
      expect(status.$$type).toBe("@asp/HostStatus");
      expect(git(repo, "status", "--porcelain")).toBe("");

      const bad = conn.sendRequest("host/applyProposal", { proposalId, repo: "/elsewhere" });
      await expect(bad).rejects.toMatchObject({ code: -32602 });

      const result = (await conn.sendRequest("host/applyProposal", { proposalId })) as {
        receipt: { applied: boolean; proposalId: string };
      };
      // H3.3: without a sandbox plugin the edit provider ran as a plain subprocess: the receipt
      // claims no isolation and reports the direct-write risk, and the host wrote the files itself.
      expect(result.receipt).toMatchObject({
        applied: true,
        proposalId,
        assuranceMode: "advisory",
        directWriteRisk: true,
        transactionGuarantee: "rollback_attempted",
      });
      expect(readFileSync(join(repo, "src", "math.ts"), "utf8")).toContain("The mean");
    } finally {
      conn.dispose();
      child.stdin.end();
      await new Promise((done) => child.once("exit", done));
    }
  }, 300_000);
});

// Issue 32, the apply holes through the real CLI, the signed example plugins and a real git
// repository: hole 5 (THREAT-MODEL inv. 6, 11), hole 6 (inv. 15) and hole 12 (inv. 5, 8).

const keyFile = { path: "src/keys.ts", content: `export const AWS_ACCESS_KEY_ID = "${FAKE_AWS_KEY}";\n` };

describe("asp apply: the requester never chooses the call-site (issue 32 hole 6, THREAT-MODEL inv. 15)", () => {
  it("issue 32 hole 6: asp apply --call-site interactive is refused, and a denied secret is never written", () => {
    // Before the fix: `interactive` does not require the secrets check, so this APPLIED the key (exit 0).
    const { repo, config } = exampleCopy();
    const p = propose(config, repo, keyFile, "create");
    expect(p.code, p.stderr).toBe(0);
    const id = String(json(p.stdout).proposalId);
    const a = runBinary(["apply", id, "--json", "--call-site", "interactive", "--config", config, "--repo", repo]);
    expect(a.code).toBe(64);
    expect(json(a.stdout)).toMatchObject({ error: { code: "ASP_CLI_USAGE" } });
    expect(existsSync(join(repo, "src", "keys.ts"))).toBe(false);
    // Without the flag, the gate decides: denied (exit 1), nothing written.
    const g = runBinary(["apply", id, "--config", config, "--repo", repo]);
    expect(g.code, g.stderr).toBe(1);
    expect(git(repo, "status", "--porcelain")).toBe("");
  }, 300_000);

  it("issue 32 hole 6: host/applyProposal { callSite: interactive } is refused ASP_APPLY_CALL_SITE_REFUSED", async () => {
    const { repo, config } = exampleCopy();
    const p = propose(config, repo, keyFile, "create");
    expect(p.code, p.stderr).toBe(0);
    const proposalId = String(json(p.stdout).proposalId);
    const { child, conn } = serve(config, repo);
    try {
      const refused = conn.sendRequest("host/applyProposal", { proposalId, callSite: "interactive" });
      await expect(refused).rejects.toMatchObject({ data: { code: "ASP_APPLY_CALL_SITE_REFUSED" } });
      expect(existsSync(join(repo, "src", "keys.ts"))).toBe(false);
    } finally {
      conn.dispose();
      child.stdin.end();
      await new Promise((done) => child.once("exit", done));
    }
  }, 300_000);
});

describe("asp apply writes only the judged tree (issue 32 hole 5, THREAT-MODEL inv. 6, 11)", () => {
  it("issue 32 hole 5: create .env over an ignored, untracked .env is NOT APPLIED (ASP_APPLY_DISK_DRIFT), the real file kept", () => {
    // Before the fix: APPLIED, the receipt said `before: absent` and the real .env was overwritten.
    const { repo, config } = exampleCopy();
    writeFileSync(join(repo, ".gitignore"), ".env\n");
    git(repo, "add", ".gitignore");
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "ignore .env");
    writeFileSync(join(repo, ".env"), "SECRET=the-real-one\n");
    const p = propose(config, repo, { path: ".env", content: "SECRET=overwritten\n" }, "create");
    expect(p.code, p.stderr).toBe(0);
    const a = runBinary(["apply", String(json(p.stdout).proposalId), "--json", "--config", config, "--repo", repo]);
    expect(a.code, a.stderr).toBe(2);
    expect(json(a.stdout)).toMatchObject({
      receipt: { applied: false, baselineAfter: null, rejection: { code: "ASP_APPLY_DISK_DRIFT" } },
    });
    expect(readFileSync(join(repo, ".env"), "utf8")).toBe("SECRET=the-real-one\n");
  }, 300_000);
});

describe("asp gate with a damaged staged-apply journal (issue 32 hole 12, THREAT-MODEL inv. 5, 8)", () => {
  it("issue 32 hole 12: exit 74 with a recorded failure and a next step that runs as printed; then the gate runs", () => {
    // Before the fix: `asp: ASP_STAGED_JOURNAL_INVALID`, exit 64, nothing recorded, every gate of the repository.
    const { root, repo, config } = exampleCopy({ sandboxes: true });
    // The staged-snapshot sandbox pinned as built now (the example policy's pins are re-made by the lead).
    const policy = JSON.parse(readFileSync(join(REPO_ROOT, "examples", "asp.policy.json"), "utf8")) as {
      plugins: Array<{ id: string; digest: string }>;
    };
    const staged = join(REPO_ROOT, "plugins", "sandbox-staged-snapshot", "dist", "plugin");
    for (const p of policy.plugins) if (p.id === "asp.sandbox-staged-snapshot") p.digest = digestPlugin(staged).digest;
    writeFileSync(join(root, "policy.json"), JSON.stringify(policy));
    const host = JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>;
    writeFileSync(config, JSON.stringify({ ...host, policy: join(root, "policy.json") }));

    const journal = join(
      `${join(root, "store")}.journal`,
      createHash("sha256").update(realpathSync(repo)).digest("hex").slice(0, 16),
    );
    mkdirSync(journal, { recursive: true });
    writeFileSync(join(journal, "asp-staged-journal.json"), Buffer.from('{"format": garbage\u0000\xff', "latin1"));

    const gate = runBinary(["gate", "--config", config, "--repo", repo]);
    expect(gate.code, gate.stderr).toBe(74);
    expect(gate.stderr).toContain("ASP_APPLY_JOURNAL_DAMAGED");
    const next = /run: (asp edit discard-journal \S+)/.exec(gate.stderr)?.[1];
    expect(next).toBe(`asp edit discard-journal ${journal}`);
    // (That the failure is recorded in the log as ths.apply-recovery-failed: packages/ths/test/apply-judged-tree.test.ts.)

    // The next step runs as printed (after `asp`), and the gate then decides.
    const discard = runBinary((next as string).split(" ").slice(1));
    expect(discard.code, discard.stderr).toBe(0);
    expect(existsSync(journal)).toBe(false);
    const again = runBinary(["gate", "--config", config, "--repo", repo]);
    expect(again.code, again.stderr).toBe(0);
  }, 300_000);
});
