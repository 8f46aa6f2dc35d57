import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import {
  type AutoModeConfig,
  type DuplicateKey,
  findDuplicateKeys,
  type ProviderManifest,
  type ServerScope,
  type ValidationError,
  validate,
} from "@asp/contracts";
import { checkEnvironmentSetting, type EnvironmentSetting } from "./environment.js";
import { ThsError } from "./errors.js";
import { checkPolicyRevision } from "./policy-file.js";

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
  /**
   * Evidence store: a folder (level database), or a `postgres://` / `postgresql://` URL of a
   * shared PostgreSQL store (kept as written; the caller opens it with `@asp/store-postgres`).
   */
  readonly store: string;
  /**
   * Trusted policy: a file, or the policy file as committed at a base revision of the repository
   * being evaluated (read through `git`, never from its working tree; see {@link BaseRevisionPolicy}).
   */
  readonly policy: string | BaseRevisionPolicy;
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
   * `null` (not set): only the trusted policy's own path is assessed (`candidatePolicyPaths`);
   * `false`: no candidate policy is assessed at all.
   */
  readonly candidatePolicy: string | false | null;
  /**
   * The dependency environment (host §9): roots snapshotted read-only next to every baseline and
   * served to providers, never part of the change. Default `{ roots: "auto" }`; `false`: none.
   */
  readonly environment: EnvironmentSetting;
  /**
   * Auto Mode rollout at deployment scope (stage flags, selection, budgets: the contracts
   * `auto-mode-config` shape), or null when the file sets none (every stage off). `asp auto run`
   * resolves it with the `OPENAI4S_*` environment through `@asp/rollout`'s `resolveConfiguration`.
   */
  readonly autoMode: AutoModeConfig | null;
  /**
   * Options of in-process plugins by plugin id (validated against each plugin's `optionsSchema`
   * when it loads); `{}` when the file sets none.
   */
  readonly pluginOptions: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /**
   * The job queue's PostgreSQL URL (`asp sweep --queue`, `asp worker`) when the store is not a
   * `postgres://` URL itself; absent when not configured.
   */
  readonly queue?: string;
  /**
   * `asp serve`: repositories a client names (never a client-chosen path), absolute, and the bearer
   * tokens it accepts, by digest; absent when not configured.
   */
  readonly server?: ServerSettings;
}

/** The `server` section of a host configuration, paths resolved. */
export interface ServerSettings {
  readonly repositories: Readonly<Record<string, string>>;
  readonly tokens: ReadonlyArray<{
    readonly id: string;
    readonly digest: string;
    readonly scopes: readonly ServerScope[];
  }>;
}

/**
 * Trusted policy read from a base revision of the repository under evaluation: `git show
 * <revision>:<path>` through `@asp/policy/node`'s git source. The base is history a reviewer already
 * accepted; the change under evaluation (its working tree, its index, its new commits) never is.
 */
export interface BaseRevisionPolicy {
  /**
   * A revision the change cannot write (threat model invariant 14): a full commit id pinned by the
   * trusted side, or `refs/remotes/<remote>/<branch>` of a protected branch the operator fetched.
   * `HEAD`-relative forms, local branches and tags are refused (`ASP_THS_POLICY_REVISION_UNTRUSTED`).
   */
  readonly git: string;
  /** Repository-relative path of the policy file in that revision. */
  readonly path: string;
}

function bad(path: string, pointer: string, message: string, errors?: readonly ValidationError[]): never {
  throw new ThsError("ASP_THS_BAD_CONFIG", `${path}: ${pointer || "/"} ${message}`, {
    data: { path, pointer, ...(errors === undefined ? {} : { errors }) },
  });
}

const PROVIDER_POINTER = /^\/providers\/(\d+)(?:\/|$)/;

