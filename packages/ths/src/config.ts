import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { type ProviderManifest, validate } from "@asp/contracts";
import { ThsError } from "./errors.js";

/**
 * The trusted host configuration: where the store is, which policy and trust roots to use,
 * which plugin folders to load, and the trusted provider launch manifests. It comes from the
 * installation or environment, never from the candidate repository (host §2): `asp` finds it at
 * `--config`, `ASP_HOST_CONFIG`, `~/.config/asp/host.json` or `/etc/asp/host.json`, and
 * `assertTrustedLocations` refuses one whose file or any path it names lies inside the
 * repository being evaluated. Relative paths are resolved against the file's folder; provider
 * executables and working directories must already be absolute.
 */
export interface HostConfig {
  /** Evidence store folder (level database). */
  readonly store: string;
  /** Trusted policy file. */
  readonly policy: string;
  /** Trusted public keys (files) that plugin signatures must verify against. */
  readonly trustRoots: readonly string[];
  /** Folders holding signed plugins. */
  readonly plugins: readonly string[];
  /** Trusted provider launch manifests (absolute executable, argv array, trusted cwd). */
  readonly providers: readonly ProviderManifest[];
  /** Extra snapshot excludes in gitignore syntax. */
  readonly excludes: readonly string[];
  /**
   * Repository-relative path of the repository's own policy file, assessed as a pending
   * candidate against the trusted policy when a change edits it (host §7). Never trusted itself.
   */
  readonly candidatePolicy: string | null;
}

const KEYS = new Set([
  "$schema",
  "store",
  "policy",
  "trustRoots",
  "plugins",
  "providers",
  "excludes",
  "candidatePolicy",
  "description",
]);

function bad(path: string, pointer: string, message: string): never {
  throw new ThsError("ASP_THS_BAD_CONFIG", `${path}: ${pointer || "/"} ${message}`, { data: { path, pointer } });
}

function strings(path: string, raw: Record<string, unknown>, key: string): string[] {
  const v = raw[key];
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== "string" || s === ""))
    bad(path, `/${key}`, "must be an array of non-empty strings");
  return v as string[];
}

/**
 * Parse and validate a host configuration object; relative paths resolve against `baseDir`.
 * @throws ThsError `ASP_THS_BAD_CONFIG` (shape), `ASP_THS_BAD_MANIFEST` (a provider manifest).
 */
export function parseHostConfig(raw: unknown, baseDir: string, path = "host configuration"): HostConfig {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) bad(path, "", "must be a JSON object");
  const obj = raw as Record<string, unknown>;
  for (const k of Object.keys(obj)) if (!KEYS.has(k)) bad(path, `/${k}`, "is not an allowed property");
  for (const k of ["store", "policy"]) {
    if (typeof obj[k] !== "string" || obj[k] === "") bad(path, `/${k}`, "is required (a path)");
  }
  const at = (p: string): string => (isAbsolute(p) ? p : resolve(baseDir, p));
  const manifests = obj.providers === undefined ? [] : obj.providers;
  if (!Array.isArray(manifests)) bad(path, "/providers", "must be an array of provider manifests");
  const providers = manifests.map((m, i) => checkManifest(m, `${path}#/providers/${i}`));
  const seen = new Set<string>();
  for (const p of providers) {
    if (seen.has(p.id)) {
      throw new ThsError("ASP_THS_BAD_MANIFEST", `${path}: provider ${p.id} is configured twice`, {
        data: { id: p.id },
      });
    }
    seen.add(p.id);
  }
  return {
    store: at(obj.store as string),
    policy: at(obj.policy as string),
    trustRoots: strings(path, obj, "trustRoots").map(at),
    plugins: strings(path, obj, "plugins").map(at),
    providers,
    excludes: strings(path, obj, "excludes"),
    candidatePolicy: candidatePolicyPath(path, obj.candidatePolicy),
  };
}

function candidatePolicyPath(path: string, value: unknown): string | null {
  if (value === undefined) return null;
  // A path inside the candidate repository: relative, normalized, never escaping it.
  if (
    typeof value !== "string" ||
    value === "" ||
    isAbsolute(value) ||
    value.split("/").some((seg) => seg === "" || seg === "." || seg === "..")
  ) {
    bad(path, "/candidatePolicy", "must be a normalized path relative to the repository (e.g. asp.policy.json)");
  }
  return value as string;
}

/**
 * A trusted provider manifest, validated: schema, absolute executable and cwd, structured argv.
 * @throws ThsError `ASP_THS_BAD_MANIFEST`.
 */
export function checkManifest(value: unknown, what = "provider manifest"): ProviderManifest {
  const r = validate("provider-manifest", value);
  if (!r.ok) {
    const e = r.errors[0];
    throw new ThsError("ASP_THS_BAD_MANIFEST", `${what}: ${e?.pointer || "/"} ${e?.message ?? "is invalid"}`, {
      data: { errors: r.errors },
    });
  }
  return r.value;
}

/**
 * Read a host configuration file. This only parses: call `assertTrustedLocations(repo, { file:
 * path, ...config })` before composing a host that evaluates `repo`.
 * @throws ThsError `ASP_THS_BAD_CONFIG` when unreadable or invalid, `ASP_THS_BAD_MANIFEST`.
 */
export function loadHostConfig(path: string): HostConfig {
  const abs = resolve(path);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(abs, "utf8"));
  } catch (cause) {
    throw new ThsError("ASP_THS_BAD_CONFIG", `cannot read host configuration ${abs}: ${(cause as Error).message}`, {
      cause,
      data: { path: abs },
    });
  }
  return parseHostConfig(raw, dirname(abs), abs);
}
