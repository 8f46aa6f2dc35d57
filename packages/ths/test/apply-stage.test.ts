import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { RecoverRequest, StageRequest } from "@asp/contracts";
import { createMemoryStore, type Store } from "@asp/evidence";
import type { Sandbox } from "@asp/plugin-host";
import { describe, expect, it } from "vitest";
import { writeDirect } from "../src/apply/write.js";
import { THS_TOKENS } from "../src/index.js";
import { applyRepo, editManifest, replaceIntent } from "./apply-helpers.js";
import { policyFor, testHost } from "./helpers.js";

type Behaviour = "honest" | "throws" | "refuses" | "writes-more" | "confines";

/** An in-process staging sandbox (the port a `sandbox-staged-snapshot` plugin implements), recording its calls. */
function fakeStager(behaviour: Behaviour) {
  const calls: { stage: StageRequest[]; recover: RecoverRequest[] } = { stage: [], recover: [] };
  const sandbox: Sandbox = {
    id: "fake-stager",
    version: "1.0.0",
    digest: `sha256:${"a".repeat(64)}`,
    capabilities:
      behaviour === "confines" ? ["sandbox:staged_snapshot", "sandbox:bubblewrap"] : ["sandbox:staged_snapshot"],
    async stage(request) {
      calls.stage.push(request);
      if (behaviour === "throws") throw new Error("disk full");
      if (behaviour === "refuses") return { applied: false, guarantee: "none", detail: "staging failed" };
      for (const w of request.writes) {
        mkdirSync(dirname(join(request.root, w.path)), { recursive: true });
        if (w.content !== null) writeFileSync(join(request.root, w.path), w.content);
      }
      if (behaviour === "writes-more") writeFileSync(join(request.root, "extra.txt"), "not in the plan\n");
      return { applied: true, guarantee: "staged_snapshot" };
    },
    async recover(request) {
      calls.recover.push(request);
      return { outcome: "none" };
    },
    // "confines": it also launches the edit provider and reports it cannot write the worktree
    // (what sandbox-bubblewrap reports when its namespaces are available).
    ...(behaviour === "confines"
      ? {
          async launch(request) {
            const { executable, args, cwd, env } = request;
            return { executable, args, cwd, env, mode: "isolated" as const, mechanism: "fake", directWrite: false };
          },
        }
      : {}),
  };
  return { sandbox, calls };
}

/** A host with the honest edit fixture and `sandbox` as its only sandbox, journals in `journals`. */
async function hostWith(sandbox: Sandbox, journals: string, store?: Store) {
  const { host } = await testHost({
    ...(store === undefined ? {} : { store }),
    policy: policyFor([]),
    providers: [editManifest("fake-edit-honest")],
    warm: false,
    register: (c) => {
      c.register(THS_TOKENS.Sandboxes, { useValue: { sandboxes: [sandbox] } });
      c.register(THS_TOKENS.ApplyJournalDir, { useValue: { dir: journals } });
    },
  });
  return host;
}

async function stagedHost(behaviour: Behaviour) {
  const journals = mkdtempSync(join(tmpdir(), "asp-journals-"));
  const { sandbox, calls } = fakeStager(behaviour);
  return { host: await hostWith(sandbox, journals), calls, journals };
}

const journalOf = (journals: string, repo: string) =>
  join(journals, createHash("sha256").update(realpathSync(repo)).digest("hex").slice(0, 16));

