import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { StageRequest } from "@asp/contracts";
import type { Sandbox } from "@asp/plugin-host";
import { git } from "@asp/test-utils";
import { afterAll, describe, expect, it } from "vitest";
import { THS_TOKENS } from "../src/index.js";
import { editManifest } from "./apply-helpers.js";
import { manifest, policyFor, testHost } from "./helpers.js";

// Issue 32, the apply holes, each as a real hostile edit provider (a `fake-*` subprocess) over a
// real git repository: hole 5 (THREAT-MODEL inv. 6 and 11: an apply writes only paths of the
// judged tree whose state on disk is their precondition; `.git` at any depth is refused by the
// host itself), hole 6 (inv. 15: the requester never chooses the call-site that validates an
// apply), hole 12 (inv. 5 and 8: a recovery that cannot run is typed and recorded), and the
// audit's §3 item (no `staged_snapshot` while a provider could write directly).

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

function temp(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.push(dir);
  return dir;
}

/** A committed git repository that ignores `.env` and `dist/`, with a real `.env` and `dist/` on disk. */
function ignoredRepo(): string {
  const repo = temp("asp-apply-ignored-");
  const files: Record<string, string> = {
    ".gitignore": ".env\ndist/\n",
    "README.md": "# demo\n",
    "src/a.ts": "export const a = 1;\n",
  };
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(repo, path)), { recursive: true });
    writeFileSync(join(repo, path), text);
  }
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "base");
  // Not tracked, ignored: the judged tree does not hold them, the disk does.
  writeFileSync(join(repo, ".env"), "SECRET=the-real-one\n");
  mkdirSync(join(repo, "dist"));
  writeFileSync(join(repo, "dist", "index.js"), "built\n");
  return repo;
}

/** A staging sandbox that publishes whatever it is given (the host must not rely on it refusing). */
function permissiveStager() {
  const staged: StageRequest[] = [];
  const sandbox: Sandbox = {
    id: "fake-permissive-stager",
    version: "1.0.0",
    digest: `sha256:${"b".repeat(64)}`,
    capabilities: ["sandbox:staged_snapshot"],
    async stage(request) {
      staged.push(request);
      for (const w of request.writes) {
        const abs = join(request.root, w.path);
        if (w.content === null) rmSync(abs, { force: true });
        else {
          mkdirSync(dirname(abs), { recursive: true });
          writeFileSync(abs, w.content);
        }
      }
      return { applied: true, guarantee: "staged_snapshot" };
    },
    async recover() {
      return { outcome: "none" };
    },
  };
  return { sandbox, staged };
}

async function hostWith(edit: string[], options: { sandbox?: Sandbox; journals?: string } = {}) {
  const editor = editManifest("fake-edit-hostile", { args: edit });
  const { host } = await testHost({
    policy: policyFor([]),
    providers: [editor],
    warm: false,
    ...(options.sandbox === undefined
      ? {}
      : {
          register: (c) => {
            c.register(THS_TOKENS.Sandboxes, { useValue: { sandboxes: [options.sandbox as Sandbox] } });
            c.register(THS_TOKENS.ApplyJournalDir, { useValue: { dir: options.journals ?? temp("asp-journals-") } });
          },
        }),
  });
  return host;
}

const create = { kind: "create", arguments: {} };

