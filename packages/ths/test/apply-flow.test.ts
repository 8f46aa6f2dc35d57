import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validate } from "@asp/contracts";
import { describe, expect, it } from "vitest";
import { ThsError, trustedBaseKey } from "../src/index.js";
import { applyRepo, bytesOf, editManifest, replaceIntent } from "./apply-helpers.js";
import { manifest, policyFor, testHost } from "./helpers.js";

const ts = manifest("fake-honest-ts", { source: "ts" });
const edit = editManifest("fake-edit-honest");

/** A host with the honest edit provider and (by default) the honest `ts` check required at every call-site. */
async function applyHost(options: { checks?: boolean; editRetries?: number; editors?: string[] } = {}) {
  const editors = (options.editors ?? ["fake-edit-honest"]).map((id) => editManifest("fake-edit-honest", { id }));
  const checks = options.checks === false ? [] : [ts];
  const policy = policyFor(checks, { timeoutMs: 5000 });
  const withRetries = { ...policy, budgets: { ...policy.budgets, editRetries: options.editRetries ?? 2 } };
  return (await testHost({ policy: withRetries, providers: [...checks, ...editors], warm: false })).host;
}

describe("mediated apply (host §6)", () => {
  describe("when the required checks allow the hypothetical after-state", () => {
    it("H0.2 H6.1 H6.2 H6.4 host §6: applies, re-snapshots to exactly the validated after-tree, and records a full receipt first", async () => {
      const host = await applyHost();
      try {
        const repo = applyRepo();
        const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        expect(proposed.rejection).toBeUndefined();
        // host §6: a proposal writes nothing.
        expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 1;\n");
        const { receipt, envelope } = await host.apply({ repo, proposalId: proposed.proposalId });
        expect(validate("apply-receipt", receipt).ok).toBe(true);
        expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 2;\n");
        expect(receipt).toMatchObject({
          proposalId: proposed.proposalId,
          applied: true,
          baselineBefore: proposed.baseline,
          decision: "allow",
          transactionGuarantee: "rollback_attempted",
          directWriteRisk: true,
          sandbox: null,
          attempts: 1,
          provenance: { provider: { id: "fake-edit-honest", version: "1.0.0" }, digest: edit.digest },
        });
        expect(receipt.baselineAfter).toBe(receipt.hypotheticalAfter);
        expect(receipt.files).toEqual([expect.objectContaining({ path: "src/a.ts", outcome: "written" })]);
        // The validation decision ran the required check on the change B -> B+edit and is in the log.
        expect(envelope?.decision).toBe("allow");
        expect(envelope?.coverage.ran).toEqual(["req-fake-honest-ts"]);
        expect(envelope?.baseline).toBe(receipt.hypotheticalAfter);
        expect(receipt.validation?.decisionId).toBe(envelope?.decisionId);
        const facts = await host.log.list({ index: { name: "proposalId", value: proposed.proposalId } });
        expect(facts.at(-1)?.record).toEqual(receipt);
        const decision = await host.log.list({ index: { name: "decisionId", value: envelope?.decisionId ?? "" } });
        expect(decision.map((d) => d.kind)).toContain("ths.decision");
      } finally {
        await host.close();
      }
    });

    it("H6.10 host §6: a proposal applies at most once; the second apply is a recorded, coded refusal", async () => {
      const host = await applyHost({ checks: false });
      try {
        const repo = applyRepo();
        const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        expect((await host.apply({ repo, proposalId: proposed.proposalId })).receipt.applied).toBe(true);
        writeFileSync(join(repo, "src/a.ts"), "export const a = 1;\n"); // even when it would apply again
        const again = await host.apply({ repo, proposalId: proposed.proposalId });
        expect(again.receipt.applied).toBe(false);
        expect(again.receipt.rejection?.code).toBe("ASP_APPLY_ALREADY_APPLIED");
        expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 1;\n");
        const kinds = (await host.log.list({ index: { name: "proposalId", value: proposed.proposalId } })).map(
          (f) => f.kind,
        );
        expect(kinds).toEqual(["ths.edit-proposal", "ths.apply-receipt", "ths.apply-receipt"]);
      } finally {
        await host.close();
      }
    });

    it("H6.4 host §6: a proposal stored by one host is applied by a later one on the same store", async () => {
      const store = join(mkdtempSync(join(tmpdir(), "asp-apply-store-")), "store");
      const repo = applyRepo();
      const compose = async () =>
        (await testHost({ store, policy: policyFor([]), providers: [edit], warm: false })).host;
      const first = await compose();
      const proposed = await first.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
      await first.close();
      const later = await compose();
      try {
        const { receipt } = await later.apply({ repo, proposalId: proposed.proposalId });
        expect(receipt.applied).toBe(true);
        expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 2;\n");
        const kinds = (await later.log.list({ index: { name: "proposalId", value: proposed.proposalId } })).map(
          (f) => f.kind,
        );
        expect(kinds).toEqual(["ths.edit-proposal", "ths.apply-receipt"]);
      } finally {
        await later.close();
      }
    });

    it("H6.2 host §6: creates a file in a new folder (the after-tree is built in the store)", async () => {
      const host = await applyHost({ checks: false });
      try {
        const repo = applyRepo();
        const p = await host.propose({
          repo,
          intent: { kind: "create", arguments: { path: "new/deep/c.ts", content: "c\n" } },
        });
        const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
        expect(receipt.applied).toBe(true);
        expect(receipt.baselineAfter).toBe(receipt.hypotheticalAfter);
        expect(readFileSync(join(repo, "new/deep/c.ts"), "utf8")).toBe("c\n");
      } finally {
        await host.close();
      }
    });

    it("H6.5 host §6: a parent swapped for a symbolic link after the proposal is never written through", async () => {
      const host = await applyHost({ checks: false });
      try {
        const repo = applyRepo();
        mkdirSync(join(repo, "sub"));
        writeFileSync(join(repo, "sub/keep.txt"), "keep\n");
        const p = await host.propose({
          repo,
          intent: { kind: "create", arguments: { path: "sub/x.ts", content: "x\n" } },
        });
        expect(p.rejection).toBeUndefined();
        const outside = mkdtempSync(join(tmpdir(), "asp-outside-"));
        rmSync(join(repo, "sub"), { recursive: true });
        symlinkSync(outside, join(repo, "sub"));
        const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
        expect(receipt.applied).toBe(false);
        expect(receipt.rejection?.code).toBe("ASP_APPLY_BASELINE_MOVED");
        expect(readdirSync(outside)).toEqual([]);
      } finally {
        await host.close();
      }
    });

    it("refuses an unknown proposal id with a code", async () => {
      const host = await applyHost({ checks: false });
      try {
        await expect(host.apply({ repo: applyRepo(), proposalId: "proposal-nope" })).rejects.toMatchObject({
          code: "ASP_APPLY_UNKNOWN_PROPOSAL",
        });
        await expect(host.apply({ repo: applyRepo(), proposalId: "proposal-nope" })).rejects.toBeInstanceOf(ThsError);
      } finally {
        await host.close();
      }
    });
  });

  describe("when the required checks deny the hypothetical after-state", () => {
    it("H6.6 host §6: applied false, baselineAfter null, the worktree bytes unchanged", async () => {
      const host = await applyHost();
      try {
        const repo = applyRepo();
        const before = bytesOf(repo);
        const proposed = await host.propose({
          repo,
          intent: replaceIntent("src/a.ts", "a = 1", "a = 1; // ASP-TS-ERROR"),
        });
        expect(proposed.rejection).toBeUndefined();
        const { receipt, envelope } = await host.apply({ repo, proposalId: proposed.proposalId });
        expect(envelope?.decision).toBe("deny");
        expect(receipt).toMatchObject({
          applied: false,
          baselineAfter: null,
          decision: "deny",
          transactionGuarantee: "none",
          rejection: { code: "ASP_APPLY_DENIED" },
        });
        expect(receipt.files?.every((f) => f.outcome === "unchanged")).toBe(true);
        expect(bytesOf(repo)).toEqual(before);
      } finally {
        await host.close();
      }
    });

    it("H6.2 host §6: an allow on the hypothetical never becomes the trusted base of the next gate", async () => {
      const host = await applyHost();
      try {
        const repo = applyRepo();
        const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        const { envelope } = await host.apply({ repo, proposalId: proposed.proposalId, callSite: "gate" });
        expect(envelope?.decision).toBe("allow");
        // THREAT-MODEL invariant 1: the hypothetical allow checked B -> B+edit only, not base -> B.
        expect(await host.log.latest(trustedBaseKey(repo))).toBeUndefined();
      } finally {
        await host.close();
      }
    });
  });

  describe("when the worktree moved since the proposal (host §6 step 5)", () => {
    const lines = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}\n`).join("");

    it("H6.3 host §6: a change elsewhere in a touched file is 3-way merged and both changes kept", async () => {
      const host = await applyHost({ checks: false });
      try {
        const repo = applyRepo({ "src/b.txt": lines(20) });
        const proposed = await host.propose({ repo, intent: replaceIntent("src/b.txt", "line 2\n", "LINE TWO\n") });
        writeFileSync(join(repo, "src/b.txt"), lines(20).replace("line 18\n", "line eighteen\n"));
        const { receipt } = await host.apply({ repo, proposalId: proposed.proposalId });
        expect(receipt.applied).toBe(true);
        expect(receipt.mergedPaths).toEqual(["src/b.txt"]);
        expect(receipt.baselineBefore).not.toBe(proposed.baseline);
        expect(receipt.baselineAfter).toBe(receipt.hypotheticalAfter);
        const text = readFileSync(join(repo, "src/b.txt"), "utf8");
        expect(text).toContain("LINE TWO\n");
        expect(text).toContain("line eighteen\n");
      } finally {
        await host.close();
      }
    });

    it("H6.3 host §6: untouched paths that moved are kept, not reverted", async () => {
      const host = await applyHost({ checks: false });
      try {
        const repo = applyRepo();
        const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        writeFileSync(join(repo, "README.md"), "# moved meanwhile\n");
        const { receipt } = await host.apply({ repo, proposalId: proposed.proposalId });
        expect(receipt.applied).toBe(true);
        expect(receipt.mergedPaths).toEqual([]);
        expect(readFileSync(join(repo, "README.md"), "utf8")).toBe("# moved meanwhile\n");
        expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 2;\n");
      } finally {
        await host.close();
      }
    });

    it("H6.3 host §6: an overlapping move is re-proposed against the new baseline", async () => {
      const host = await applyHost({ checks: false });
      try {
        const repo = applyRepo();
        const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        writeFileSync(join(repo, "src/a.ts"), "export const a = 1; // moved\n");
        const { receipt } = await host.apply({ repo, proposalId: proposed.proposalId });
        expect(receipt.applied).toBe(true);
        expect(receipt.attempts).toBe(2);
        expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 2; // moved\n");
      } finally {
        await host.close();
      }
    });

    it("H6.3 host §6: when re-proposing cannot help, it is rejected with ASP_APPLY_BASELINE_MOVED and nothing is written", async () => {
      const host = await applyHost({ checks: false, editRetries: 1 });
      try {
        const repo = applyRepo();
        const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        writeFileSync(join(repo, "src/a.ts"), "export const a = 7;\n");
        const before = bytesOf(repo);
        const { receipt } = await host.apply({ repo, proposalId: proposed.proposalId });
        expect(receipt).toMatchObject({
          applied: false,
          baselineAfter: null,
          rejection: { code: "ASP_APPLY_BASELINE_MOVED" },
        });
        expect(bytesOf(repo)).toEqual(before);
      } finally {
        await host.close();
      }
    });

    it("H6.3 host §6: re-proposals are bounded by budgets.editRetries (0: none)", async () => {
      const host = await applyHost({ checks: false, editRetries: 0 });
      try {
        const repo = applyRepo();
        const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        writeFileSync(join(repo, "src/a.ts"), "export const a = 1; // moved\n");
        const { receipt } = await host.apply({ repo, proposalId: proposed.proposalId });
        expect(receipt.rejection?.code).toBe("ASP_APPLY_BASELINE_MOVED");
        expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 1; // moved\n");
      } finally {
        await host.close();
      }
    });
  });
});
