import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
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

    const child = spawn(process.execPath, [BIN, "serve", "--stdio", "--config", config, "--repo", repo], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const conn = createStreamConnection(child.stdout, child.stdin);
    conn.listen();
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
