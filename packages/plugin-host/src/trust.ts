import type { PluginPublicKeyFile, PluginTrustFile } from "@asp/contracts";
import { PluginError } from "./errors.js";
import { checkDocument, PUBLIC_KEY_TYPE, publicKeyFrom, readJsonFile } from "./keys.js";

/** `type` of a trust file: several keys, expiries and one revocation list. */
export const TRUST_FILE_TYPE = "asp-plugin-trust";

/**
 * A trusted public key from the composing host's trusted configuration (never from a plugin or
 * the repository), with its expiry and whether a revocation list names it.
 */
export interface TrustRoot {
  readonly $$type: "@asp/TrustRoot";
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  /** ISO 8601 UTC; after it, plugins signed with this key are refused (`ASP_PLUGIN_KEY_EXPIRED`). */
  readonly expiresAt: string | null;
  /** True when a revocation list names this key (`ASP_PLUGIN_REVOKED`). */
  readonly revoked: boolean;
  /** Plugin digests revoked by the trusted configuration this root came with. */
  readonly revokedDigests: readonly string[];
  /** The file it was read from. */
  readonly source: string;
}

/** True for a {@link TrustRoot}, including one from another copy of this package. */
export function isTrustRoot(value: unknown): value is TrustRoot {
  return typeof value === "object" && value !== null && (value as { $$type?: unknown }).$$type === "@asp/TrustRoot";
}

/** A trust document, validated: a public key file or a trust file. */
export type TrustDocument =
  | { readonly kind: "public-key"; readonly document: PluginPublicKeyFile }
  | { readonly kind: "trust"; readonly document: PluginTrustFile };

/**
 * Validate one parsed trust document against its closed contracts schema (`plugin-public-key`
 * or `plugin-trust`, chosen by `type`): unknown fields, an algorithm other than `ed25519`, an
 * expiry that is not `YYYY-MM-DDTHH:MM:SS[.sss]Z`, a revocation entry without exactly one of
 * `keyId` / `digest` are all refused. This is the one validation `asp plugin verify` and the
 * host share (through {@link readTrustRoots}).
 *
 * @throws PluginError `ASP_PLUGIN_BAD_TRUST_ROOT` (with `data.errors`) when it is neither, or invalid.
 */
export function parseTrustDocument(value: unknown, source: string): TrustDocument {
  const type = (value as { type?: unknown } | null)?.type;
  const code = "ASP_PLUGIN_BAD_TRUST_ROOT";
  if (type === PUBLIC_KEY_TYPE) {
    return { kind: "public-key", document: checkDocument("plugin-public-key", value, code, source) };
  }
  if (type === TRUST_FILE_TYPE) return { kind: "trust", document: checkDocument("plugin-trust", value, code, source) };
  throw new PluginError(
    "ASP_PLUGIN_BAD_TRUST_ROOT",
    `${source} is neither a public key (type ${PUBLIC_KEY_TYPE}) nor a trust file (type ${TRUST_FILE_TYPE})`,
    { data: { file: source } },
  );
}

/**
 * Read trust roots from trusted configuration files. Each file is either a public key file
 * (`asp plugin keygen` writes `PATH.pub`; it may carry `expiresAt`) or a trust file
 * `{ "type": "asp-plugin-trust", "keys": [{ "algorithm", "publicKey", "expiresAt"? }],
 * "revoked": [{ "keyId" } | { "digest" }] }`, each validated by {@link parseTrustDocument}.
 * `revoked` applies across every file read together. A key id listed twice, in one file or
 * across files, is refused: which entry (and which expiry) would count is not for order to decide.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_TRUST_ROOT` for an unreadable, malformed or invalid file
 *   and for a key id listed twice, `ASP_PLUGIN_BAD_KEY` for a key that does not decode or whose
 *   `keyId` does not match it.
 * @example
 * ```ts
 * const trustRoots = readTrustRoots(["/etc/asp/keys/team.pub", "/etc/asp/revocations.json"]);
 * ```
 */
export function readTrustRoots(files: readonly string[]): TrustRoot[] {
  const keys: Array<{ keyId: string; publicKey: Uint8Array; expiresAt: string | null; source: string }> = [];
  const revoked = new Set<string>();
  const add = (entry: { publicKey: string; keyId?: string; expiresAt?: string }, where: string, source: string) => {
    const k = publicKeyFrom(entry, where);
    const earlier = keys.find((e) => e.keyId === k.keyId);
    if (earlier !== undefined) {
      throw new PluginError(
        "ASP_PLUGIN_BAD_TRUST_ROOT",
        `key ${k.keyId} is listed twice (${earlier.source} and ${where}): list each trusted key once`,
        { data: { keyId: k.keyId, sources: [earlier.source, source] } },
      );
    }
    const expiresAt = entry.expiresAt === undefined ? null : new Date(entry.expiresAt).toISOString();
    keys.push({ ...k, expiresAt, source });
  };
  for (const file of files) {
    const parsed = parseTrustDocument(readJsonFile(file, "ASP_PLUGIN_BAD_TRUST_ROOT"), file);
    if (parsed.kind === "public-key") {
      add(parsed.document, file, file);
      continue;
    }
    for (const [i, entry] of (parsed.document.keys ?? []).entries()) add(entry, `${file} keys[${i}]`, file);
    for (const r of parsed.document.revoked ?? []) {
      const id = r.keyId ?? r.digest;
      if (id !== undefined) revoked.add(id);
    }
  }
  const revokedDigests = [...revoked].filter((r) => r.startsWith("sha256:")).sort();
  return keys.map((k) =>
    Object.freeze({
      $$type: "@asp/TrustRoot" as const,
      keyId: k.keyId,
      publicKey: k.publicKey,
      expiresAt: k.expiresAt,
      revoked: revoked.has(k.keyId),
      revokedDigests,
      source: k.source,
    }),
  );
}
