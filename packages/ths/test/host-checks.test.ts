import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { changesetDigest, type Digest, snapshotGitRevision, snapshotWorktree } from "@asp/evidence";
import { git } from "@asp/test-utils";
import { afterEach, describe, expect, it } from "vitest";
import { type ComposedHost, committedTree, createHostChecks, showReceipt, trustedBaseKey } from "../src/index.js";
import { manifest, policyFor, tempRepo, testHost } from "./helpers.js";

const hosts: ComposedHost[] = [];
afterEach(async () => {
  for (const h of hosts.splice(0)) await h.close();
});

/** A committed repository and a host whose granted gate check flags lines holding ASP-SECRET. */
async function setup() {
  const repo = tempRepo({ "src/a.ts": "export const a = 1;\n", "README.md": "demo\n" });
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "base");
  const secrets = manifest("fake-honest-secrets", { id: "secrets" });
  const { host } = await testHost({ policy: policyFor([secrets]), providers: [secrets] });
  hosts.push(host);
  const checks = createHostChecks({ host, store: host.store, repo });
  const put = (text: string): Promise<Digest> => host.store.objects.putBlob(new TextEncoder().encode(text));
  return { repo, host, checks, put };
}

describe("createHostChecks (issue 14 item 10, asp.plugin.HostChecks)", () => {
  describe("when the candidate's files pass the granted checks", () => {
    it("host §6: allows over the hypothetical after-tree, writes a receipt, never moves the trusted base or the worktree", async () => {
      const { repo, host, checks, put } = await setup();
      const before = readFileSync(join(repo, "src/a.ts"), "utf8");
      const r = await checks.evaluate({ files: [{ path: "src/a.ts", digest: await put("export const a = 2;\n") }] });
      expect(r.decision).toBe("allow");
      expect(r.findings).toEqual([]);
      const stored = await showReceipt(host.log, r.receipt_id);
      expect(stored.receipt.receiptId).toBe(r.receipt_id);
      expect(readFileSync(join(repo, "src/a.ts"), "utf8")).toBe(before);
      expect(await host.log.latest(trustedBaseKey(repo))).toBeUndefined();
    });
  });

  describe("when the candidate removes files of the base", () => {
    it("the judged after-state is the candidate's whole change: a deleted file is gone from it, exactly as a commit of the change would leave it", async () => {
      const { repo, host, checks, put } = await setup();
      const files = [{ path: "src/a.ts", digest: await put("export const a = 2;\n") }];
      const kept = await checks.evaluate({ files });
      const removed = await checks.evaluate({ files, deleted: ["README.md"] });
      // A path the base does not hold is nothing to remove: the same after-state as without it.
      const absent = await checks.evaluate({ files, deleted: ["src/never.ts"] });
      // The same change made for real, committed on a side branch: its tree is the after-state.
      git(repo, "checkout", "-q", "-b", "change");
      writeFileSync(join(repo, "src/a.ts"), "export const a = 2;\n");
      git(repo, "rm", "-q", "README.md");
      git(repo, "commit", "-q", "-am", "change");
      const base = await committedTree(repo, "main", host.store);
      const { tree } = await snapshotGitRevision(repo, "change", { store: host.store });
      const receipt = async (id: string) => (await showReceipt(host.log, id)).receipt.changeset;
      expect(await receipt(removed.receipt_id)).toBe(changesetDigest(base, tree));
      expect(await receipt(kept.receipt_id)).not.toBe(changesetDigest(base, tree));
      expect(await receipt(absent.receipt_id)).toBe(await receipt(kept.receipt_id));
    });

    it.each<[string, { written?: boolean; deleted: unknown }, string]>([
      ["a path also written", { written: true, deleted: ["src/a.ts"] }, "ASP_THS_HOST_CHECKS_BAD_FILES"],
      ["a folder", { deleted: ["src"] }, "ASP_THS_HOST_CHECKS_BAD_PATH"],
      ["an escaping path", { deleted: ["../x"] }, "ASP_THS_HOST_CHECKS_BAD_PATH"],
      ["the repository's metadata", { deleted: [".git/config"] }, "ASP_THS_HOST_CHECKS_BAD_PATH"],
      ["not an array", { deleted: "README.md" }, "ASP_THS_HOST_CHECKS_BAD_FILES"],
      // One bound over both lists: 10,001 paths in all, though each list alone is under 10,000.
      [
        "paths over the bound of both lists together",
        { written: true, deleted: Array.from({ length: 10_000 }, (_, i) => `gone/${i}.txt`) },
        "ASP_THS_HOST_CHECKS_BAD_FILES",
      ],
    ])("refuses deleting %s and evaluates nothing", async (_why, o, code) => {
      const { host, checks, put } = await setup();
      const head = await host.log.head();
      const files = o.written === true ? [{ path: "src/a.ts", digest: await put("x\n") }] : [];
      await expect(checks.evaluate({ files, deleted: o.deleted } as never)).rejects.toThrowWithCode(code);
      expect(await host.log.head()).toEqual(head);
    });
  });

  describe("when a candidate file breaks a check", () => {
    it("host §1: denies with the gating finding naming the file and line, the same way every time", async () => {
      const { checks, put } = await setup();
      const files = [{ path: "src/new.ts", digest: await put("ok\nconst k = 'ASP-SECRET';\n") }];
      const first = await checks.evaluate({ files });
      const second = await checks.evaluate({ files });
      expect(first.decision).toBe("deny");
      expect(first.findings).toEqual([
        expect.objectContaining({ provider: "secrets", path: "src/new.ts", line: 2, severity: "error" }),
      ]);
      expect(second.decision).toBe(first.decision);
      expect(second.findings).toEqual(first.findings);
      expect(second.receipt_id).not.toBe(first.receipt_id);
    });

    it("evaluates the committed base, not an uncommitted worktree the candidate could have prepared", async () => {
      const { repo, checks, put } = await setup();
      // A dirty worktree is not the trusted base: a secret there is neither hidden nor added.
      writeFileSync(join(repo, "README.md"), "ASP-SECRET in the worktree only\n");
      const r = await checks.evaluate({ files: [{ path: "src/a.ts", digest: await put("export const a = 3;\n") }] });
      expect(r.decision).toBe("allow");
    });
  });

  describe("when the repository is a folder inside a larger git repository", () => {
    it("the base is the folder's committed subtree, not the enclosing repository's tree", async () => {
      const outer = tempRepo({ "ROOT-ONLY.md": "outer\n", "inner/src/a.ts": "export const a = 1;\n" });
      git(outer, "init", "-q", "-b", "main");
      git(outer, "add", "-A");
      git(outer, "commit", "-q", "-m", "base");
      const inner = join(outer, "inner");
      mkdirSync(join(inner, "src"), { recursive: true });
      const secrets = manifest("fake-honest-secrets", { id: "secrets" });
      const { host } = await testHost({ policy: policyFor([secrets]), providers: [secrets] });
      hosts.push(host);
      const checks = createHostChecks({ host, store: host.store, repo: inner });
      const r = await checks.evaluate({ files: [] });
      const { envelope } = await showReceipt(host.log, r.receipt_id);
      const clean = await snapshotWorktree(inner, { store: host.store });
      expect(envelope?.baseline).toBe(clean.tree);
    });
  });

  describe("when a verifier asks for a path outside the repository's content", () => {
    it.each([
      ["absolute", "/etc/passwd"],
      ["dot-dot", "../outside.ts"],
      ["dot-dot inside", "src/../../x"],
      [".git", ".git/hooks/pre-commit"],
      [".git nested", "vendor/.git/config"],
      [".GIT spelled", ".GIT/config"],
      [".asp", ".asp/store/x"],
      ["not normalized", "src//a.ts"],
      ["dot segment", "./src/a.ts"],
      ["backslash", "src\\a.ts"],
      ["empty", ""],
      ["below a file of the base", "src/a.ts/x"],
    ])("refuses %s with ASP_THS_HOST_CHECKS_BAD_PATH and evaluates nothing", async (_why, path) => {
      const { host, checks, put } = await setup();
      const head = await host.log.head();
      await expect(checks.evaluate({ files: [{ path, digest: await put("ASP-SECRET\n") }] })).rejects.toThrowWithCode(
        "ASP_THS_HOST_CHECKS_BAD_PATH",
      );
      expect(await host.log.head()).toEqual(head);
    });

    it.each([
      ["a blob the store does not hold", [{ path: "a.ts", digest: `sha256:${"1".repeat(64)}` }]],
      ["not a digest", [{ path: "a.ts", digest: "abc" }]],
      ["not an array", "a.ts"],
    ])("refuses %s with ASP_THS_HOST_CHECKS_BAD_FILES", async (_why, files) => {
      const { checks } = await setup();
      await expect(checks.evaluate({ files } as never)).rejects.toThrowWithCode("ASP_THS_HOST_CHECKS_BAD_FILES");
    });

    it("refuses one path named twice (which blob would be evaluated?)", async () => {
      const { checks, put } = await setup();
      const a = await put("a\n");
      const b = await put("ASP-SECRET\n");
      await expect(
        checks.evaluate({
          files: [
            { path: "x.ts", digest: a },
            { path: "x.ts", digest: b },
          ],
        }),
      ).rejects.toThrowWithCode("ASP_THS_HOST_CHECKS_BAD_FILES");
    });
  });
});