describe("publishing an apply", () => {
  describe("when a staging sandbox is granted", () => {
    it("H6.7 host §6: stages whole-file writes with the repository's journal and reports the sandbox's guarantee", async () => {
      const { host, calls, journals } = await stagedHost("confines");
      try {
        const repo = applyRepo();
        const p = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
        expect(receipt).toMatchObject({
          applied: true,
          directWriteRisk: false,
          transactionGuarantee: "staged_snapshot",
          sandbox: { id: "fake-stager", digest: `sha256:${"a".repeat(64)}` },
        });
        expect(receipt.reason).toBeUndefined();
        expect(calls.stage).toHaveLength(1);
        expect(calls.stage[0]?.journalDir).toBe(journalOf(journals, repo));
        expect(calls.stage[0]?.root).toBe(realpathSync(repo));
        expect(calls.stage[0]?.writes.map((w) => [w.path, Buffer.from(w.content ?? []).toString()])).toEqual([
          ["src/a.ts", "export const a = 2;\n"],
        ]);
        // issue 32 hole 5: the sandbox is told what the path must hold on disk (its precondition).
        expect(calls.stage[0]?.writes[0]?.before).toEqual({ digest: p.plan?.preconditions[0]?.blob, mode: "100644" });
      } finally {
        await host.close();
      }
    });

    it("H6.7 H10.4 host §6: recovers a repository whose journal folder exists before evaluating or applying it", async () => {
      const { host, calls, journals } = await stagedHost("honest");
      try {
        const repo = applyRepo();
        await host.gate({ repo });
        expect(calls.recover).toHaveLength(0);
        mkdirSync(journalOf(journals, repo), { recursive: true });
        await host.gate({ repo });
        expect(calls.recover).toEqual([{ root: realpathSync(repo), journalDir: journalOf(journals, repo) }]);
      } finally {
        await host.close();
      }
    });

    it.each(["throws", "refuses"] as const)(
      "host §6: a sandbox that %s publishes nothing and claims no guarantee",
      async (behaviour) => {
        const { host } = await stagedHost(behaviour);
        try {
          const repo = applyRepo();
          const p = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
          const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
          expect(receipt).toMatchObject({
            applied: false,
            baselineAfter: null,
            transactionGuarantee: "none",
            rejection: { code: "ASP_APPLY_WRITE_FAILED" },
          });
        } finally {
          await host.close();
        }
      },
    );

    it("H6.7 host §6: a published worktree that is not the validated after-tree claims no guarantee and says so", async () => {
      const { host } = await stagedHost("writes-more");
      try {
        const repo = applyRepo();
        const p = await host.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
        expect(receipt.applied).toBe(true);
        expect(receipt.baselineAfter).not.toBe(receipt.hypotheticalAfter);
        expect(receipt.transactionGuarantee).toBe("none");
        expect(receipt.reason).toMatch(/not the validated after-tree/);
      } finally {
        await host.close();
      }
    });
  });

  describe("when the host writes itself", () => {
    it("H6.7 H3.3 host §6: a failing write restores what was already changed (rollback_attempted)", () => {
      const root = applyRepo();
      writeFileSync(join(root, "blocker"), "a file where a folder is needed\n");
      const result = writeDirect(root, [
        { path: "README.md", content: new TextEncoder().encode("# changed\n"), mode: "100644" },
        { path: "blocker/x.ts", content: new TextEncoder().encode("x\n"), mode: "100644" },
      ]);
      expect(result.ok).toBe(false);
      expect(Object.fromEntries(result.outcomes)).toEqual({ "README.md": "restored", "blocker/x.ts": "failed" });
      expect(readFileSync(join(root, "README.md"), "utf8")).toBe("# demo\n");
    });
  });

  // The host process dies while a staging sandbox publishes (simulated: stage() never returns, the
  // first host is abandoned); a second host on the same store and journals then touches the
  // repository. The plugin's own SIGKILL proof is plugins/sandbox-staged-snapshot/test/crash.test.ts;
  // this proves the log is settled to agree with what recovery left.
  describe("when the host dies while the sandbox publishes", () => {
    it.each([
      ["after publishing everything", true, "rolled_forward"],
      ["before publishing anything", false, "rolled_back"],
    ] as const)(
      "H6.4 H6.7 host §6: %s, the next host records the receipt the worktree agrees with",
      async (_, publish, outcome) => {
        const store = await createMemoryStore();
        const journals = mkdtempSync(join(tmpdir(), "asp-journals-"));
        let staged: () => void = () => {};
        const reached = new Promise<void>((r) => {
          staged = r;
        });
        const dying: Sandbox = {
          id: "fake-stager",
          version: "1.0.0",
          digest: `sha256:${"a".repeat(64)}`,
          capabilities: ["sandbox:staged_snapshot"],
          stage(request) {
            if (publish)
              for (const w of request.writes)
                if (w.content !== null) writeFileSync(join(request.root, w.path), w.content);
            staged();
            return new Promise(() => {}); // the process is gone: this never answers
          },
          async recover() {
            return { outcome };
          },
        };
        const repo = applyRepo();
        const first = await hostWith(dying, journals, store);
        const p = await first.propose({ repo, intent: replaceIntent("src/a.ts", "a = 1", "a = 2") });
        void first.apply({ repo, proposalId: p.proposalId });
        await reached;
        const receipts = async () =>
          (await store.log.list({ index: { name: "proposalId", value: p.proposalId } })).filter(
            (e) => e.kind === "ths.apply-receipt",
          );
        expect(await receipts()).toEqual([]); // the first host never wrote its receipt

        const next = await hostWith(dying, journals, store);
        try {
          await next.gate({ repo }); // any evaluation of the repository recovers it first
          const settled = await receipts();
          expect(settled).toHaveLength(1);
          const r = settled[0]?.record as {
            applied: boolean;
            baselineAfter: string | null;
            rejection?: { code: string };
          };
          const onDisk = readFileSync(join(repo, "src", "a.ts"), "utf8");
          if (publish) {
            expect(onDisk).toBe("export const a = 2;\n");
            // host §3: the edit provider ran unconfined, so no more than rollback_attempted.
            expect(r).toMatchObject({
              applied: true,
              transactionGuarantee: "rollback_attempted",
              directWriteRisk: true,
            });
            expect(r.baselineAfter).not.toBeNull();
          } else {
            expect(onDisk).toBe("export const a = 1;\n");
            expect(r).toMatchObject({
              applied: false,
              baselineAfter: null,
              rejection: { code: "ASP_APPLY_INTERRUPTED" },
            });
          }
          // Settled once: a later evaluation adds nothing.
          await next.gate({ repo });
          expect(await receipts()).toHaveLength(1);
        } finally {
          await next.close();
          await first.close();
        }
      },
    );
  });
});
