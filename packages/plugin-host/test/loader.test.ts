import "reflect-metadata";
import { execFileSync, spawnSync } from "node:child_process";
import { appendFileSync, cpSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createMemoryStore, snapshotWorktree } from "@asp/evidence";
import { ed25519 } from "@noble/curves/ed25519.js";
import { container } from "tsyringe";
import { describe, expect, it } from "vitest";
import {
  digestPlugin,
  loadPlugins,
  type PluginErrorCode,
  readSecretKey,
  readTrustRoots,
  refusedPluginKey,
  registerPlugins,
  SIGNATURE_TYPE,
  signedMessage,
  signPlugin,
  TOKENS,
  TRUST_FILE_TYPE,
  verifyPlugin,
} from "../src/index.js";
import { grantPolicy, makeKey, makePlugin, tempDir } from "./helpers.js";

const imported = (): Record<string, boolean> =>
  ((globalThis as { __aspImported?: Record<string, boolean> }).__aspImported ?? {}) as Record<string, boolean>;

async function refusedWith(
  dir: string,
  code: PluginErrorCode,
  opts: { roots?: ReturnType<typeof makeKey>["roots"]; policy?: ReturnType<typeof grantPolicy>; now?: () => Date } = {},
): Promise<void> {
  const roots = opts.roots ?? [];
  const result = await loadPlugins({
    dirs: [dir],
    trustRoots: roots,
    policy: opts.policy ?? grantPolicy([{ dir }]),
    ...(opts.now ? { now: opts.now } : {}),
  });
  expect(result.providers.length + result.verifiers.length + result.sandboxes.length).toBe(0);
  expect(result.refused.map((r) => r.code)).toEqual([code]);
}

