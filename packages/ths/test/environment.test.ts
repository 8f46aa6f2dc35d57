import { mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProviderManifest } from "@asp/contracts";
import { blobDigest, listTree } from "@asp/evidence";
import { git } from "@asp/test-utils";
import { afterAll, describe, expect, it } from "vitest";
import {
  type ComposedHost,
  type ComposeHostOptions,
  composeHost,
  FreshnessAuthority,
  parseHostConfig,
} from "../src/index.js";
import { editManifest, replaceIntent } from "./apply-helpers.js";
import { fakeClock, manifest, policyFor, tempRepo } from "./helpers.js";

// host §5, §9: the dependency environment (node_modules) is snapshotted next to every baseline,
// sent in the request, served through the same callbacks, bound in validAsOf, re-checked at the
// end of the evaluation and recorded in the receipt; never part of the change.

const timings = { initializeTimeoutMs: 5000, shutdownTimeoutMs: 500, restartBackoffMs: 20, restartBackoffMaxMs: 200 };
const tmp = mkdtempSync(join(tmpdir(), "asp-ths-env-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let stores = 0;

/** A host over a real level store with these providers, each granted by its own requirement. */
function host(providers: ProviderManifest[], extra: Partial<ComposeHostOptions> = {}): Promise<ComposedHost> {
  return composeHost({
    store: join(tmp, `store-${stores++}`),
    policy: policyFor(providers.filter((p) => p.capabilities.includes("check"))),
    providers,
    clock: fakeClock,
    timings,
    failOpenSink: { log() {} },
    ...extra,
  });
}

const PKG = '{"name":"x","version":"1.0.0","types":"index.d.ts"}';

/** A project with installed dependencies; `ignored`: node_modules is in .gitignore. */
function project(ignored = true): string {
  return tempRepo({
    "package.json": '{"name":"app"}',
    "src/a.ts": 'import { x } from "x";\nexport const a = x;\n',
    ...(ignored ? { ".gitignore": "node_modules/\n" } : {}),
    "node_modules/x/package.json": PKG,
    "node_modules/x/index.d.ts": "export declare const x: number;\n",
    "packages/p/package.json": '{"name":"p"}',
    "packages/p/node_modules/y/package.json": '{"name":"y"}',
    "stray/node_modules/z/index.js": "no package.json beside this folder",
  });
}

const reasons = (r: { envelope: { coverage: { degraded: Array<{ reason: string }> } } }): string[] =>
  r.envelope.coverage.degraded.map((d) => d.reason);

const reader = manifest("fake-env-reader", { source: "ts" });

describe("the dependency environment", () => {
  describe("when the repository has installed dependencies", () => {
    it("H5.1 host §9: the request carries it, a provider reads node_modules/x/package.json through callbacks, the receipt records it", async () => {
      const repo = project();
      const h = await host([reader]);
      try {
        const r = await h.gate({ repo });
        expect(reasons(r)).toEqual([]);
        expect(r.envelope.decision).toBe("allow");
        const env = r.envelope.environment;
        // "auto": node_modules beside each package.json of the baseline, nothing else.
        expect(env?.roots).toEqual(["node_modules", "packages/p/node_modules"]);
        expect(env?.files).toBe(3);
        expect(r.receipt.environment).toBe(env?.tree);
        const bound = r.receipt.validAsOf[0]?.validAsOf;
        expect(bound?.environment).toBe(env?.tree);
        expect(bound?.reads).toEqual([blobDigest(new TextEncoder().encode(PKG))]);
      } finally {
        await h.close();
      }
    });

    it("H5.2 host §5: a read outside the baseline and the environment is still refused (stale)", async () => {
      const repo = project();
      const h = await host([manifest("fake-read-outside", { source: "ts" })]);
      try {
        const r = await h.gate({ repo });
        expect(r.envelope.environment).toBeDefined();
        expect(r.envelope.decision).not.toBe("allow");
        expect(reasons(r)).toContain("stale");
      } finally {
        await h.close();
      }
    });

    it.each([["no-env"], ["other-env"]])(
      "H5.2 H5.3 host §5: validAsOf.environment %s is stale, never allow",
      async (lie) => {
        const repo = project();
        const h = await host([manifest("fake-freshness-lie", { source: "ts", args: ["--lie", lie] })]);
        try {
          const r = await h.gate({ repo });
          expect(r.envelope.decision).not.toBe("allow");
          expect(reasons(r)).toContain("stale");
          expect(r.receipt.coverage.degraded[0]?.detail).toContain("validAsOf.environment");
        } finally {
          await h.close();
        }
      },
    );

    it("H5.2 host §5: an honest echo of the environment is fresh (the control)", async () => {
      const repo = project();
      const h = await host([manifest("fake-freshness-lie", { source: "ts", args: ["--lie", "none"] })]);
      try {
        expect((await h.gate({ repo })).envelope.decision).toBe("allow");
      } finally {
        await h.close();
      }
    });

    it("host §9 / inv. 11: a change to a COMMITTED file in node_modules changes the environment digest and the receipt, and is part of the change", async () => {
      // node_modules NOT ignored and committed: what the commit tracks is judged (issue 32 hole 2),
      // and the dependency environment the providers read moves too.
      const repo = project(false);
      git(repo, "init", "-q");
      git(repo, "add", "-A");
      git(repo, "commit", "-qm", "base");
      const h = await host([reader]);
      try {
        const changes: Array<number | null> = [];
        const first = await h.gate({
          repo,
          base: "HEAD",
          onProgress: (e) => void (e.phase === "baseline" && changes.push(e.changes)),
        });
        writeFileSync(join(repo, "node_modules/x/index.d.ts"), "export declare const x: string;\n");
        const second = await h.gate({
          repo,
          base: "HEAD",
          onProgress: (e) => void (e.phase === "baseline" && changes.push(e.changes)),
        });
        expect(changes).toEqual([0, 1]);
        expect(second.envelope.baseline).not.toBe(first.envelope.baseline);
        expect(second.envelope.environment?.tree).not.toBe(first.envelope.environment?.tree);
        expect(second.receipt.environment).toBe(second.envelope.environment?.tree);
        expect(second.receipt.environment).not.toBe(first.receipt.environment);
      } finally {
        await h.close();
      }
    });

    it("host §9: a warm re-snapshot of the environment hashes no file", async () => {
      const repo = project();
      const old = new Date(Date.now() - 60_000);
      for (const p of [
        "node_modules/x/package.json",
        "node_modules/x/index.d.ts",
        "packages/p/node_modules/y/package.json",
      ])
        utimesSync(join(repo, p), old, old);
      // Filesystem clocks are coarse: let the ctimes fall clearly before the stat cache is written.
      await new Promise((r) => setTimeout(r, 50));
      const h = await host([], { warm: false });
      try {
        const freshness = h.container.resolve(FreshnessAuthority);
        const { baseline } = await freshness.issue(repo, { wholeTree: true });
        const cold = await freshness.environment(repo, baseline);
        const warm = await freshness.environment(repo, baseline);
        expect(cold?.files).toBe(3);
        expect(warm).toMatchObject({ tree: cold?.tree, files: 3, hashed: 0 });
      } finally {
        await h.close();
      }
    });
  });

  describe("when a provider writes into node_modules during the gate", () => {
    it("H5.5 invariant 6: without a sandbox, the write is seen: worktree-changed, never allow", async () => {
      const repo = project();
      const writer = manifest("fake-write-worktree", {
        source: "ts",
        args: ["--write-hex", Buffer.from(join(repo, "node_modules/x/index.d.ts")).toString("hex")],
      });
      const h = await host([writer]);
      try {
        for (const callSite of ["gate", "sweep"] as const) {
          const r = await h.evaluate(callSite, { repo });
          expect(r.envelope.decision).toBe("indeterminate");
          expect(reasons(r)).toContain("worktree-changed");
          const entry = r.receipt.coverage.degraded.find((d) => d.reason === "worktree-changed");
          expect(entry?.detail).toContain(r.envelope.environment?.tree);
        }
      } finally {
        await h.close();
      }
    });
  });

  describe("when an edit provider proposes", () => {
    it("H5.1 host §9: edit/propose carries the environment and the plan must echo it", async () => {
      const repo = project();
      const h = await host([editManifest("fake-edit-honest")], { warm: false });
      try {
        const p = await h.propose({ repo, intent: replaceIntent("src/a.ts", "a = x", "a = x + 1") });
        expect(p.rejection).toBeUndefined();
        expect(p.plan?.validAsOf.environment).toMatch(/^sha256:/);
        const { receipt } = await h.apply({ repo, proposalId: p.proposalId });
        expect(receipt.applied).toBe(true);
      } finally {
        await h.close();
      }
    });
  });

  describe("when no environment is declared or found", () => {
    it("host §9: environment false sends none (the provider sees no environment)", async () => {
      const repo = project();
      const h = await host([reader], { environment: false });
      try {
        const r = await h.gate({ repo });
        expect(r.envelope.environment).toBeUndefined();
        expect(r.receipt.environment).toBeUndefined();
        expect(r.receipt.validAsOf[0]?.validAsOf.environment).toBeUndefined();
        expect(r.envelope.decision).not.toBe("allow"); // the reader answers error without one
      } finally {
        await h.close();
      }
    });

    it("H5.2 host §5: a provider naming an environment the request never carried is stale", async () => {
      const repo = project();
      const h = await host([manifest("fake-freshness-lie", { source: "ts", args: ["--lie", "an-env"] })], {
        environment: false,
      });
      try {
        const r = await h.gate({ repo });
        expect(r.envelope.decision).not.toBe("allow");
        expect(reasons(r)).toContain("stale");
      } finally {
        await h.close();
      }
    });

    it("host §9: a symlinked node_modules is left out (it could name any folder on the machine)", async () => {
      const outside = tempRepo({ "x/package.json": PKG });
      const repo = tempRepo({ "package.json": "{}", ".gitignore": "node_modules\n" });
      symlinkSync(outside, join(repo, "node_modules"));
      const h = await host([reader]);
      try {
        const r = await h.gate({ repo });
        expect(r.envelope.environment).toBeUndefined();
        expect(r.envelope.decision).not.toBe("allow");
      } finally {
        await h.close();
      }
    });

    it("host §9: configured roots are exactly what is snapshotted, and are out of the baseline even when not ignored", async () => {
      const repo = project(false);
      const h = await host([manifest("fake-honest-secrets", { source: "secrets" })], {
        environment: { roots: ["packages/p/node_modules"] },
      });
      try {
        const r = await h.sweep({ repo });
        expect(r.envelope.environment?.roots).toEqual(["packages/p/node_modules"]);
        const freshness = h.container.resolve(FreshnessAuthority);
        const { baseline } = await freshness.issue(repo, { wholeTree: true });
        const paths = (await listTree(h.store.objects, baseline)).map((f) => f.path);
        expect(paths.some((p) => p.startsWith("packages/p/node_modules/"))).toBe(false);
        // Not declared: an ordinary (unignored) folder of the repository.
        expect(paths).toContain("node_modules/x/package.json");
      } finally {
        await h.close();
      }
    });
  });

  describe("when the environment setting is invalid", () => {
    it.each([
      ["nested roots", { roots: ["node_modules", "node_modules/x"] }],
      ["an escaping root", { roots: ["../node_modules"] }],
      ["an absolute root", { roots: ["/usr/lib/node_modules"] }],
      ["a glob in a root", { roots: ["*/node_modules"] }],
      ["an empty root list", { roots: [] }],
      ["an unknown key", { roots: "auto", follow: true }],
      ["a string", "node_modules"],
    ])("refuses %s with ASP_THS_BAD_CONFIG (composeHost and the host configuration file)", async (_, environment) => {
      await expect(
        composeHost({
          store: "memory:",
          policy: policyFor([]),
          warm: false,
          environment: environment as NonNullable<ComposeHostOptions["environment"]>,
        }),
      ).rejects.toThrowWithCode("ASP_THS_BAD_CONFIG");
      expect(() => parseHostConfig({ store: "s", policy: "p", environment }, tmp)).toThrowWithCode(
        "ASP_THS_BAD_CONFIG",
      );
    });

    it("accepts false, auto and a list of roots, defaulting to auto", () => {
      expect(parseHostConfig({ store: "s", policy: "p" }, tmp).environment).toEqual({ roots: "auto" });
      expect(parseHostConfig({ store: "s", policy: "p", environment: false }, tmp).environment).toBe(false);
      expect(
        parseHostConfig({ store: "s", policy: "p", environment: { roots: ["b/node_modules", "node_modules"] } }, tmp)
          .environment,
      ).toEqual({ roots: ["b/node_modules", "node_modules"] });
    });
  });
});
