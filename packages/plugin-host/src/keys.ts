import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { findDuplicateKeys, type SchemaName, type SchemaTypes, validate } from "@asp/contracts";
import { ed25519 } from "@noble/curves/ed25519.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { errnoOf, PluginError } from "./errors.js";
import { readRegularFile } from "./read.js";

/** A key or trust file is a few kilobytes (a trust file with a long revocation list, a few MiB). */
const MAX_TRUST_FILE_BYTES = 8 * 1024 * 1024;

/** `type` of a secret key file (written with mode 0600). */
export const SECRET_KEY_TYPE = "asp-plugin-secret-key";
/** `type` of a public key file (`PATH.pub`). */
export const PUBLIC_KEY_TYPE = "asp-plugin-public-key";

/** An ed25519 public key with its id. */
export interface PublicKey {
  /** `ed25519:` + the first 32 hex digits of sha256(publicKey). */
  readonly keyId: string;
  readonly publicKey: Uint8Array;
}

/** An ed25519 key pair. The secret half never leaves the signer's machine and is never printed. */
export interface KeyPair extends PublicKey {
  readonly secretKey: Uint8Array;
}

/** The id of a public key: `ed25519:` + 32 hex digits of its sha256. */
export function keyIdOf(publicKey: Uint8Array): string {
  return `ed25519:${bytesToHex(sha256(publicKey)).slice(0, 32)}`;
}

const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64");

/** Decode base64 of an exact length. @throws PluginError `ASP_PLUGIN_BAD_KEY`. */
export function decodeKeyBytes(value: unknown, length: number, what: string): Uint8Array {
  if (typeof value !== "string" || !/^[A-Za-z0-9+/]+=*$/.test(value)) {
    throw new PluginError("ASP_PLUGIN_BAD_KEY", `${what} is not base64`);
  }
  const bytes = new Uint8Array(Buffer.from(value, "base64"));
  if (bytes.length !== length) {
    throw new PluginError("ASP_PLUGIN_BAD_KEY", `${what} must be ${length} bytes, got ${bytes.length}`);
  }
  return bytes;
}

/** Make a fresh ed25519 key pair. */
export function generateKeyPair(): KeyPair {
  const { secretKey, publicKey } = ed25519.keygen();
  return { keyId: keyIdOf(publicKey), publicKey, secretKey };
}

/**
 * Generate a key pair and write `path` (the secret key, mode 0600) and `path.pub`.
 * Returns the public half only.
 *
 * @throws PluginError `ASP_PLUGIN_IO` when a file cannot be written; category `input` when a key
 *   already exists at `path` (keys are never overwritten).
 * @example
 * ```ts
 * const { keyId } = writeKeyPair("./keys/team"); // ./keys/team and ./keys/team.pub
 * ```
 */
export function writeKeyPair(
  path: string,
): PublicKey & { readonly secretKeyPath: string; readonly publicKeyPath: string } {
  const pair = generateKeyPair();
  const secret = { type: SECRET_KEY_TYPE, algorithm: "ed25519", keyId: pair.keyId, secretKey: b64(pair.secretKey) };
  const pub = { type: PUBLIC_KEY_TYPE, algorithm: "ed25519", keyId: pair.keyId, publicKey: b64(pair.publicKey) };
  try {
    mkdirSync(dirname(path), { recursive: true });
    // `wx`: never overwrite an existing key; mode 0600 so only the owner can read the secret.
    writeFileSync(path, `${JSON.stringify(secret, null, 2)}\n`, { mode: 0o600, flag: "wx" });
    chmodSync(path, 0o600);
    writeFileSync(`${path}.pub`, `${JSON.stringify(pub, null, 2)}\n`, { mode: 0o644 });
  } catch (error) {
    const exists = errnoOf(error) === "EEXIST";
    throw new PluginError(
      "ASP_PLUGIN_IO",
      exists
        ? `a key already exists at ${path}: choose another path (keys are never overwritten)`
        : `cannot write the key pair at ${path}: ${errnoOf(error)}`,
      { cause: error, data: { path, errno: errnoOf(error) }, ...(exists ? { category: "input" as const } : {}) },
    );
  }
  return { keyId: pair.keyId, publicKey: pair.publicKey, secretKeyPath: path, publicKeyPath: `${path}.pub` };
}

/**
 * @internal Parse the JSON text of a trust document, refusing a key given twice in one object:
 * `JSON.parse` would keep the last silently (a second `"revoked": []` would empty the list).
 */