describe("loadPlugins", () => {
  describe("when every check passes", () => {
    it("loads a provider as a trusted launch configuration that really runs", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      const signed = signPlugin(dir, key);
      const policy = grantPolicy([{ dir, capabilities: ["check"] }]);
      const result = await loadPlugins({ dirs: [dir], trustRoots: roots, policy });
      expect(result.refused).toEqual([]);
      const [p] = result.providers;
      expect(p?.manifest).toEqual({
        id: "provider-test",
        version: "1.2.3",
        digest: signed.digest,
        executable: process.execPath,
        args: [join(p?.cached ?? "", "main.mjs")],
        cwd: p?.cached,
        capabilities: ["check"],
        diagnosticSources: ["test"],
        protocolVersion: "1.0",
      });
      expect(p?.evidence).toMatchObject({
        identity: "verified",
        integrity: "verified",
        authorityGrant: "verified",
        keyId: signed.keyId,
      });
      // host §2: structured argv, absolute executable, the host's verified copy as cwd.
      const m = p?.manifest;
      const run = spawnSync(m?.executable ?? "", m?.args ?? [], { cwd: m?.cwd, encoding: "utf8" });
      expect(JSON.parse(run.stdout)).toEqual({ cwd: p?.cached, argv: [join(p?.cached ?? "", "main.mjs")] });
    });

    it("loads a verifier in-process and registers it under TOKENS.Verifier", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("verifier", { id: "verifier-happy" });
      signPlugin(dir, key);
      const result = await loadPlugins({
        dirs: [dir],
        trustRoots: roots,
        policy: grantPolicy([{ dir }]),
        pluginOptions: { "verifier-happy": { strict: true } },
      });
      expect(result.refused).toEqual([]);
      expect(result.verifiers.map((v) => v.plugin.id)).toEqual(["verifier-happy"]);
      const child = container.createChildContainer();
      registerPlugins(child, result, { clock: { now: () => new Date(0) }, content: { read: async () => null } });
      const [verifier] = child.resolveAll(TOKENS.Verifier);
      expect(verifier?.id).toBe("verifier-happy");
      expect(verifier?.digest).toBe(result.verifiers[0]?.evidence.digest);
      expect(await verifier?.verify({ kind: "review", subject: {} })).toEqual({
        kind: "review",
        verdict: "issues",
        findings: [
          {
            severity: "info",
            category: "timing",
            claim: "checked",
            evidence_refs: [],
            title: "checked at 1970-01-01T00:00:00.000Z",
          },
        ],
      });
      expect(child.resolve(TOKENS.PluginLoadResult)).toBe(result);
    });

    it("loads a sandbox in-process and registers it under TOKENS.Sandbox", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("sandbox", { id: "sandbox-happy" });
      signPlugin(dir, key);
      const result = await loadPlugins({ dirs: [dir], trustRoots: roots, policy: grantPolicy([{ dir }]) });
      expect(result.refused).toEqual([]);
      const child = container.createChildContainer();
      registerPlugins(child, result, { clock: { now: () => new Date(0) }, content: { read: async () => null } });
      const [sandbox] = child.resolveAll(TOKENS.Sandbox);
      expect(await sandbox?.stage?.({ root: "/x", writes: [] })).toEqual({
        applied: true,
        guarantee: "staged_snapshot",
      });
    });

    it("finds plugins in the subfolders of a plugins folder and records every outcome as evidence", async () => {
      const { key, roots } = makeKey();
      const parent = tempDir();
      const good = makePlugin("provider", { id: "provider-a", parent });
      const unsigned = makePlugin("provider", { id: "provider-b", parent });
      signPlugin(good, key);
      const store = await createMemoryStore();
      const result = await loadPlugins({
        dirs: [parent],
        trustRoots: roots,
        policy: grantPolicy([{ dir: good }, { dir: unsigned }]),
        factLog: store.log,
      });
      expect(result.providers.map((p) => p.manifest.id)).toEqual(["provider-a"]);
      expect(result.refused).toEqual([
        expect.objectContaining({
          id: "provider-b",
          code: "ASP_PLUGIN_UNSIGNED",
          dir: expect.stringContaining("provider-b"),
        }),
      ]);
      const facts = await store.log.list();
      expect(facts.map((f) => [f.kind, (f.record as { id: string }).id])).toEqual([
        ["plugin.loaded", "provider-a"],
        ["plugin.refused", "provider-b"],
      ]);
      await store.close();
    });
  });

  // Each tamper case is refused with its own code, and nothing from the plugin runs.
  describe("when a plugin was tampered with or is not trusted", () => {
    it("refuses an unsigned plugin", async () => {
      await refusedWith(makePlugin("provider"), "ASP_PLUGIN_UNSIGNED");
    });

    it("refuses a file changed after signing", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      const policy = grantPolicy([{ dir }]);
      signPlugin(dir, key);
      appendFileSync(join(dir, "lib", "util.mjs"), "export const evil = 1;\n");
      await refusedWith(dir, "ASP_PLUGIN_DIGEST_MISMATCH", { roots, policy });
    });

    it("refuses a file added after signing (even a dotfile)", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      const policy = grantPolicy([{ dir }]);
      signPlugin(dir, key);
      writeFileSync(join(dir, ".hidden.mjs"), "export {};\n");
      await refusedWith(dir, "ASP_PLUGIN_DIGEST_MISMATCH", { roots, policy });
    });

    it("refuses a manifest edited after signing", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      const policy = grantPolicy([{ dir }]);
      signPlugin(dir, key);
      const manifest = JSON.parse(readFileSync(join(dir, "asp-plugin.json"), "utf8"));
      manifest.capabilities = ["check", "edit"];
      writeFileSync(join(dir, "asp-plugin.json"), JSON.stringify(manifest));
      await refusedWith(dir, "ASP_PLUGIN_DIGEST_MISMATCH", { roots, policy });
    });

    it("refuses a signature from an untrusted key", async () => {
      const trusted = makeKey();
      const other = makeKey();
      const dir = makePlugin("provider");
      signPlugin(dir, other.key);
      await refusedWith(dir, "ASP_PLUGIN_UNTRUSTED_KEY", { roots: trusted.roots });
    });

    it("refuses a key that trust roots built in code list twice (a revoked entry must not lose to an unrevoked one)", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      signPlugin(dir, key);
      const [root] = roots;
      if (root === undefined) throw new Error("makeKey gave no root");
      await refusedWith(dir, "ASP_PLUGIN_UNTRUSTED_KEY", { roots: [root, { ...root, revoked: true }] });
      await refusedWith(dir, "ASP_PLUGIN_UNTRUSTED_KEY", { roots: [{ ...root, revoked: true }, root] });
    });

    it("refuses a forged signature", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      signPlugin(dir, key);
      const sigPath = join(dir, "asp-plugin.sig");
      const sig = JSON.parse(readFileSync(sigPath, "utf8"));
      const bytes = Buffer.from(sig.signature, "base64");
      bytes[0] = (bytes[0] ?? 0) ^ 1;
      sig.signature = bytes.toString("base64");
      writeFileSync(sigPath, JSON.stringify(sig));
      await refusedWith(dir, "ASP_PLUGIN_BAD_SIGNATURE", { roots });
    });

    it("refuses a revoked key", async () => {
      const k = makeKey();
      const dir = makePlugin("provider");
      const signed = signPlugin(dir, k.key);
      const revocations = join(tempDir(), "revocations.json");
      writeFileSync(
        revocations,
        JSON.stringify({ type: TRUST_FILE_TYPE, keys: [], revoked: [{ keyId: signed.keyId }] }),
      );
      await refusedWith(dir, "ASP_PLUGIN_REVOKED", { roots: readTrustRoots([k.pub, revocations]) });
    });

    it("refuses a revoked plugin digest", async () => {
      const k = makeKey();
      const dir = makePlugin("provider");
      const signed = signPlugin(dir, k.key);
      const revocations = join(tempDir(), "revocations.json");
      writeFileSync(revocations, JSON.stringify({ type: TRUST_FILE_TYPE, revoked: [{ digest: signed.digest }] }));
      await refusedWith(dir, "ASP_PLUGIN_REVOKED", { roots: readTrustRoots([k.pub, revocations]) });
    });

    it("refuses an expired key", async () => {
      const k = makeKey();
      const dir = makePlugin("provider");
      signPlugin(dir, k.key);
      const pub = JSON.parse(readFileSync(k.pub, "utf8"));
      const trust = join(tempDir(), "team.pub");
      writeFileSync(trust, JSON.stringify({ ...pub, expiresAt: "2030-01-01T00:00:00Z" }));
      const roots = readTrustRoots([trust]);
      await refusedWith(dir, "ASP_PLUGIN_KEY_EXPIRED", { roots, now: () => new Date("2030-06-01T00:00:00Z") });
      const ok = await loadPlugins({
        dirs: [dir],
        trustRoots: roots,
        policy: grantPolicy([{ dir }]),
        now: () => new Date("2029-06-01T00:00:00Z"),
      });
      expect(ok.providers).toHaveLength(1);
    });

    it("refuses a capability the grant does not cover", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider", { capabilities: ["check", "edit"] });
      signPlugin(dir, key);
      await refusedWith(dir, "ASP_PLUGIN_CAPABILITY_NOT_GRANTED", {
        roots,
        policy: grantPolicy([{ dir, capabilities: ["check"] }]),
      });
    });

    it("refuses a grant for another digest", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      signPlugin(dir, key);
      await refusedWith(dir, "ASP_PLUGIN_NOT_GRANTED", {
        roots,
        policy: grantPolicy([{ dir, digest: `sha256:${"1".repeat(64)}` }]),
      });
    });

    it("refuses a plugin policy does not grant at all", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      signPlugin(dir, key);
      await refusedWith(dir, "ASP_PLUGIN_NOT_GRANTED", { roots, policy: grantPolicy([]) });
    });

    it("refuses a symlink pointing outside the plugin folder", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      const policy = grantPolicy([{ dir }]);
      signPlugin(dir, key);
      const outside = join(tempDir(), "secret.mjs");
      writeFileSync(outside, "export {};\n");
      symlinkSync(outside, join(dir, "lib", "linked.mjs"));
      await refusedWith(dir, "ASP_PLUGIN_SYMLINK_ESCAPE", { roots, policy });
      rmSync(join(dir, "lib", "linked.mjs"));
      symlinkSync("../../elsewhere.mjs", join(dir, "lib", "relative.mjs"));
      await refusedWith(dir, "ASP_PLUGIN_SYMLINK_ESCAPE", { roots, policy });
    });

    it("H1.3 host §1: refuses a symlink even when it stays inside the folder and was signed (ASP_PLUGIN_SYMLINK)", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      symlinkSync("util.mjs", join(dir, "lib", "alias.mjs"));
      signPlugin(dir, key);
      await refusedWith(dir, "ASP_PLUGIN_SYMLINK", { roots, policy: grantPolicy([{ dir }]) });
      expect(() => verifyPlugin(dir, { trustRoots: roots })).toThrowWithCode("ASP_PLUGIN_SYMLINK");
    });

    it.each([
      ["a named pipe", (path: string) => execFileSync("mkfifo", [path])],
      [
        "a unix socket",
        // Bound and left behind (node would unlink it on close).
        (path: string) =>
          execFileSync("python3", ["-c", "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", path]),
      ],
    ])("H1.3 host §1: refuses a signed folder that holds %s (ASP_PLUGIN_SPECIAL_FILE)", async (_what, make) => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider");
      const signed = signPlugin(dir, key);
      // The digest leaves special files out, so the signature still matches: only the loader's rule refuses it.
      make(join(dir, "lib", "special"));
      expect(digestPlugin(dir).digest).toBe(signed.digest);
      await refusedWith(dir, "ASP_PLUGIN_SPECIAL_FILE", { roots, policy: grantPolicy([{ dir }]) });
    });

    it("refuses an entry path escaping the folder, even when validly signed", async () => {
      const k = makeKey();
      const dir = makePlugin("provider", { manifest: { entry: "../outside.mjs" } });
      writeFileSync(join(dir, "..", "outside.mjs"), "process.exit(0);\n");
      expect(() => signPlugin(dir, k.key)).toThrowWithCode("ASP_PLUGIN_ENTRY_ESCAPE");
      // A signer that bypasses the CLI still cannot get it loaded.
      const pair = readSecretKey(k.key);
      const payload = { id: "provider-test", version: "1.2.3", digest: digestPlugin(dir).digest };
      const signature = Buffer.from(ed25519.sign(signedMessage(payload), pair.secretKey)).toString("base64");
      writeFileSync(
        join(dir, "asp-plugin.sig"),
        JSON.stringify({ type: SIGNATURE_TYPE, payload, keyId: pair.keyId, signature }),
      );
      await refusedWith(dir, "ASP_PLUGIN_ENTRY_ESCAPE", { roots: k.roots });
    });

    it("never imports a refused in-process plugin", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("verifier", { id: "verifier-tampered" });
      const policy = grantPolicy([{ dir }]);
      signPlugin(dir, key);
      appendFileSync(join(dir, "main.mjs"), "// changed\n");
      await refusedWith(dir, "ASP_PLUGIN_DIGEST_MISMATCH", { roots, policy });
      expect(imported()["verifier-tampered"]).toBeUndefined();
    });

    it("refuses options that fail the plugin's optionsSchema", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("verifier", { id: "verifier-options" });
      signPlugin(dir, key);
      const result = await loadPlugins({
        dirs: [dir],
        trustRoots: roots,
        policy: grantPolicy([{ dir }]),
        pluginOptions: { "verifier-options": { strict: "yes" } },
      });
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_BAD_OPTIONS"]);
    });

    it("refuses an in-process entry whose export is not a declaration of its kind", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("sandbox", { id: "sandbox-wrong" });
      writeFileSync(join(dir, "main.mjs"), "export default { $$type: '@asp/VerifierPlugin' };\n");
      signPlugin(dir, key);
      const result = await loadPlugins({ dirs: [dir], trustRoots: roots, policy: grantPolicy([{ dir }]) });
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_LOAD_FAILED"]);
    });

    it("refuses a plugin whose engines.node excludes this Node", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider", { manifest: { engines: { node: ">=99" } } });
      signPlugin(dir, key);
      await refusedWith(dir, "ASP_PLUGIN_INCOMPATIBLE", { roots });
    });

    it("refuses a missing folder, and both verified folders claiming one id, in either order", async () => {
      const { key, roots } = makeKey();
      const a = makePlugin("provider", { id: "provider-dup" });
      const b = makePlugin("provider", { id: "provider-dup" });
      signPlugin(a, key);
      signPlugin(b, key);
      for (const dirs of [
        [a, b, "/nonexistent/plugins"],
        ["/nonexistent/plugins", b, a],
      ]) {
        const result = await loadPlugins({ dirs, trustRoots: roots, policy: grantPolicy([{ dir: a }]) });
        expect(result.providers).toEqual([]);
        const byKey = Object.fromEntries(result.refused.map((r) => [r.key, r.code]));
        expect(byKey).toEqual({
          "plugin:/nonexistent/plugins": "ASP_PLUGIN_NOT_FOUND",
          [`plugin:${realpathSync(a)}`]: "ASP_PLUGIN_DUPLICATE",
          [`plugin:${realpathSync(b)}`]: "ASP_PLUGIN_DUPLICATE",
        });
      }
    });

    it("never imports an in-process plugin whose id another verified folder also claims", async () => {
      const { key, roots } = makeKey();
      const a = makePlugin("verifier", { id: "verifier-dup" });
      const b = makePlugin("verifier", { id: "verifier-dup" });
      signPlugin(a, key);
      signPlugin(b, key);
      const result = await loadPlugins({ dirs: [a, b], trustRoots: roots, policy: grantPolicy([{ dir: a }]) });
      expect(result.verifiers).toEqual([]);
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_DUPLICATE", "ASP_PLUGIN_DUPLICATE"]);
      expect(imported()["verifier-dup"]).toBeUndefined();
    });
  });

  // Issue 11 item 10: the folders are untrusted bytes; no content of them makes loading throw,
  // and a refusal is keyed by its folder, never by the id the folder claims.
  describe("when the folders themselves are hostile", () => {
    it("keys a refused copy by its real folder, never by the id it claims", async () => {
      const { key, roots } = makeKey();
      const parent = tempDir();
      const good = makePlugin("provider", { id: "provider-real", parent });
      signPlugin(good, key);
      const copy = join(tempDir(), "provider-real");
      cpSync(good, copy, { recursive: true });
      appendFileSync(join(copy, "main.mjs"), "// tampered\n");
      const link = join(tempDir(), "link");
      symlinkSync(copy, link);
      const result = await loadPlugins({ dirs: [link, good], trustRoots: roots, policy: grantPolicy([{ dir: good }]) });
      expect(result.providers.map((p) => p.manifest.id)).toEqual(["provider-real"]);
      expect(result.refused).toEqual([
        {
          dir: realpathSync(copy),
          key: `plugin:${realpathSync(copy)}`,
          id: "provider-real",
          code: "ASP_PLUGIN_DIGEST_MISMATCH",
          message: expect.any(String),
        },
      ]);
    });

    it("takes each real folder once, however it is named", async () => {
      const { key, roots } = makeKey();
      const parent = tempDir();
      const good = makePlugin("provider", { id: "provider-once", parent });
      signPlugin(good, key);
      const link = join(tempDir(), "link");
      symlinkSync(good, link);
      const result = await loadPlugins({
        dirs: [good, link, parent, `${good}/`],
        trustRoots: roots,
        policy: grantPolicy([{ dir: good }]),
      });
      expect(result.providers.map((p) => p.dir)).toEqual([realpathSync(good)]);
      expect(result.refused).toEqual([]);
    });

    it("refuses a link to nowhere in a plugins folder instead of throwing", async () => {
      const { key, roots } = makeKey();
      const parent = tempDir();
      const good = makePlugin("provider", { id: "provider-ok", parent });
      signPlugin(good, key);
      symlinkSync(join(parent, "nowhere"), join(parent, "dangling"));
      symlinkSync(join(parent, "loop"), join(parent, "loop"));
      writeFileSync(join(parent, "notes.txt"), "not a plugin\n");
      const result = await loadPlugins({ dirs: [parent], trustRoots: roots, policy: grantPolicy([{ dir: good }]) });
      expect(result.providers.map((p) => p.manifest.id)).toEqual(["provider-ok"]);
      expect(result.refused.map((r) => [r.key, r.code])).toEqual([
        [`plugin:${join(realpathSync(parent), "dangling")}`, "ASP_PLUGIN_NOT_FOUND"],
        [`plugin:${join(realpathSync(parent), "loop")}`, "ASP_PLUGIN_NOT_FOUND"],
      ]);
    });

    it.each([
      ["asp-plugin.sig", "ASP_PLUGIN_IO"],
      ["asp-plugin.json", "ASP_PLUGIN_SPECIAL_FILE"],
    ])("refuses a %s that is a named pipe instead of waiting on it forever", async (file, code) => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider", { id: "provider-fifo" });
      signPlugin(dir, key);
      rmSync(join(dir, file));
      execFileSync("mkfifo", [join(dir, file)]);
      const result = await loadPlugins({
        dirs: [dir],
        trustRoots: roots,
        policy: grantPolicy([{ dir, id: "provider-fifo" }]),
      });
      expect(result.providers).toEqual([]);
      expect(result.refused.map((r) => [r.key, r.code])).toEqual([[`plugin:${realpathSync(dir)}`, code]]);
    });

    it("refuses a signature file that is a device (endless bytes) or too large", async () => {
      const { key, roots } = makeKey();
      const dir = makePlugin("provider", { id: "provider-zero" });
      signPlugin(dir, key);
      rmSync(join(dir, "asp-plugin.sig"));
      symlinkSync("/dev/zero", join(dir, "asp-plugin.sig"));
      const big = makePlugin("provider", { id: "provider-big" });
      writeFileSync(join(big, "asp-plugin.sig"), " ".repeat(2 * 1024 * 1024));
      const result = await loadPlugins({ dirs: [dir, big], trustRoots: roots, policy: grantPolicy([{ dir }]) });
      expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_IO", "ASP_PLUGIN_IO"]);
    });

    it("bounds the key of a folder with a very long path, and keeps it unique", () => {
      const long = (tail: string) => `/${"d".repeat(300)}/${tail}`;
      const a = refusedPluginKey(long("a"));
      const b = refusedPluginKey(`/x${long("a").slice(2)}`);
      for (const k of [a, b]) {
        expect([...k].length).toBeLessThanOrEqual(256);
        expect(k.startsWith("plugin:…")).toBe(true);
      }
      expect(a).not.toBe(b);
      expect(refusedPluginKey("/opt/p")).toBe("plugin:/opt/p");
    });
  });
});

