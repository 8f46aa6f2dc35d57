import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadPlugins, readTrustRoots, signPlugin, TRUST_FILE_TYPE, verifyPlugin } from "../src/index.js";
import { grantPolicy, makeKey, makePlugin, tempDir } from "./helpers.js";

// Trust roots and signatures decide which code runs, so they are parsed against closed
// contracts schemas: a field the host does not know is an error, never silently ignored.

function pubOf(path: string): { type: string; algorithm: string; keyId: string; publicKey: string } {
  return JSON.parse(readFileSync(path, "utf8"));
}

type Sig = { payload: Record<string, unknown> } & Record<string, unknown>;

function writeJson(value: unknown, name = "trust.json"): string {
  const file = join(tempDir("asp-trust-"), name);
  writeFileSync(file, JSON.stringify(value));
  return file;
}

/** A fresh key, and a trust file listing it once per entry (each merged into an ed25519 key entry). */
function trustFileFor(entries: Array<Record<string, unknown>>): { pub: string; trust: string } {
  const k = makeKey();
  const { publicKey } = pubOf(k.pub);
  const keys = entries.map((e) => ({ algorithm: "ed25519", publicKey, ...e }));
  return { pub: k.pub, trust: writeJson({ type: TRUST_FILE_TYPE, keys }) };
}

describe("trust documents", () => {
  describe("when a trust file is misspelt", () => {
    it("refuses a `revocation` list (typo of `revoked`) instead of dropping the revocation", async () => {
      const k = makeKey();
      const dir = makePlugin("provider");
      const signed = signPlugin(dir, k.key);
      const trust = writeJson({ type: TRUST_FILE_TYPE, revocation: [{ keyId: signed.keyId }] });
      // Before: the list was ignored and the revoked key's plugin loaded.
      expect(() => readTrustRoots([k.pub, trust])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
    });

    it("refuses an unknown field inside a key entry", () => {
      const { trust } = trustFileFor([{ expires: "2020-01-01T00:00:00Z" }]);
      expect(() => readTrustRoots([trust])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
    });

    it("refuses a revocation entry without a key id or digest, and a truncated key id", () => {
      const k = makeKey();
      const keyId = pubOf(k.pub).keyId;
      for (const revoked of [[{ reason: "lost" }], [{ keyId: keyId.slice(0, 12) }], [keyId]]) {
        const trust = writeJson({ type: TRUST_FILE_TYPE, revoked });
        expect(() => readTrustRoots([k.pub, trust]), JSON.stringify(revoked)).toThrowWithCode(
          "ASP_PLUGIN_BAD_TRUST_ROOT",
        );
      }
    });
  });

  describe("when a key appears twice in one JSON object", () => {
    it("refuses a second `revoked` that JSON.parse would let empty the first", () => {
      const k = makeKey();
      const keyId = pubOf(k.pub).keyId;
      const trust = writeJson({});
      writeFileSync(trust, `{"type":"${TRUST_FILE_TYPE}","revoked":[{"keyId":"${keyId}"}],"revoked":[]}`);
      expect(() => readTrustRoots([k.pub, trust])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
    });

    it("refuses a signature file with a key given twice", () => {
      const k = makeKey();
      const dir = makePlugin("provider");
      signPlugin(dir, k.key);
      const sigPath = join(dir, "asp-plugin.sig");
      const text = readFileSync(sigPath, "utf8");
      writeFileSync(sigPath, text.replace(/^\{/, `{"keyId":"ed25519:${"0".repeat(32)}",`));
      expect(() => verifyPlugin(dir, { trustRoots: k.roots, policy: grantPolicy([{ dir }]) })).toThrowWithCode(
        "ASP_PLUGIN_BAD_SIGNATURE",
      );
    });
  });

  describe("when a key id is listed twice", () => {
    it("refuses it in one trust file (before: the first entry won, expired or not)", () => {
      const { trust } = trustFileFor([{ expiresAt: "2099-01-01T00:00:00Z" }, { expiresAt: "2000-01-01T00:00:00Z" }]);
      expect(() => readTrustRoots([trust])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
    });

    it("refuses it across the files read together", () => {
      const { pub, trust } = trustFileFor([{ expiresAt: "2000-01-01T00:00:00Z" }]);
      expect(() => readTrustRoots([pub, trust])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
    });
  });

  describe("when the algorithm is not one the verifier implements", () => {
    it("refuses it in a public key file and in a trust file, and refuses a missing one", () => {
      const k = makeKey();
      const pub = pubOf(k.pub);
      const keyFile = writeJson({ ...pub, algorithm: "rsa-pss" }, "team.pub");
      expect(() => readTrustRoots([keyFile])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
      const trust = writeJson({ type: TRUST_FILE_TYPE, keys: [{ algorithm: "ecdsa-p256", publicKey: pub.publicKey }] });
      expect(() => readTrustRoots([trust])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
      const bare = writeJson({ type: TRUST_FILE_TYPE, keys: [{ publicKey: pub.publicKey }] });
      expect(() => readTrustRoots([bare])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
    });
  });

  describe("when an expiry is not a fixed-form UTC timestamp", () => {
    it.each([
      ["date only", "2031-01-01"],
      ["an offset", "2031-01-01T00:00:00+02:00"],
      ["a lower-case z", "2031-01-01T00:00:00z"],
      ["a locale date", "Jan 1 2031"],
    ])("refuses %s", (_what, expiresAt) => {
      const k = makeKey();
      const keyFile = writeJson({ ...pubOf(k.pub), expiresAt }, "team.pub");
      expect(() => readTrustRoots([keyFile])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
    });
  });

  describe("when revocations are well formed", () => {
    it("revokes by key id and by plugin digest, each entry an object with its reason", async () => {
      const k = makeKey();
      const dir = makePlugin("provider");
      const signed = signPlugin(dir, k.key);
      const byKey = writeJson({ type: TRUST_FILE_TYPE, revoked: [{ keyId: signed.keyId, reason: "key lost" }] });
      const byDigest = writeJson({ type: TRUST_FILE_TYPE, revoked: [{ digest: signed.digest }] });
      for (const file of [byKey, byDigest]) {
        const result = await loadPlugins({
          dirs: [dir],
          trustRoots: readTrustRoots([k.pub, file]),
          policy: grantPolicy([{ dir }]),
        });
        expect(result.refused.map((r) => r.code)).toEqual(["ASP_PLUGIN_REVOKED"]);
      }
    });
  });

  describe("asp-plugin.sig", () => {
    it.each([
      [
        "an extra top-level field (claims the verifier never checks)",
        (sig: Sig) => ({ ...sig, capabilities: ["edit"] }),
      ],
      [
        "an extra field in the signed payload",
        (sig: Sig) => ({ ...sig, payload: { ...sig.payload, kind: "sandbox" } }),
      ],
    ])("refuses %s, even though the signature still verifies", (_what, edit) => {
      const k = makeKey();
      const dir = makePlugin("provider");
      signPlugin(dir, k.key);
      const sigPath = join(dir, "asp-plugin.sig");
      writeFileSync(sigPath, JSON.stringify(edit(JSON.parse(readFileSync(sigPath, "utf8")))));
      expect(() => verifyPlugin(dir, { trustRoots: k.roots, policy: grantPolicy([{ dir }]) })).toThrowWithCode(
        "ASP_PLUGIN_BAD_SIGNATURE",
      );
    });
  });
});