export function parseJsonText(
  text: string,
  code: "ASP_PLUGIN_BAD_KEY" | "ASP_PLUGIN_BAD_TRUST_ROOT" | "ASP_PLUGIN_BAD_SIGNATURE",
  where: string,
): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new PluginError(code, `${where} is not JSON`, { cause: error, data: { path: where } });
  }
  let duplicates: ReturnType<typeof findDuplicateKeys>;
  try {
    duplicates = findDuplicateKeys(text);
  } catch (error) {
    throw new PluginError(code, `${where} nests too deeply`, { cause: error, data: { path: where } });
  }
  const first = duplicates[0];
  if (first !== undefined) {
    throw new PluginError(code, `${where}: key ${JSON.stringify(first.key)} appears twice in one object`, {
      data: { path: where, pointer: first.pointer, duplicates },
    });
  }
  return value;
}

/** @internal Read a JSON object file; the code names what kind of file it was meant to be. */
export function readJsonFile(
  path: string,
  code: "ASP_PLUGIN_BAD_KEY" | "ASP_PLUGIN_BAD_TRUST_ROOT",
): Record<string, unknown> {
  let text: string;
  try {
    text = readRegularFile(path, { maxBytes: MAX_TRUST_FILE_BYTES }).toString("utf8");
  } catch (error) {
    throw new PluginError(code, `cannot read ${path}: ${errnoOf(error)}`, { cause: error, data: { path } });
  }
  const value = parseJsonText(text, code, path);
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new PluginError(code, `${path} is not a JSON object`, { data: { path } });
  }
  return value as Record<string, unknown>;
}

/**
 * Read a secret key file written by {@link writeKeyPair}.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_KEY` when the file is unreadable or not a secret key.
 */
export function readSecretKey(path: string): KeyPair {
  const v = readJsonFile(path, "ASP_PLUGIN_BAD_KEY");
  if (v.type !== SECRET_KEY_TYPE) {
    throw new PluginError("ASP_PLUGIN_BAD_KEY", `${path} is not an ASP plugin secret key (type ${SECRET_KEY_TYPE})`, {
      data: { path },
    });
  }
  const secretKey = decodeKeyBytes(v.secretKey, 32, "secretKey");
  const publicKey = ed25519.getPublicKey(secretKey);
  return { keyId: keyIdOf(publicKey), publicKey, secretKey };
}

/**
 * @internal Validate a parsed trust document against its closed contracts schema, or throw
 * `code` with every schema error in `data.errors`.
 */
export function checkDocument<N extends SchemaName>(
  name: N,
  value: unknown,
  code: "ASP_PLUGIN_BAD_KEY" | "ASP_PLUGIN_BAD_TRUST_ROOT" | "ASP_PLUGIN_BAD_SIGNATURE",
  source: string,
): SchemaTypes[N] {
  const r = validate(name, value);
  if (r.ok) return r.value;
  const first = r.errors[0];
  throw new PluginError(code, `${source} is not a valid ${name}: ${first?.pointer || "/"} ${first?.message ?? ""}`, {
    data: { file: source, errors: r.errors },
  });
}

/**
 * Read a public key file (`PATH.pub`), validated against the closed `plugin-public-key` schema.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_KEY` when the file is unreadable, not a valid public key
 *   file (unknown fields, an algorithm other than ed25519), or its `keyId` does not match the key.
 */
export function readPublicKey(path: string): PublicKey {
  const v = checkDocument("plugin-public-key", readJsonFile(path, "ASP_PLUGIN_BAD_KEY"), "ASP_PLUGIN_BAD_KEY", path);
  return publicKeyFrom(v, path);
}

/** @internal Decode a public key object (from a key file or a trust file's `keys[]`). */
export function publicKeyFrom(v: { readonly publicKey: unknown; readonly keyId?: unknown }, where: string): PublicKey {
  const publicKey = decodeKeyBytes(v.publicKey, 32, `${where}: publicKey`);
  const keyId = keyIdOf(publicKey);
  if (v.keyId !== undefined && v.keyId !== keyId) {
    throw new PluginError(
      "ASP_PLUGIN_BAD_KEY",
      `${where}: keyId ${String(v.keyId)} does not match the key (${keyId})`,
      {
        data: { where },
      },
    );
  }
  return { keyId, publicKey };
}
