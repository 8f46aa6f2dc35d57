import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallSite } from "@asp/contracts";
import { git } from "@asp/test-utils";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { type ComposedHost, composeHost } from "../src/index.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

// THREAT-MODEL invariant 1 / host §5: a gate decision is a function of (base tree, after tree,
// trusted policy, verified providers). Without --base the base is the trusted base: the
// after-tree of the last ALLOW at the gate call-site for the repository, else the empty tree.

const secrets = manifest("fake-honest-secrets", { source: "secrets" });
const timings = { initializeTimeoutMs: 5000, shutdownTimeoutMs: 500, restartBackoffMs: 20, restartBackoffMaxMs: 200 };

const tmp = mkdtempSync(join(tmpdir(), "asp-ths-trusted-base-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let stores = 0;
const storeDir = (): string => join(tmp, `store-${stores++}`);

/** A host over `store` (a level folder, or `memory:`) with one provider, granted by its own policy. */
function levelHost(store: string, provider = secrets): Promise<ComposedHost> {
  return composeHost({
    store,
    policy: policyFor([provider]),
    providers: [provider],
    clock: fakeClock,
    timings,
    failOpenSink: { log() {} },
  });
}

const reasons = (r: { envelope: { coverage: { degraded: Array<{ reason: string }> } } }): string[] =>
  r.envelope.coverage.degraded.map((d) => d.reason);

describe("the trusted base", () => {
  describe("when a gate denies", () => {
    it("H5.5 host §5: the same gate again, nothing changed, denies again (on a real level store)", async () => {
      const repo = tempRepo({ "a.ts": "ok\n", "creds.env": "KEY=ASP-SECRET\n" });
      const host = await levelHost(storeDir());
      try {
        expect((await host.gate({ repo })).envelope.decision).toBe("deny");
        expect((await host.gate({ repo })).envelope.decision).toBe("deny");
        // Neither a check nor a sweep moves the base.
        await host.check({ repo });
        await host.sweep({ repo });
        const third = await host.gate({ repo });
        expect(third.envelope.decision).toBe("deny");
        expect(third.envelope.findings.map((f) => f.diagnostic.range?.path)).toEqual(["creds.env"]);

        // Removing the key allows; the allow becomes the trusted base, so the next gate sees no change.
        rmSync(join(repo, "creds.env"));
        const fixed = await host.gate({ repo });
        expect(fixed.envelope.decision).toBe("allow");
        const again = await host.gate({ repo });
        expect(again.envelope.decision).toBe("allow");
        expect(again.receipt.validAsOf[0]?.validAsOf.reads).toEqual([]); // nothing changed since the allow
      } finally {
        await host.close();
      }
    });

    it("H5.5 host §5: the deny survives a new host process on the same store", async () => {
      const repo = tempRepo({ "creds.env": "KEY=ASP-SECRET\n" });
      const dir = storeDir();
      const first = await levelHost(dir);
      expect((await first.gate({ repo })).envelope.decision).toBe("deny");
      await first.close();
      const second = await levelHost(dir);
      try {
        expect((await second.gate({ repo })).envelope.decision).toBe("deny");
      } finally {
        await second.close();
      }
    });
  });

  describe("when an allow happened somewhere other than the gate", () => {
    it("H5.5 host §5: an interactive allow or a sweep allow is not a trusted base: the gate measures from the empty tree", async () => {
      const repo = tempRepo({ "a.ts": "ok\n", "b.ts": "fine\n" });
      const host = await levelHost(storeDir());
      try {
        expect((await host.check({ repo })).envelope.decision).toBe("allow");
        expect((await host.sweep({ repo })).envelope.decision).toBe("allow");
        const gate = await host.gate({ repo });
        expect(gate.envelope.decision).toBe("allow");
        // Both files were part of the change (read), as against the empty tree.
        expect(gate.receipt.validAsOf[0]?.validAsOf.reads).toHaveLength(2);
      } finally {
        await host.close();
      }
    });

    it("H5.5 host §5: one repository spelled through a symlink has one trusted base", async () => {
      const repo = tempRepo({ "a.ts": "ok\n" });
      const link = join(tmp, `link-${stores}`);
      const { symlinkSync } = await import("node:fs");
      symlinkSync(repo, link);
      const host = await levelHost(storeDir());
      try {
        expect((await host.gate({ repo })).envelope.decision).toBe("allow");
        const viaLink = await host.gate({ repo: link });
        expect(viaLink.receipt.validAsOf[0]?.validAsOf.reads).toEqual([]);
      } finally {
        await host.close();
      }
    });
  });
});

describe("property: every gate equals a fresh host given the trusted base explicitly", () => {
  type Step =
    | { readonly op: "write"; readonly file: number; readonly secret: boolean }
    | { readonly op: "remove"; readonly file: number }
    | { readonly op: "eval"; readonly callSite: CallSite };
  const step: fc.Arbitrary<Step> = fc.oneof(
    { arbitrary: fc.record({ op: fc.constant("write" as const), file: fc.nat(2), secret: fc.boolean() }), weight: 3 },
    { arbitrary: fc.record({ op: fc.constant("remove" as const), file: fc.nat(2) }), weight: 1 },
    {
      arbitrary: fc.record({
        op: fc.constant("eval" as const),
        callSite: fc.constantFrom<CallSite>("gate", "gate", "interactive", "sweep"),
      }),
      weight: 4,
    },
  );

  it("H5.5 host §5 / invariant 1: random edits, checks, gates and sweeps", async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 2, maxLength: 7 }), async (steps) => {
        const repo = tempRepo({ "keep.txt": `run ${run++}\n` });
        git(repo, "init", "-q", "-b", "main");
        let trusted = false; // has a gate allowed yet (per the fresh reference host)?
        let version = 0;
        const subject = await levelHost(storeDir());
        try {
          for (const s of steps) {
            if (s.op === "write") {
              const text = `v${version++}\n${s.secret ? "token=ASP-SECRET\n" : "clean\n"}`;
              writeFileSync(join(repo, `f${s.file}.txt`), text);
              continue;
            }
            if (s.op === "remove") {
              rmSync(join(repo, `f${s.file}.txt`), { force: true });
              continue;
            }
            const got = await subject.evaluate(s.callSite, { repo });
            if (s.callSite !== "gate") continue;
            // The reference: a fresh host (fresh store) given the trusted base as a git revision.
            const reference = await levelHost("memory:");
            let expected: string;
            try {
              expected = (await reference.gate({ repo, ...(trusted ? { base: "trusted" } : {}) })).envelope.decision;
            } finally {
              await reference.close();
            }
            expect(got.envelope.decision).toBe(expected);
            if (expected === "allow") {
              git(repo, "add", "-A");
              git(repo, "commit", "-q", "--allow-empty", "-m", "allowed");
              git(repo, "tag", "-f", "trusted");
              trusted = true;
            }
          }
        } finally {
          await subject.close();
        }
      }),
      {
        numRuns: 12,
        // The walk-around found by hand: a secret, then the same gate twice.
        examples: [
          [
            [
              { op: "write", file: 0, secret: true },
              { op: "eval", callSite: "gate" },
              { op: "eval", callSite: "gate" },
            ],
          ],
        ],
      },
    );
  }, 240_000);
});

