import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { canonicalBytes, type Digest } from "@asp/evidence";
import { ed25519 } from "@noble/curves/ed25519.js";
import { digestPlugin, SIGNATURE_FILE } from "./digest.js";
import { errnoOf, PluginError } from "./errors.js";
import { checkDocument, type KeyPair, parseJsonText, readSecretKey } from "./keys.js";
import { readPluginManifest } from "./manifest.js";
import { readRegularFile } from "./read.js";

/** A signature file is a few hundred bytes; anything near this is not one. */
const MAX_SIGNATURE_BYTES = 64 * 1024;

/** What a plugin signature signs. */
export interface SignedPayload {
  readonly id: string;
  readonly version: string;
  readonly digest: Digest;
}

/** The detached signature file `asp-plugin.sig`. */
export interface SignatureFile {
  readonly type: typeof SIGNATURE_TYPE;
  readonly payload: SignedPayload;
  readonly keyId: string;
  /** base64 ed25519 signature over {@link signedMessage}(payload). */
  readonly signature: string;
}

/** `type` of the signature file; also the domain separator inside the signed bytes. */
export const SIGNATURE_TYPE = "asp-plugin-signature/v1";

/** The exact bytes signed: RFC 8785 canonical JSON of `{ type, id, version, digest }`. */
export function signedMessage(payload: SignedPayload): Uint8Array {
  return canonicalBytes({ type: SIGNATURE_TYPE, id: payload.id, version: payload.version, digest: payload.digest });
}

/** What {@link signPlugin} wrote. */
export interface SignResult extends SignedPayload {
  readonly keyId: string;
  readonly path: string;
}

/**
 * Sign a plugin folder: validate its manifest, compute its tree digest, and write the detached
 * signature `asp-plugin.sig` over `{ id, version, digest }`.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_KEY` for an unreadable secret key, `ASP_PLUGIN_NOT_FOUND` /
 *   `ASP_PLUGIN_BAD_MANIFEST` / `ASP_PLUGIN_ENTRY_ESCAPE` / `ASP_PLUGIN_SYMLINK_ESCAPE` for a
 *   folder that could never load, `ASP_PLUGIN_IO` when the signature cannot be written.
 * @example
 * ```ts
 * const { digest, keyId } = signPlugin("./plugin", "./keys/team");
 * ```
 */
export function signPlugin(dir: string, key: string | KeyPair): SignResult {
  const pair = typeof key === "string" ? readSecretKey(key) : key;
  const { dir: root, digest } = digestPlugin(dir);
  const { manifest } = readPluginManifest(root);
  const payload: SignedPayload = { id: manifest.id, version: manifest.version, digest };
  const signature = ed25519.sign(signedMessage(payload), pair.secretKey);
  const file: SignatureFile = {
    type: SIGNATURE_TYPE,
    payload,
    keyId: pair.keyId,
    signature: Buffer.from(signature).toString("base64"),
  };
  const path = join(root, SIGNATURE_FILE);
  try {
    writeFileSync(path, `${JSON.stringify(file, null, 2)}\n`);
  } catch (error) {
    throw new PluginError("ASP_PLUGIN_IO", `cannot write ${path}: ${errnoOf(error)}`, { cause: error });
  }
  return { ...payload, keyId: pair.keyId, path };
}

/**
 * Read `asp-plugin.sig` and validate it against the closed contracts `plugin-signature` schema
 * (the signature itself is checked by the loader).
 *
 * @throws PluginError `ASP_PLUGIN_UNSIGNED` when there is none, `ASP_PLUGIN_BAD_SIGNATURE` when
 *   it is not JSON, has a key twice in one object, or is not a valid `plugin-signature`
 *   (unknown fields included), `ASP_PLUGIN_IO`
 *   when it cannot be read.
 */
export function readSignatureFile(root: string): SignatureFile {
  const path = join(root, SIGNATURE_FILE);
  let text: string;
  try {
    text = readRegularFile(path, { maxBytes: MAX_SIGNATURE_BYTES }).toString("utf8");
  } catch (error) {
    if (errnoOf(error) === "ENOENT") {
      throw new PluginError(
        "ASP_PLUGIN_UNSIGNED",
        `the plugin has no ${SIGNATURE_FILE}: sign it with \`asp plugin sign\``,
        {
          data: { dir: root },
        },
      );
    }
    throw new PluginError("ASP_PLUGIN_IO", `cannot read ${path}: ${errnoOf(error)}`, { cause: error });
  }
  const value = parseJsonText(text, "ASP_PLUGIN_BAD_SIGNATURE", path);
  // Closed schema: a field the verifier does not check (an extra payload claim, a second
  // signature) is refused, never carried along as if it had been signed.
  const v = checkDocument("plugin-signature", value, "ASP_PLUGIN_BAD_SIGNATURE", path);
  return {
    type: SIGNATURE_TYPE,
    payload: { id: v.payload.id, version: v.payload.version, digest: v.payload.digest as Digest },
    keyId: v.keyId,
    signature: v.signature,
  };
}

/** True when `signature` (base64) is a valid ed25519 signature of `payload` by `publicKey`. */
export function verifySignature(payload: SignedPayload, signature: string, publicKey: Uint8Array): boolean {
  const sig = new Uint8Array(Buffer.from(signature, "base64"));
  if (sig.length !== 64) return false;
  try {
    return ed25519.verify(sig, signedMessage(payload), publicKey);
  } catch {
    return false;
  }
}