/**
 * Parse and validate a host configuration object against the closed contracts `host-config`
 * schema (unknown keys refused, at any depth); relative paths resolve against `baseDir`.
 *
 * @throws ThsError `ASP_THS_BAD_CONFIG` (the file's own shape, with `data.errors`),
 *   `ASP_THS_BAD_MANIFEST` (only a provider manifest is invalid, or a provider is configured twice),
 *   `ASP_THS_POLICY_REVISION_UNTRUSTED` (a base-revision policy at a revision the change can write).
 */
export function parseHostConfig(raw: unknown, baseDir: string, path = "host configuration"): HostConfig {
  const r = validate("host-config", raw);
  if (!r.ok) {
    // Errors inside one provider manifest keep their own code, exactly as `checkManifest` raises it.
    const manifestErrors = r.errors.every((e) => PROVIDER_POINTER.test(e.pointer));
    if (manifestErrors) {
      const index = Number(PROVIDER_POINTER.exec(r.errors[0]?.pointer ?? "")?.[1]);
      checkManifest((raw as { providers: unknown[] }).providers[index], `${path}#/providers/${index}`);
    }
    const first = r.errors[0];
    bad(path, first?.pointer ?? "", first?.message ?? "is invalid", r.errors);
  }
  const obj = r.value;
  const at = (p: string): string => (isAbsolute(p) ? p : resolve(baseDir, p));
  const providers = (obj.providers ?? []).map((m, i) => checkManifest(m, `${path}#/providers/${i}`));
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
    store: /^postgres(?:ql)?:\/\//i.test(obj.store) ? obj.store : at(obj.store),
    // Threat model invariant 14: a base-revision policy names a revision the change cannot write.
    policy:
      typeof obj.policy === "string"
        ? at(obj.policy)
        : { git: checkPolicyRevision(obj.policy.git, path), path: obj.policy.path },
    trustRoots: (obj.trustRoots ?? []).map(at),
    plugins: (obj.plugins ?? []).map(at),
    providers,
    excludes: [...(obj.excludes ?? [])],
    // A path inside the candidate repository: the schema keeps it relative, normalized, never
    // escaping; `false` turns off the default (the trusted policy's own path, host §7).
    candidatePolicy: obj.candidatePolicy ?? null,
    environment: checkEnvironmentSetting(obj.environment, path),
    autoMode: obj.autoMode === undefined ? null : structuredClone(obj.autoMode),
    pluginOptions: obj.pluginOptions === undefined ? {} : structuredClone(obj.pluginOptions),
    ...(obj.queue === undefined ? {} : { queue: obj.queue }),
    ...(obj.server === undefined
      ? {}
      : {
          server: {
            repositories: Object.fromEntries(Object.entries(obj.server.repositories).map(([k, v]) => [k, at(v)])),
            tokens: obj.server.tokens.map((t) => ({ id: t.id, digest: t.digest, scopes: [...t.scopes] })),
          },
        }),
  };
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
 * @throws ThsError `ASP_THS_BAD_CONFIG` when unreadable, invalid or a key appears twice in one
 *   object, `ASP_THS_BAD_MANIFEST`.
 */
export function loadHostConfig(path: string): HostConfig {
  const abs = resolve(path);
  let raw: unknown;
  let duplicates: DuplicateKey[];
  try {
    const text = readFileSync(abs, "utf8");
    raw = JSON.parse(text);
    duplicates = findDuplicateKeys(text);
  } catch (cause) {
    throw new ThsError("ASP_THS_BAD_CONFIG", `cannot read host configuration ${abs}: ${(cause as Error).message}`, {
      cause,
      data: { path: abs },
    });
  }
  // JSON.parse keeps the last of two equal keys: a second "trustRoots" or "providers" would
  // silently replace what a reader of the file sees first.
  const first = duplicates[0];
  if (first !== undefined) bad(abs, first.pointer, `key ${JSON.stringify(first.key)} appears twice in one object`);
  return parseHostConfig(raw, dirname(abs), abs);
}