describe("the worktree under the decision", () => {
  it("H3.3 H5.5 invariant 6: a provider that writes a changed file during the gate gets worktree-changed, never allow", async () => {
    const repo = tempRepo({ "src/a.ts": "export const a = 1;\n" });
    const writer = manifest("fake-write-worktree", {
      source: "secrets",
      args: ["--write-hex", Buffer.from(join(repo, "src/a.ts")).toString("hex")],
    });
    const host = await levelHost(storeDir(), writer);
    try {
      for (const callSite of ["gate", "interactive", "sweep"] as const) {
        const r = await host.evaluate(callSite, { repo });
        expect(r.envelope.decision).toBe("indeterminate");
        expect(reasons(r)).toContain("worktree-changed");
        // Recorded in the receipt, with both trees named.
        const entry = r.receipt.coverage.degraded.find((d) => d.reason === "worktree-changed");
        expect(entry).toMatchObject({ requirement: `req-${writer.id}`, failClass: "worktree_changed" });
        expect(entry?.detail).toContain(r.envelope.baseline);
      }
    } finally {
      await host.close();
    }
  });

  it("invariant 6: an honest provider on a still worktree is not flagged", async () => {
    const repo = tempRepo({ "src/a.ts": "export const a = 1;\n" });
    const writer = manifest("fake-write-worktree", { source: "secrets" }); // no --write-hex: honest
    const host = await levelHost(storeDir(), writer);
    try {
      const r = await host.gate({ repo });
      expect(r.envelope.decision).toBe("allow");
      expect(reasons(r)).toEqual([]);
    } finally {
      await host.close();
    }
  });
});
