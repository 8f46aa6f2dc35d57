import { PluginError } from "./errors.js";
import { PUBLIC_KEY_TYPE, publicKeyFrom, readJsonFile } from "./keys.js";

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
  /** ISO 8601; after it, plugins signed with this key are refused (`ASP_PLUGIN_KEY_EXPIRED`). */
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

function expiryOf(value: unknown, where: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string" || Number.isNaN(Date.parse(value))) {
    throw new PluginError("ASP_PLUGIN_BAD_TRUST_ROOT", `${where}: expiresAt must be an ISO 8601 date-time`, {
      data: { where },
    });
  }
  return new Date(value).toISOString();
}

function revokedOf(value: unknown, where: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((x) => typeof x === "string" && /^(ed25519|sha256):[0-9a-f]+$/.test(x))) {
    throw new PluginError(
      "ASP_PLUGIN_BAD_TRUST_ROOT",
      `${where}: revoked must be a list of key ids (ed25519:...) and plugin digests (sha256:...)`,
      { data: { where } },
    );
  }
  return value as string[];
}

/**
 * Read trust roots from trusted configuration files. Each file is either a public key file
 * (`asp plugin keygen` writes `PATH.pub`; it may carry `expiresAt` and `revoked`) or a trust
 * file `{ "type": "asp-plugin-trust", "keys": [{ "publicKey", "expiresAt"? }], "revoked": [...] }`.
 * `revoked` lists key ids and plugin digests; it applies across every file read together.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_TRUST_ROOT` for an unreadable or malformed file,
 *   `ASP_PLUGIN_BAD_KEY` for a malformed key inside one.
 * @example
 * ```ts
 * const trustRoots = readTrustRoots(["/etc/asp/keys/team.pub", "/etc/asp/revocations.json"]);
 * ```
 */
export function readTrustRoots(files: readonly string[]): TrustRoot[] {
  const keys: Array<{ keyId: string; publicKey: Uint8Array; expiresAt: string | null; source: string }> = [];
  const revoked = new Set<string>();
  for (const file of files) {
    const v = readJsonFile(file, "ASP_PLUGIN_BAD_TRUST_ROOT");
    if (v.type === PUBLIC_KEY_TYPE) {
      const k = publicKeyFrom(v, file);
      keys.push({ ...k, expiresAt: expiryOf(v.expiresAt, file), source: file });
    } else if (v.type === TRUST_FILE_TYPE) {
      if (v.keys !== undefined && !Array.isArray(v.keys)) {
        throw new PluginError("ASP_PLUGIN_BAD_TRUST_ROOT", `${file}: keys must be an array`, { data: { file } });
      }
      for (const [i, entry] of ((v.keys as unknown[] | undefined) ?? []).entries()) {
        if (typeof entry !== "object" || entry === null) {
          throw new PluginError("ASP_PLUGIN_BAD_TRUST_ROOT", `${file}: keys[${i}] is not an object`, {
            data: { file },
          });
        }
        const e = entry as Record<string, unknown>;
        const k = publicKeyFrom(e, `${file} keys[${i}]`);
        keys.push({ ...k, expiresAt: expiryOf(e.expiresAt, `${file} keys[${i}]`), source: file });
      }
    } else {
      throw new PluginError(
        "ASP_PLUGIN_BAD_TRUST_ROOT",
        `${file} is neither a public key (type ${PUBLIC_KEY_TYPE}) nor a trust file (type ${TRUST_FILE_TYPE})`,
        { data: { file } },
      );
    }
    for (const r of revokedOf(v.revoked, file)) revoked.add(r);
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