describe("digestPlugin", () => {
  it("is the evidence tree digest of the folder, without the signature file", async () => {
    const { key } = makeKey();
    const dir = makePlugin("provider");
    const before = digestPlugin(dir).digest;
    signPlugin(dir, key);
    expect(digestPlugin(dir).digest).toBe(before);
    const snap = await snapshotWorktree(dir, { gitignore: false, excludes: ["/asp-plugin.sig"] });
    expect(snap.tree).toBe(before);
  });

  it("does not honour .gitignore: an ignored file still changes the digest", () => {
    const dir = makePlugin("provider");
    writeFileSync(join(dir, ".gitignore"), "extra.mjs\n");
    const before = digestPlugin(dir).digest;
    writeFileSync(join(dir, "extra.mjs"), "export {};\n");
    expect(digestPlugin(dir).digest).not.toBe(before);
  });
});

describe("verifyPlugin", () => {
  it("without a policy verifies identity and integrity and leaves the grant unverified", () => {
    const { key, roots } = makeKey();
    const dir = makePlugin("provider");
    const signed = signPlugin(dir, key);
    const v = verifyPlugin(dir, { trustRoots: roots });
    expect(v.evidence).toMatchObject({ identity: "verified", integrity: "verified", authorityGrant: "unverified" });
    expect(v.evidence.digest).toBe(signed.digest);
  });
});
