import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApplyRejectionCode, ComposedHost } from "../src/index.js";
import { applyRepo, bytesOf, editManifest, replaceIntent } from "./apply-helpers.js";
import { policyFor, testHost } from "./helpers.js";

// host §6: before apply, the host rejects any edit provider output that is not a structured
// EditPlan bound to the request's baseline, each class with its own stable code. Each row is a
// real subprocess (`fake-edit-bad --bad KIND`) answering edit/propose with that bad plan.
const ROWS: ReadonlyArray<readonly [string, ApplyRejectionCode]> = [
  ["not-a-plan", "ASP_APPLY_NOT_A_PLAN"],
  ["not-an-object", "ASP_APPLY_NOT_A_PLAN"],
  ["shell", "ASP_APPLY_SHELL_COMMAND"],
  ["shell-op", "ASP_APPLY_SHELL_COMMAND"],
  ["script", "ASP_APPLY_SCRIPT"],
  ["command-array", "ASP_APPLY_COMMAND_ARRAY"],
  ["command-as-array", "ASP_APPLY_COMMAND_ARRAY"],
  ["patch", "ASP_APPLY_PATCH_SHELLOUT"],
  ["missing-precondition", "ASP_APPLY_MISSING_PRECONDITION"],
  ["missing-blob", "ASP_APPLY_MISSING_BLOB"],
  ["unsupported", "ASP_APPLY_UNSUPPORTED_OPERATION"],
  ["stale", "ASP_APPLY_STALE"],
  ["baseline-mismatch", "ASP_APPLY_BASELINE_MISMATCH"],
  ["drift", "ASP_APPLY_PATH_DRIFT"],
  ["host-owned", "ASP_APPLY_HOST_OWNED_FIELD"],
  ["applied", "ASP_APPLY_HOST_OWNED_FIELD"],
  ["guarantee", "ASP_APPLY_CLAIMED_GUARANTEE"],
  ["dotdot", "ASP_APPLY_PATH_ESCAPE"],
  ["absolute", "ASP_APPLY_PATH_ESCAPE"],
  ["git", "ASP_APPLY_PATH_ESCAPE"],
  ["tree-symlink", "ASP_APPLY_PATH_ESCAPE"],
  ["worktree-symlink", "ASP_APPLY_PATH_ESCAPE"],
  ["binary", "ASP_APPLY_BINARY_EDIT"],
  // host §9: the dependency environment is read-only evidence, never part of a change.
  ["write-env", "ASP_APPLY_PATH_ESCAPE"],
];

describe("plan validation (host §6)", () => {
  describe("when the edit provider answers a bad plan", () => {
    it.each(ROWS)("H6.5 host §6: %s is rejected with %s, recorded, and nothing is written", async (bad, code) => {
      const repo = applyRepo();
      const m = editManifest("fake-edit-bad", { args: ["--bad", bad, "--repo", repo] });
      const { host } = await testHost({ policy: policyFor([]), providers: [m], warm: false });
      try {
        const before = bytesOf(repo);
        const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        expect(proposed.rejection?.code).toBe(code);
        expect(proposed.plan).toBeUndefined();
        // The rejection is durable, and an apply of it is refused with the same code.
        const { receipt, envelope } = await host.apply({ repo, proposalId: proposed.proposalId });
        expect(receipt.applied).toBe(false);
        expect(receipt.baselineAfter).toBeNull();
        expect(receipt.rejection?.code).toBe(code);
        expect(envelope).toBeNull();
        expect(bytesOf(repo)).toEqual(before);
        expect(existsSync(join(repo, "..", "outside.txt"))).toBe(false);
        const facts = await host.log.list({ index: { name: "proposalId", value: proposed.proposalId } });
        expect(facts.map((f) => f.kind)).toEqual(["ths.edit-proposal", "ths.apply-receipt"]);
      } finally {
        await host.close();
      }
    });
  });

  describe("when the plan is honest", () => {
    let host: ComposedHost;
    let repo: string;
    beforeAll(async () => {
      repo = applyRepo();
      ({ host } = await testHost({
        policy: policyFor([]),
        providers: [editManifest("fake-edit-bad", { args: ["--bad", "none"] })],
        warm: false,
      }));
    });
    afterAll(() => host.close());

    it("H6.1 host §6: the same fixture with no fault is validated and applied", async () => {
      const proposed = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
      expect(proposed.rejection).toBeUndefined();
      const { receipt } = await host.apply({ repo, proposalId: proposed.proposalId });
      expect(receipt.applied).toBe(true);
      expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 2;\n");
    });
  });
});
