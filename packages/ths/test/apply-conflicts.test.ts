import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { applyRepo, editManifest, replaceIntent } from "./apply-helpers.js";
import { policyFor, testHost } from "./helpers.js";

// host §4: two edit proposals touching overlapping blobs MUST NOT both apply. Two real edit
// providers propose overlapping changes to one line against the same baseline.
async function twoProviders() {
  const providers = ["edit-one", "edit-two"].map((id) => editManifest("fake-edit-honest", { id }));
  const { host } = await testHost({ policy: policyFor([]), providers, warm: false });
  const repo = applyRepo();
  const p1 = await host.propose({ repo, provider: "edit-one", intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
  const p2 = await host.propose({ repo, provider: "edit-two", intent: replaceIntent("src/a.ts", "a = 1", "a = 3") });
  expect(p1.provider?.id).toBe("edit-one");
  expect(p2.provider?.id).toBe("edit-two");
  expect(p1.baseline).toBe(p2.baseline);
  return { host, repo, p1, p2 };
}

describe("conflicting edits (host §4)", () => {
  describe("when two overlapping plans are applied concurrently", () => {
    it("H4.3 host §4: never both apply; the other is re-proposed against the new baseline and refused", async () => {
      const { host, repo, p1, p2 } = await twoProviders();
      try {
        const results = await Promise.all([
          host.apply({ repo, proposalId: p1.proposalId }),
          host.apply({ repo, proposalId: p2.proposalId }),
        ]);
        expect(results.filter((r) => r.receipt.applied)).toHaveLength(1);
        const loser = results.find((r) => !r.receipt.applied);
        expect(loser?.receipt.rejection?.code).toBe("ASP_APPLY_BASELINE_MOVED");
        expect(["export const a = 2;\n", "export const a = 3;\n"]).toContain(
          readFileSync(join(repo, "src/a.ts"), "utf8"),
        );
      } finally {
        await host.close();
      }
    });
  });

  describe("when they are applied together with applyMany", () => {
    it("H4.3 host §4: the first applies, the overlapping one is rejected with ASP_APPLY_CONFLICT", async () => {
      const { host, repo, p1, p2 } = await twoProviders();
      try {
        const [r1, r2] = await host.applyMany([p1.proposalId, p2.proposalId], { repo });
        expect(r1?.receipt.applied).toBe(true);
        expect(r2?.receipt.applied).toBe(false);
        expect(r2?.receipt.rejection?.code).toBe("ASP_APPLY_CONFLICT");
        expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 2;\n");
      } finally {
        await host.close();
      }
    });

    it("H4.3 host §4: plans on different blobs both apply", async () => {
      const providers = ["edit-one", "edit-two"].map((id) => editManifest("fake-edit-honest", { id }));
      const { host } = await testHost({ policy: policyFor([]), providers, warm: false });
      try {
        const repo = applyRepo();
        const p1 = await host.propose({
          repo,
          provider: "edit-one",
          intent: replaceIntent("src/a.ts", "a = 1", "a = 2"),
        });
        const p2 = await host.propose({
          repo,
          provider: "edit-two",
          intent: replaceIntent("README.md", "demo", "Demo"),
        });
        const results = await host.applyMany([p1.proposalId, p2.proposalId], { repo });
        expect(results.map((r) => r.receipt.applied)).toEqual([true, true]);
        expect(readFileSync(join(repo, "README.md"), "utf8")).toBe("# Demo\n");
        expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe("export const a = 2;\n");
      } finally {
        await host.close();
      }
    });
  });
});
