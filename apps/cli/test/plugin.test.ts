import { cpSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Policy, validate } from "@asp/contracts";
import { composeHost, loadPolicy } from "@asp/ths";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { REPO_ROOT, runInProcess } from "./helpers.js";

const TEMPLATE = join(REPO_ROOT, "plugins/provider-example/plugin");

function workspace(): { dir: string; plugin: string } {
  const dir = mkdtempSync(join(tmpdir(), "asp-cli-plugin-"));
  const plugin = join(dir, "provider-todo");
  cpSync(TEMPLATE, plugin, { recursive: true });
  return { dir, plugin };
}

async function json(argv: string[], cwd: string): Promise<{ code: number; body: Record<string, unknown> }> {
  const r = await runInProcess(["--json", ...argv], { cwd });
  return { code: r.code, body: JSON.parse(r.stdout) as Record<string, unknown> };
}

describe("asp plugin", () => {
  describe("when an author signs and a host verifies", () => {
    it("keygen, sign, digest and verify with --json, granted by policy", async () => {
      const { dir, plugin } = workspace();
      const keygen = await json(["plugin", "keygen", "--out", "keys/team"], dir);
      expect(keygen.code).toBe(EXIT.ok);
      expect(keygen.body.keyId).toMatch(/^ed25519:[0-9a-f]{32}$/);
      expect(JSON.stringify(keygen.body)).not.toContain('secretKey"');
      expect(statSync(join(dir, "keys/team")).mode & 0o777).toBe(0o600);

      const signed = await json(["plugin", "sign", plugin, "--key", "keys/team"], dir);
      expect(signed.code).toBe(EXIT.ok);
      expect(signed.body).toMatchObject({ id: "provider-example", keyId: keygen.body.keyId });

      const digest = await json(["plugin", "digest", plugin], dir);
      expect(digest.body.digest).toBe(signed.body.digest);
      const policy = {
        apiVersion: "asp.policy/v1",
        requirements: [],
        providers: [],
        grants: [],
        plugins: [digest.body.grant],
      };
      writeFileSync(join(dir, "asp.policy.json"), JSON.stringify(policy));

      const verified = await json(
        ["plugin", "verify", plugin, "--trust", "keys/team.pub", "--policy", "asp.policy.json"],
        dir,
      );
      expect(verified.code).toBe(EXIT.ok);
      expect(verified.body).toMatchObject({
        ok: true,
        id: "provider-example",
        evidence: { identity: "verified", integrity: "verified", authorityGrant: "verified" },
      });
    });

    it("prints human output without --json and never prints the secret key", async () => {
      const { dir, plugin } = workspace();
      const keygen = await runInProcess(["plugin", "keygen", "--out", "team"], { cwd: dir });
      const secret = JSON.parse(readFileSync(join(dir, "team"), "utf8")).secretKey as string;
      expect(keygen.stdout).toContain("secret key");
      expect(keygen.stdout).not.toContain(secret);
      await runInProcess(["plugin", "sign", plugin, "--key", "team"], { cwd: dir });
      const r = await runInProcess(["plugin", "verify", plugin, "--trust", "team.pub"], { cwd: dir });
      expect(r.code).toBe(EXIT.ok);
      expect(r.stdout).toContain("OK provider-example@1.0.0");
      expect(r.stdout).toContain("not checked (no --policy)");
    });
  });

  describe("when the plugin is refused", () => {
    it("exits 1 with the refusal code after a file changed", async () => {
      const { dir, plugin } = workspace();
      await runInProcess(["plugin", "keygen", "--out", "team"], { cwd: dir });
      await runInProcess(["plugin", "sign", plugin, "--key", "team"], { cwd: dir });
      writeFileSync(join(plugin, "main.mjs"), "process.exit(0);\n");
      const r = await json(["plugin", "verify", plugin, "--trust", "team.pub"], dir);
      expect(r.code).toBe(EXIT.deny);
      expect(r.body).toMatchObject({ ok: false, code: "ASP_PLUGIN_DIGEST_MISMATCH" });
      const human = await runInProcess(["plugin", "verify", plugin, "--trust", "team.pub"], { cwd: dir });
      expect(human.stdout).toContain("REFUSED");
    });

    it("H1.3 host §1: exits 1 with ASP_PLUGIN_SYMLINK for a signed folder holding a symlink, even one that stays inside", async () => {
      const { dir, plugin } = workspace();
      symlinkSync("main.mjs", join(plugin, "alias.mjs"));
      await runInProcess(["plugin", "keygen", "--out", "team"], { cwd: dir });
      await runInProcess(["plugin", "sign", plugin, "--key", "team"], { cwd: dir });
      const r = await json(["plugin", "verify", plugin, "--trust", "team.pub"], dir);
      expect(r.code).toBe(EXIT.deny);
      expect(r.body).toMatchObject({ ok: false, code: "ASP_PLUGIN_SYMLINK" });
      const human = await runInProcess(["plugin", "verify", plugin, "--trust", "team.pub"], { cwd: dir });
      expect(human.stdout).toContain("REFUSED");
      expect(human.stdout).toContain("ASP_PLUGIN_SYMLINK");
    });

    it("exits 1 for a key the host does not trust", async () => {
      const { dir, plugin } = workspace();
      await runInProcess(["plugin", "keygen", "--out", "a"], { cwd: dir });
      await runInProcess(["plugin", "keygen", "--out", "b"], { cwd: dir });
      await runInProcess(["plugin", "sign", plugin, "--key", "a"], { cwd: dir });
      const r = await json(["plugin", "verify", plugin, "--trust", "b.pub"], dir);
      expect(r.code).toBe(EXIT.deny);
      expect(r.body.code).toBe("ASP_PLUGIN_UNTRUSTED_KEY");
    });
  });

  describe("when --policy is one the host would refuse", () => {
    it("host §2: a policy the schema accepts but the host's loadPolicy refuses (a plugin granted twice) is refused with the host's code", async () => {
      const { dir, plugin } = workspace();
      await runInProcess(["plugin", "keygen", "--out", "team"], { cwd: dir });
      await runInProcess(["plugin", "sign", plugin, "--key", "team"], { cwd: dir });
      const digest = await json(["plugin", "digest", plugin], dir);
      const grant = digest.body.grant as { id: string; digest: string; capabilities: string[] };
      const policy = {
        apiVersion: "asp.policy/v1",
        requirements: [],
        providers: [],
        grants: [],
        // Two grants for one plugin id: which digest is pinned? The host refuses to guess.
        plugins: [grant, { ...grant, digest: `sha256:${"0".repeat(64)}` }],
      };
      expect(validate("policy", policy).ok).toBe(true);
      expect(() => loadPolicy(policy as unknown as Policy)).toThrowWithCode("ASP_POLICY_DUPLICATE_ID");
      writeFileSync(join(dir, "asp.policy.json"), JSON.stringify(policy));

      const r = await json(["plugin", "verify", plugin, "--trust", "team.pub", "--policy", "asp.policy.json"], dir);
      expect(r.code).toBe(EXIT.usage);
      expect((r.body.error as { code: string }).code).toBe("ASP_POLICY_DUPLICATE_ID");
    });
  });

  describe("when the input is wrong", () => {
    it("exits 64 with `asp: CODE: message` for an unreadable trust file", async () => {
      const { dir, plugin } = workspace();
      const r = await runInProcess(["plugin", "verify", plugin, "--trust", "missing.pub"], { cwd: dir });
      expect(r.code).toBe(EXIT.usage);
      expect(r.stderr).toMatch(/^asp: ASP_PLUGIN_BAD_TRUST_ROOT: /);
    });

    it("host §2: refuses a trust file with a misspelt `revocation` list exactly as the host does", async () => {
      const { dir, plugin } = workspace();
      await runInProcess(["plugin", "keygen", "--out", "team"], { cwd: dir });
      const signed = await json(["plugin", "sign", plugin, "--key", "team"], dir);
      // The author meant to revoke the key; a dropped list would verify the plugin as OK.
      const trust = join(dir, "trust.json");
      writeFileSync(trust, JSON.stringify({ type: "asp-plugin-trust", revocation: [{ keyId: signed.body.keyId }] }));
      const r = await json(["plugin", "verify", plugin, "--trust", "team.pub", "--trust", "trust.json"], dir);
      expect(r.code).toBe(EXIT.usage);
      expect((r.body.error as { code: string }).code).toBe("ASP_PLUGIN_BAD_TRUST_ROOT");
      const policy = { apiVersion: "asp.policy/v1", requirements: [], providers: [], grants: [] } as Policy;
      await expect(
        composeHost({ store: "memory:", policy, trustRoots: [join(dir, "team.pub"), trust], plugins: [plugin] }),
      ).rejects.toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
    });

    it("keygen writes a public key file the closed plugin-public-key schema accepts", async () => {
      const { dir } = workspace();
      await runInProcess(["plugin", "keygen", "--out", "team"], { cwd: dir });
      const pub = JSON.parse(readFileSync(join(dir, "team.pub"), "utf8"));
      expect(validate("plugin-public-key", pub)).toEqual({ ok: true, value: pub });
    });

    it("exits 64 when keygen would overwrite a key", async () => {
      const { dir } = workspace();
      await runInProcess(["plugin", "keygen", "--out", "team"], { cwd: dir });
      const r = await runInProcess(["--json", "plugin", "keygen", "--out", "team"], { cwd: dir });
      expect(r.code).toBe(EXIT.usage);
      expect(JSON.parse(r.stdout).error.code).toBe("ASP_PLUGIN_IO");
    });

    it("exits 64 when sign gets no key", async () => {
      const { dir, plugin } = workspace();
      const r = await runInProcess(["plugin", "sign", plugin], { cwd: dir });
      expect(r.code).toBe(EXIT.usage);
    });
  });
});
