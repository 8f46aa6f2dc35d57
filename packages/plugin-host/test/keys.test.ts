import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  keyIdOf,
  readPublicKey,
  readSecretKey,
  readTrustRoots,
  satisfiesNodeRange,
  TRUST_FILE_TYPE,
  writeKeyPair,
} from "../src/index.js";
import { tempDir } from "./helpers.js";

describe("writeKeyPair", () => {
  it("writes the secret key with mode 0600 and PATH.pub next to it", () => {
    const path = join(tempDir(), "team");
    const { keyId, publicKeyPath } = writeKeyPair(path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(publicKeyPath).toBe(`${path}.pub`);
    expect(readSecretKey(path).keyId).toBe(keyId);
    expect(readPublicKey(`${path}.pub`).keyId).toBe(keyId);
    expect(readFileSync(`${path}.pub`, "utf8")).not.toContain("secretKey");
    expect(keyId).toBe(keyIdOf(readPublicKey(`${path}.pub`).publicKey));
  });

  it("never overwrites an existing key", () => {
    const path = join(tempDir(), "team");
    writeKeyPair(path);
    expect(() => writeKeyPair(path)).toThrowWithCode("ASP_PLUGIN_IO");
  });

  it("refuses a public key where a secret key is expected", () => {
    const path = join(tempDir(), "team");
    writeKeyPair(path);
    expect(() => readSecretKey(`${path}.pub`)).toThrowWithCode("ASP_PLUGIN_BAD_KEY");
  });
});

describe("readTrustRoots", () => {
  it("reads public key files and trust files, applying revocations across them", () => {
    const dir = tempDir();
    const a = writeKeyPair(join(dir, "a"));
    const b = writeKeyPair(join(dir, "b"));
    const pubB = JSON.parse(readFileSync(b.publicKeyPath, "utf8"));
    const trust = join(dir, "trust.json");
    writeFileSync(
      trust,
      JSON.stringify({
        type: TRUST_FILE_TYPE,
        keys: [{ algorithm: "ed25519", publicKey: pubB.publicKey, expiresAt: "2031-01-01T00:00:00Z" }],
        revoked: [{ keyId: a.keyId }, { digest: `sha256:${"2".repeat(64)}`, reason: "leaked build" }],
      }),
    );
    const roots = readTrustRoots([a.publicKeyPath, trust]);
    expect(roots.map((r) => [r.keyId, r.revoked, r.expiresAt])).toEqual([
      [a.keyId, true, null],
      [b.keyId, false, "2031-01-01T00:00:00.000Z"],
    ]);
    expect(roots[0]?.revokedDigests).toEqual([`sha256:${"2".repeat(64)}`]);
  });

  it.each([
    ["not JSON", "{"],
    ["an unknown type", JSON.stringify({ type: "x" })],
    ["keys that are not a list", JSON.stringify({ type: TRUST_FILE_TYPE, keys: "k" })],
    ["a bad revocation entry", JSON.stringify({ type: TRUST_FILE_TYPE, revoked: ["nope"] })],
    ["a bare string revocation", JSON.stringify({ type: TRUST_FILE_TYPE, revoked: [`sha256:${"2".repeat(64)}`] })],
  ])("rejects %s", (_what, text) => {
    const file = join(tempDir(), "trust.json");
    writeFileSync(file, text);
    expect(() => readTrustRoots([file])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
  });

  it("rejects an expiry that is not a date", () => {
    const a = writeKeyPair(join(tempDir(), "a"));
    const pub = JSON.parse(readFileSync(a.publicKeyPath, "utf8"));
    writeFileSync(a.publicKeyPath, JSON.stringify({ ...pub, expiresAt: "soon" }));
    expect(() => readTrustRoots([a.publicKeyPath])).toThrowWithCode("ASP_PLUGIN_BAD_TRUST_ROOT");
  });

  it("rejects a key whose keyId does not match", () => {
    const dir = tempDir();
    const a = writeKeyPair(join(dir, "a"));
    const pub = JSON.parse(readFileSync(a.publicKeyPath, "utf8"));
    writeFileSync(a.publicKeyPath, JSON.stringify({ ...pub, keyId: `ed25519:${"0".repeat(32)}` }));
    expect(() => readTrustRoots([a.publicKeyPath])).toThrowWithCode("ASP_PLUGIN_BAD_KEY");
  });
});

describe("satisfiesNodeRange", () => {
  it.each([
    ["v20.19.0", ">=20.19.0", true],
    ["v20.19.0", ">=20", true],
    ["v20.19.0", ">=22", false],
    ["v20.19.0", "^20.0.0", true],
    ["v20.19.0", "^18 || ^20", true],
    ["v20.19.0", ">=18 <20", false],
    ["v20.19.0", "20.x", true],
    ["v20.19.0", "~20.18.0", false],
    ["v20.19.0", "*", true],
    ["v20.19.0", "latest", false],
    // ^0.0.3 is >=0.0.3 <0.0.4: the hand-rolled check let 0.0.5 through.
    ["0.0.5", "^0.0.3", false],
    ["0.0.3", "^0.0.3", true],
    ["0.0.9", "^0.0.x", true],
    ["0.1.0", "^0.0.x", false],
    // A prerelease sorts before its release: the hand-rolled check dropped the tag.
    ["v20.0.0-rc.1", ">=20.0.0", false],
    ["v20.0.0-rc.1", ">=20.0.0-rc.0", true],
    ["v23.0.0-nightly20250101abcdef", ">=20", true],
    ["v20.19.0", ">=20 garbage", false],
  ])("%s satisfies %s: %s", (version, range, expected) => {
    expect(satisfiesNodeRange(version, range)).toBe(expected);
  });
});