describe("mediated apply writes only the judged tree (issue 32 hole 5, THREAT-MODEL inv. 6, 11)", () => {
  describe.each([
    ["the host writes itself", false],
    ["a staging sandbox publishes", true],
  ])("when %s", (_, staged) => {
    it.each([
      ["create .env", ["--plant", "create-env"]],
      ["rename README.md -> .env", ["--plant", "rename-to-env"]],
    ])(
      "issue 32 hole 5: %s over an ignored .env on disk is refused ASP_APPLY_DISK_DRIFT and nothing is written",
      async (_what, args) => {
        const stager = permissiveStager();
        const host = await hostWith(args, staged ? { sandbox: stager.sandbox } : {});
        try {
          const repo = ignoredRepo();
          const p = await host.propose({ repo, intent: create });
          // The plan is well formed against the judged tree (where .env is absent)...
          expect(p.rejection).toBeUndefined();
          const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
          // ...but the disk holds a .env: the host refuses before anything is published.
          expect(receipt).toMatchObject({
            applied: false,
            baselineAfter: null,
            rejection: { code: "ASP_APPLY_DISK_DRIFT" },
          });
          expect(readFileSync(join(repo, ".env"), "utf8")).toBe("SECRET=the-real-one\n");
          expect(readFileSync(join(repo, "README.md"), "utf8")).toBe("# demo\n");
          expect(git(repo, "status", "--porcelain")).toBe("");
          expect(stager.staged).toEqual([]);
        } finally {
          await host.close();
        }
      },
    );

    it("issue 32 hole 5: a create under an ignored folder whose file exists on disk (dist/index.js) is refused", async () => {
      const stager = permissiveStager();
      const host = await hostWith(
        ["--plant", "path", "--path", "dist/index.js"],
        staged ? { sandbox: stager.sandbox } : {},
      );
      try {
        const repo = ignoredRepo();
        const p = await host.propose({ repo, intent: create });
        const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
        expect(receipt.rejection?.code).toBe("ASP_APPLY_DISK_DRIFT");
        expect(readFileSync(join(repo, "dist", "index.js"), "utf8")).toBe("built\n");
        expect(stager.staged).toEqual([]);
      } finally {
        await host.close();
      }
    });

    // Each of these is `.git` to git or to the filesystem it may run on (case folding, NFKD
    // compatibility forms, ignorable code points HFS+ drops, NTFS trailing dots and spaces, the
    // 8.3 short name, an alternate data stream): a hook or a `core.fsmonitor` there runs on the
    // next git command in that folder.
    it.each([
      "vendor/lib/.git/hooks/post-checkout",
      "vendor/lib/.git/config",
      "vendor/.GIT/config",
      "vendor/.Git/hooks/pre-commit",
      "vendor/\uff0egit/config",
      "vendor/.g\u200cit/config",
      "vendor/.git\ufeff/config",
      "vendor/.git./config",
      "vendor/.git /config",
      "vendor/git~1/config",
      "vendor/.git::$INDEX_ALLOCATION/config",
    ])(
      "issue 32 hole 5: a plan writing %j is refused ASP_APPLY_PATH_ESCAPE by the host, whatever the sandbox",
      async (path) => {
        const stager = permissiveStager();
        const host = await hostWith(
          ["--plant", "path", "--path", path, "--content", "[core]\n\tfsmonitor = touch pwned\n"],
          staged ? { sandbox: stager.sandbox } : {},
        );
        try {
          const repo = ignoredRepo();
          const p = await host.propose({ repo, intent: create });
          expect(p.rejection?.code).toBe("ASP_APPLY_PATH_ESCAPE");
          const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
          expect(receipt).toMatchObject({ applied: false, rejection: { code: "ASP_APPLY_PATH_ESCAPE" } });
          expect(existsSync(join(repo, "vendor"))).toBe(false);
          expect(stager.staged).toEqual([]);
        } finally {
          await host.close();
        }
      },
    );
  });

  it("issue 32 hole 5: a create whose path is absent on disk too is applied, and its precondition holds", async () => {
    const host = await hostWith(["--plant", "path", "--path", "src/b.ts", "--content", "export const b = 1;\n"]);
    try {
      const repo = ignoredRepo();
      const p = await host.propose({ repo, intent: create });
      const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
      expect(receipt).toMatchObject({ applied: true, transactionGuarantee: "rollback_attempted" });
      expect(receipt.files).toEqual([expect.objectContaining({ path: "src/b.ts", before: null, outcome: "written" })]);
      expect(readFileSync(join(repo, ".env"), "utf8")).toBe("SECRET=the-real-one\n");
    } finally {
      await host.close();
    }
  });
});

describe("the call-site that validates an apply (issue 32 hole 6, THREAT-MODEL inv. 15)", () => {
  const secrets = manifest("fake-honest-secrets", { source: "secrets" });

  it.each(["interactive", "sweep"] as const)(
    "issue 32 hole 6: a requester-chosen call-site %s is refused ASP_APPLY_CALL_SITE_REFUSED and nothing is written",
    async (callSite) => {
      // The secrets check is required at the gate only: at `interactive` nothing would look.
      const { host } = await testHost({
        policy: policyFor([secrets], { callSites: ["gate"], timeoutMs: 5000 }),
        providers: [secrets, editManifest("fake-edit-honest")],
        warm: false,
      });
      try {
        const repo = ignoredRepo();
        const p = await host.propose({
          repo,
          intent: { kind: "create", arguments: { path: "src/key.ts", content: "ASP-SECRET\n" } },
        });
        await expect(host.apply({ repo, proposalId: p.proposalId, callSite })).rejects.toMatchObject({
          code: "ASP_APPLY_CALL_SITE_REFUSED",
        });
        expect(existsSync(join(repo, "src", "key.ts"))).toBe(false);
        // The trusted call-site (the gate) decides: denied, nothing written.
        const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
        expect(receipt).toMatchObject({ applied: false, rejection: { code: "ASP_APPLY_DENIED" } });
        expect(receipt.validation?.callSite).toBe("gate");
        expect(existsSync(join(repo, "src", "key.ts"))).toBe(false);
      } finally {
        await host.close();
      }
    },
  );
});

describe("the guarantee of a staged apply (issue 32 audit, host §3)", () => {
  it("H3.3 H6.7 host §3: an unconfined edit provider (directWriteRisk) caps staged_snapshot to rollback_attempted", async () => {
    const stager = permissiveStager();
    const host = await hostWith(["--plant", "path", "--path", "src/b.ts"], { sandbox: stager.sandbox });
    try {
      const repo = ignoredRepo();
      const p = await host.propose({ repo, intent: create });
      const { receipt } = await host.apply({ repo, proposalId: p.proposalId });
      expect(stager.staged).toHaveLength(1);
      expect(receipt).toMatchObject({
        applied: true,
        directWriteRisk: true,
        transactionGuarantee: "rollback_attempted",
        sandbox: { id: "fake-permissive-stager" },
      });
      expect(receipt.reason).toMatch(/direct/);
    } finally {
      await host.close();
    }
  });
});

describe("a staged-apply journal recovery cannot run (issue 32 hole 12, THREAT-MODEL inv. 5, 8)", () => {
  it("issue 32 hole 12: the gate throws ASP_APPLY_JOURNAL_DAMAGED with a next step, and the failure is recorded", async () => {
    const journals = temp("asp-journals-");
    const damaged: Sandbox = {
      id: "fake-damaged-journal",
      version: "1.0.0",
      digest: `sha256:${"c".repeat(64)}`,
      capabilities: ["sandbox:staged_snapshot"],
      async stage() {
        return { applied: false, guarantee: "none" };
      },
      async recover() {
        throw Object.assign(new Error("journal: not JSON"), { code: "ASP_STAGED_JOURNAL_INVALID" });
      },
    };
    const host = await hostWith([], { sandbox: damaged, journals });
    try {
      const repo = ignoredRepo();
      const dir = join(journals, createHash("sha256").update(realpathSync(repo)).digest("hex").slice(0, 16));
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "asp-staged-journal.json"), "{ not json \u0000");
      const failure = await host.gate({ repo }).catch((e: unknown) => e);
      expect(failure).toMatchObject({ code: "ASP_APPLY_JOURNAL_DAMAGED", category: "integrity" });
      expect((failure as Error).message).toContain(`asp edit discard-journal ${dir}`);
      const facts = await host.log.list({ index: { name: "applyJournalRepo", value: realpathSync(repo) } });
      expect(facts.map((f) => [f.kind, (f.record as { code?: string }).code])).toEqual([
        ["ths.apply-recovery-failed", "ASP_STAGED_JOURNAL_INVALID"],
      ]);
    } finally {
      await host.close();
    }
  });
});
