import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { PluginCapability, PluginKind, PluginManifest, Policy, ProviderManifest } from "@asp/contracts";
import { CAPABILITY_FAMILIES, isAspError, PLUGIN_BRANDS, validate } from "@asp/contracts";
import type { FactInput, FactLog } from "@asp/evidence";
import { type ActivePolicy, isActivePolicy, type PolicyDocument } from "@asp/policy";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { cachePlugin, createTempPluginCache } from "./cache.js";
import { protocolCompatible, satisfiesNodeRange } from "./compat.js";
import { MANIFEST_FILE, type PluginSnapshot, SIGNATURE_FILE, snapshotPlugin } from "./digest.js";
import { errnoOf, PluginError, type PluginErrorCode } from "./errors.js";
import { manifestOfSnapshot, peekPluginId } from "./manifest.js";
import { checkPluginOptions } from "./options-check.js";
import { assertPluginPorts } from "./ports.js";
import { readSignatureFile, verifySignature } from "./signature.js";
import type { TrustRoot } from "./trust.js";
import type {
  CapturedInit,
  LoadedEngine,
  LoadedProvider,
  LoadedSandbox,
  LoadedVerifier,
  PluginEvidence,
  PluginLoadResult,
  RefusedPlugin,
} from "./types.js";

/**
 * Trusted policy as the loader takes it: a policy document, or the `ActivePolicy` that
 * `parsePolicy` (`@asp/policy`) returns, whose `document` is read.
 */
export type PluginPolicy = Policy | PolicyDocument | ActivePolicy;

/**
 * The policy document of `policy`: the document itself, or an `ActivePolicy`'s `document`.
 * Anything else is refused rather than read as a policy that grants nothing, so a wrong value
 * never shows up as a plugin wrongly reported ungranted.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_POLICY`.
 */
function policyDocumentOf(policy: PluginPolicy): PolicyDocument {
  if (isActivePolicy(policy)) return policy.document;
  const p = policy as Partial<Policy> | null;
  if (typeof p === "object" && p !== null && typeof p.apiVersion === "string" && Array.isArray(p.providers)) {
    return p as PolicyDocument;
  }
  throw new PluginError(
    "ASP_PLUGIN_BAD_POLICY",
    "policy must be a policy document or the ActivePolicy that parsePolicy (@asp/policy) returns",
    { data: { keys: typeof p === "object" && p !== null ? Object.keys(p).slice(0, 10) : [] } },
  );
}

/** Options of {@link verifyPlugin}. */
export interface VerifyPluginOptions {
  /** Trusted keys, from the composing host's trusted configuration only. */
  readonly trustRoots: readonly TrustRoot[];
  /**
   * Trusted policy (a document, or what `parsePolicy` returns); when absent the grant is not
   * checked (`authorityGrant: "unverified"`).
   */
  readonly policy?: PluginPolicy | null;
  readonly now?: () => Date;
}

/** A plugin whose signature, digest, trust, revocation, expiry and (when given) grant all verified. */
export interface VerifiedPlugin {
  readonly dir: string;
  readonly manifest: PluginManifest;
  /** Absolute real path of the entry, inside `dir`. */
  readonly entryPath: string;
  readonly evidence: Omit<PluginEvidence, "authorityGrant"> & { readonly authorityGrant: "verified" | "unverified" };
}

/**
 * Verify a plugin folder before anything from it runs, in this order: the detached signature
 * against the trust roots, revocation and expiry of the key, the recomputed tree digest (and
 * links that stay inside), revocation of the digest, the manifest and its entry, engine and
 * protocol compatibility, then the trusted-policy grant (id + digest + every capability).
 *
 * The folder is read once, when its digest is computed: it must hold regular files and folders
 * only (no link, fifo, socket or device), and the manifest is parsed from the bytes that were
 * hashed, never read again.
 *
 * @throws PluginError with the precise code: `ASP_PLUGIN_UNSIGNED`, `ASP_PLUGIN_BAD_SIGNATURE`,
 *   `ASP_PLUGIN_UNTRUSTED_KEY`, `ASP_PLUGIN_REVOKED`, `ASP_PLUGIN_KEY_EXPIRED`,
 *   `ASP_PLUGIN_SYMLINK_ESCAPE`, `ASP_PLUGIN_SYMLINK`, `ASP_PLUGIN_SPECIAL_FILE`, `ASP_PLUGIN_DIGEST_MISMATCH`, `ASP_PLUGIN_NOT_FOUND`,
 *   `ASP_PLUGIN_BAD_MANIFEST`, `ASP_PLUGIN_ENTRY_ESCAPE`, `ASP_PLUGIN_INCOMPATIBLE`,
 *   `ASP_PLUGIN_NOT_GRANTED`, `ASP_PLUGIN_CAPABILITY_NOT_GRANTED`; `ASP_PLUGIN_BAD_POLICY` when
 *   `policy` is neither a policy document nor an `ActivePolicy`.
 * @example
 * ```ts
 * const verified = verifyPlugin("./plugins/provider-todo", { trustRoots: readTrustRoots(["/etc/asp/team.pub"]), policy });
 * ```
 */
export function verifyPlugin(dir: string, options: VerifyPluginOptions): VerifiedPlugin {
  const policy = options.policy === undefined || options.policy === null ? null : policyDocumentOf(options.policy);
  return verifyFolder(dir, { ...options, policy }).verified;
}

/** A verified plugin with the bytes it was verified from, for the loader to cache and run. */
interface VerifiedFolder {
  readonly verified: VerifiedPlugin;
  readonly snapshot: PluginSnapshot;
  /** The manifest's entry, `/`-separated, inside the plugin. */
  readonly entry: string;
}

/** {@link verifyPlugin}, keeping the snapshot every check after the signature was made on. */
function verifyFolder(dir: string, options: VerifyPluginOptions): VerifiedFolder {
  const now = (options.now ?? (() => new Date()))();
  const abs = resolve(dir);
  if (!existsSync(abs) || !statSync(abs).isDirectory()) {
    throw new PluginError("ASP_PLUGIN_NOT_FOUND", `no plugin folder at ${dir}`, { data: { dir } });
  }
  // 1. Identity: a signature by a trusted key.
  const sig = readSignatureFile(abs);
  const roots = options.trustRoots.filter((r) => r.keyId === sig.keyId);
  if (roots.length > 1) {
    // readTrustRoots refuses this; trust roots built in code must not make the first entry win
    // (a revoked entry and an unrevoked one for one key).
    throw new PluginError(
      "ASP_PLUGIN_UNTRUSTED_KEY",
      `signed by ${sig.keyId}, which the trust roots list ${roots.length} times: ambiguous, not trusted`,
      { data: { keyId: sig.keyId, entries: roots.length } },
    );
  }
  const root = roots[0];
  if (root === undefined) {
    throw new PluginError("ASP_PLUGIN_UNTRUSTED_KEY", `signed by ${sig.keyId}, which is not a trusted key`, {
      data: { keyId: sig.keyId },
    });
  }
  if (!verifySignature(sig.payload, sig.signature, root.publicKey)) {
    throw new PluginError("ASP_PLUGIN_BAD_SIGNATURE", `the signature by ${sig.keyId} does not verify`, {
      data: { keyId: sig.keyId },
    });
  }
  if (root.revoked) {
    throw new PluginError("ASP_PLUGIN_REVOKED", `key ${root.keyId} is revoked (${root.source})`, {
      data: { keyId: root.keyId },
    });
  }
  if (root.expiresAt !== null && now.getTime() >= Date.parse(root.expiresAt)) {
    throw new PluginError("ASP_PLUGIN_KEY_EXPIRED", `key ${root.keyId} expired at ${root.expiresAt}`, {
      data: { keyId: root.keyId, expiresAt: root.expiresAt },
    });
  }
  // 2. Integrity: the folder is exactly what was signed. It is read once: the manifest below, the
  // cache copy and so everything that runs come from these bytes, never from the folder again.
  const computed = snapshotPlugin(abs);
  if (computed.digest !== sig.payload.digest) {
    throw new PluginError(
      "ASP_PLUGIN_DIGEST_MISMATCH",
      `the folder's digest ${computed.digest} is not the signed ${sig.payload.digest}: a file changed, was added or removed after signing`,
      { data: { signed: sig.payload.digest, actual: computed.digest } },
    );
  }
  if (options.trustRoots.some((r) => r.revokedDigests.includes(computed.digest))) {
    throw new PluginError("ASP_PLUGIN_REVOKED", `plugin digest ${computed.digest} is revoked`, {
      data: { digest: computed.digest },
    });
  }
  // 3. The signed manifest, parsed from the hashed bytes.
  const { manifest, entry } = manifestOfSnapshot(computed);
  if (manifest.id !== sig.payload.id || manifest.version !== sig.payload.version) {
    throw new PluginError(
      "ASP_PLUGIN_BAD_MANIFEST",
      `the manifest says ${manifest.id}@${manifest.version} but the signature covers ${sig.payload.id}@${sig.payload.version}`,
    );
  }
  // The engine capability names its kind: an engine declares it alone, and nothing else declares it,
  // so a grant of `engine` is exactly a grant to run an agent Engine.
  const engineCaps = manifest.capabilities.filter((c) => c === "engine").length;
  if ((manifest.kind === "engine") !== engineCaps > 0 || (engineCaps > 0 && manifest.capabilities.length !== 1)) {
    throw new PluginError(
      "ASP_PLUGIN_BAD_MANIFEST",
      manifest.kind === "engine"
        ? `${manifest.id} is an engine: its manifest must declare exactly the capabilities ["engine"]`
        : `${manifest.id} is a ${manifest.kind}: only an engine may declare the capability engine`,
      { data: { id: manifest.id, kind: manifest.kind, capabilities: manifest.capabilities } },
    );
  }
  if (!satisfiesNodeRange(process.version, manifest.engines.node)) {
    throw new PluginError(
      "ASP_PLUGIN_INCOMPATIBLE",
      `engines.node ${JSON.stringify(manifest.engines.node)} excludes this Node ${process.version}`,
      { data: { engines: manifest.engines.node } },
    );
  }
  if (manifest.kind === "provider" && !protocolCompatible(manifest.protocolVersion)) {
    throw new PluginError("ASP_PLUGIN_INCOMPATIBLE", `protocol ${manifest.protocolVersion} is not compatible`, {
      data: { protocolVersion: manifest.protocolVersion },
    });
  }
  // 4. Authority: trusted policy grants this id, this digest, every capability.
  let authorityGrant: "verified" | "unverified" = "unverified";
  if (options.policy !== undefined && options.policy !== null) {
    const grants = (policyDocumentOf(options.policy).plugins ?? []).filter((g) => g.id === manifest.id);
    const grant = grants.find((g) => g.digest === computed.digest);
    if (grant === undefined) {
      throw new PluginError(
        "ASP_PLUGIN_NOT_GRANTED",
        grants.length === 0
          ? `trusted policy grants no plugin ${manifest.id}`
          : `trusted policy grants ${manifest.id} only for digest ${grants.map((g) => g.digest).join(", ")}, not ${computed.digest}`,
        { data: { id: manifest.id, digest: computed.digest } },
      );
    }
    const missing = manifest.capabilities.filter((c) => !grant.capabilities.includes(c));
    if (missing.length > 0) {
      throw new PluginError(
        "ASP_PLUGIN_CAPABILITY_NOT_GRANTED",
        `trusted policy does not grant ${manifest.id} the capabilities ${missing.join(", ")}`,
        { data: { id: manifest.id, missing } },
      );
    }
    authorityGrant = "verified";
  }
  const verified: VerifiedPlugin = {
    dir: computed.dir,
    manifest,
    entryPath: join(computed.dir, ...entry.split("/")),
    evidence: {
      identity: "verified",
      integrity: "verified",
      authorityGrant,
      keyId: root.keyId,
      trustSource: root.source,
      digest: computed.digest,
      signature: sig.signature,
      capabilities: manifest.capabilities,
      verifiedAt: now.toISOString(),
    },
  };
  return { verified, snapshot: computed, entry };
}

/** Options of {@link loadPlugins}. */
export interface LoadPluginsOptions {
  /** Plugin folders, or folders whose direct subfolders are plugins. */
  readonly dirs: readonly string[];
  /** Trusted keys (see `readTrustRoots`), never from a plugin or the repository. */
  readonly trustRoots: readonly TrustRoot[];
  /**
   * Trusted policy: its `plugins[]` grants decide what loads. A policy document, or the
   * `ActivePolicy` that `parsePolicy` (`@asp/policy`) returns.
   */
  readonly policy: PluginPolicy;
  readonly now?: () => Date;
  /** Options for in-process plugins by id, from trusted configuration; validated against each `optionsSchema`. */
  readonly pluginOptions?: Readonly<Record<string, unknown>>;
  /** When given, one fact per plugin (`plugin.loaded` / `plugin.refused`) is appended in one batch. */
  readonly factLog?: FactLog;
  /**
   * The host-owned plugin cache: every verified plugin is copied to `<cacheDir>/<digest>/` and
   * runs only from there (see `cachePlugin`). Only the host may write it; a host puts it beside
   * its store (`<store>.plugins`). Default: a fresh private folder under the system temp folder
   * ({@link PluginLoadResult.cacheDir}), which the caller then owns.
   */
  readonly cacheDir?: string;
  /**
   * The kinds the host will use (default: all). A verified verifier, sandbox or engine of a kind
   * not listed is never imported: its code does not enter a host that does not use it.
   */
  readonly kinds?: readonly PluginKind[];
  /**
   * Where verifier plugins will run (default `in_process`). With `subprocess`, a verified
   * verifier's entry is never imported into this process: it is loaded as a launch description
   * (`LoadedVerifier.isolation: "subprocess"`) for `launchVerifier`, which imports it in a
   * sandboxed child, checks its declaration there and validates its options (ADR 0011).
   */
  readonly verifierIsolation?: "in_process" | "subprocess";
}

/**
 * The key a refused plugin folder is reported under: `plugin:<dir>`, or, when that is longer
 * than a provider id may be (256), `plugin:…<the path's tail>#<12 hex digits of its sha256>`, so
 * two folders never share a key. It is never the id the folder's manifest claims.
 *
 * @example
 * ```ts
 * refusedPluginKey("/opt/asp/plugins/secrets-copy"); // "plugin:/opt/asp/plugins/secrets-copy"
 * ```
 */
export function refusedPluginKey(dir: string): string {
  const key = `plugin:${dir}`;
  const chars = [...key];
  if (chars.length <= 256) return key;
  const hash = bytesToHex(sha256(new TextEncoder().encode(dir))).slice(0, 12);
  return `plugin:…${chars.slice(-(256 - 8 - 13)).join("")}#${hash}`;
}

const refusal = (dir: string, id: string | null, code: PluginErrorCode, message: string): RefusedPlugin => ({
  dir,
  key: refusedPluginKey(dir),
  id,
  code,
  message,
});

/** A thrown value's message, whatever was thrown (a plugin's own code may throw anything). */
function messageOf(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return "an unprintable error";
  }
}

/** The real path of `path`, or null when it does not resolve (missing, a link to nowhere, a loop). */
function realOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

const isPluginFolder = (dir: string): boolean =>
  existsSync(join(dir, MANIFEST_FILE)) || existsSync(join(dir, SIGNATURE_FILE));

/**
 * The plugin folders named by `dirs` (a plugin folder, or a folder whose direct subfolders are
 * plugins), as real paths, each once. Total: a folder that is missing, unreadable or a link to
 * nowhere becomes a refusal, never an exception, whatever the folders hold at this instant.
 */
function discover(dirs: readonly string[], refused: RefusedPlugin[]): string[] {
  const found: string[] = [];
  const seen = new Set<string>();
  const refuse = (dir: string, code: PluginErrorCode, message: string): void => {
    if (seen.has(dir)) return;
    seen.add(dir);
    refused.push(refusal(dir, null, code, message));
  };
  const add = (dir: string): void => {
    if (seen.has(dir)) return;
    seen.add(dir);
    found.push(dir);
  };
  for (const dir of dirs) {
    const abs = realOrNull(resolve(dir));
    if (abs === null || !isDirectory(abs)) {
      refuse(abs ?? resolve(dir), "ASP_PLUGIN_NOT_FOUND", `no plugin folder at ${dir}`);
      continue;
    }
    if (isPluginFolder(abs)) {
      add(abs);
      continue;
    }
    let names: string[];
    try {
      names = readdirSync(abs).sort();
    } catch (error) {
      refuse(abs, "ASP_PLUGIN_IO", `the plugins folder ${abs} cannot be read (${errnoOf(error)})`);
      continue;
    }
    for (const name of names) {
      const sub = join(abs, name);
      const real = realOrNull(sub);
      if (real === null) {
        // A link to nowhere (or an entry that vanished) may have been meant as a plugin: say so.
        refuse(sub, "ASP_PLUGIN_NOT_FOUND", `${sub} does not resolve to a folder`);
        continue;
      }
      if (isDirectory(real) && isPluginFolder(real)) add(real);
    }
  }
  return found;
}

/** The in-process kinds, each with the brand its entry's default export must carry. */
const BRANDS = {
  verifier: PLUGIN_BRANDS.verifier,
  sandbox: PLUGIN_BRANDS.sandbox,
  engine: PLUGIN_BRANDS.engine,
} as const;

/** The init of a verifier loaded for a subprocess: never callable in this process. */
function outOfProcessInit(id: string): CapturedInit {
  return Object.freeze({
    deps: Object.freeze({}),
    init: () => {
      throw new PluginError(
        "ASP_PLUGIN_OUT_OF_PROCESS",
        `verifier ${id} was loaded to run out of process (verifierIsolation "subprocess"): launch it with launchVerifier`,
        { data: { id } },
      );
    },
  });
}

function loadFailed(id: string, why: string, cause?: unknown): PluginError {
  return new PluginError("ASP_PLUGIN_LOAD_FAILED", `${id}: ${why}`, {
    data: { id },
    ...(cause === undefined ? {} : { cause }),
  });
}

async function loadInProcess(
  v: VerifiedPlugin,
  kind: keyof typeof BRANDS,
  options: unknown,
): Promise<{ init: CapturedInit; options: unknown }> {
  const id = v.manifest.id;
  let mod: { default?: unknown };
  try {
    // The digest in the URL gives every verified content its own module instance.
    mod = (await import(`${pathToFileURL(v.entryPath).href}?digest=${v.evidence.digest}`)) as { default?: unknown };
  } catch (error) {
    throw loadFailed(id, `importing the entry failed: ${(error as Error).message}`, error);
  }
  const decl = mod.default as
    | {
        $$type?: unknown;
        id?: unknown;
        capabilities?: unknown;
        optionsSchema?: unknown;
        register?: unknown;
      }
    | undefined;
  if (typeof decl !== "object" || decl === null || decl.$$type !== BRANDS[kind]) {
    throw loadFailed(id, `the entry's default export is not a ${kind} declaration (${BRANDS[kind]})`);
  }
  if (decl.id !== id) throw loadFailed(id, `the declaration's id ${JSON.stringify(decl.id)} is not the manifest's`);
  const caps = Array.isArray(decl.capabilities) ? (decl.capabilities as PluginCapability[]) : [];
  if (caps.length === 0 || caps.some((c) => !v.manifest.capabilities.includes(c))) {
    throw loadFailed(id, "the declaration claims capabilities its signed manifest does not declare");
  }
  if (decl.optionsSchema !== undefined) checkPluginOptions(id, decl.optionsSchema, options);
  if (typeof decl.register !== "function") throw loadFailed(id, "the declaration has no register()");
  const captured: CapturedInit[] = [];
  try {
    (decl.register as (reg: unknown) => void)({
      registerInit: (init: CapturedInit) => {
        captured.push(init);
      },
    });
  } catch (error) {
    throw loadFailed(id, `register() threw: ${(error as Error).message}`, error);
  }
  const init = captured[0];
  if (captured.length !== 1 || init === undefined) {
    throw loadFailed(id, `register() must call registerInit exactly once (called ${captured.length} times)`);
  }
  if (
    typeof init.init !== "function" ||
    typeof init.deps !== "object" ||
    init.deps === null ||
    Object.values(init.deps).some((d) => typeof d?.key !== "string")
  ) {
    throw loadFailed(id, "registerInit needs { deps: { name: DependencyRef }, init: function }");
  }
  // A plugin that asks for anything but its kind's ports is refused here, visibly.
  assertPluginPorts(kind, id, init.deps);
  return { init, options };
}

/**
 * Verify and load every plugin in `dirs` (see {@link verifyPlugin}; nothing from a plugin runs
 * before every check passed). Each verified plugin is copied into the host's cache
 * ({@link LoadPluginsOptions.cacheDir}): exactly the bytes that were hashed, read-only, hashed
 * again, and everything runs from that copy. Providers become trusted launch configurations (a
 * contracts `ProviderManifest`: this node binary, the absolute entry inside the copy, the copy as
 * cwd, the verified digest); verifiers, sandboxes and engines are imported in-process from the copy, their branded
 * declaration checked and their `register` phase run. Every failure is a {@link RefusedPlugin}
 * with its precise code, never an exception, whatever the folders hold (missing, unreadable,
 * links to nowhere, anything a plugin's own code throws): a refused required provider is
 * degraded coverage for the host, never a pass. Folders are taken by real path, each once;
 * when two verified folders claim one id, both are refused `ASP_PLUGIN_DUPLICATE` and neither
 * loads, whatever their order. A refusal is keyed by its folder (`key`), never by the id it claims.
 *
 * @throws PluginError `ASP_PLUGIN_BAD_POLICY`, before anything is read, when `policy` is neither a
 *   policy document nor an `ActivePolicy`; EvidenceError only when `factLog` is given and appending fails.
 * @example
 * ```ts
 * const result = await loadPlugins({ dirs: ["./plugins"], trustRoots: readTrustRoots(["./keys/team.pub"]), policy });
 * for (const r of result.refused) console.error(`${r.key}: ${r.code}`);
 * ```
 */
export async function loadPlugins(options: LoadPluginsOptions): Promise<PluginLoadResult> {
  const policy = policyDocumentOf(options.policy);
  const refused: RefusedPlugin[] = [];
  const providers: LoadedProvider[] = [];
  const verifiers: LoadedVerifier[] = [];
  const sandboxes: LoadedSandbox[] = [];
  const engines: LoadedEngine[] = [];
  const refuse = (dir: string, id: string | null, error: unknown): void => {
    const code =
      error instanceof PluginError || (isAspError(error) && error.code.startsWith("ASP_PLUGIN_"))
        ? (error as PluginError).code
        : "ASP_PLUGIN_LOAD_FAILED";
    refused.push(refusal(dir, id, code, messageOf(error)));
  };

  // 1. Verify every folder; nothing from any plugin runs in this phase.
  const folders: VerifiedFolder[] = [];
  for (const dir of discover(options.dirs, refused)) {
    try {
      folders.push(
        verifyFolder(dir, {
          trustRoots: options.trustRoots,
          policy,
          ...(options.now ? { now: options.now } : {}),
        }),
      );
    } catch (error) {
      refuse(dir, peekPluginId(dir), error);
    }
  }

  // 2. Two verified folders claiming one id: neither loads. Letting the first win would make
  // what runs depend on the order of folders; the id's requirement degrades instead (fail closed).
  const claimants = new Map<string, string[]>();
  for (const { verified: v } of folders) {
    claimants.set(v.manifest.id, [...(claimants.get(v.manifest.id) ?? []), v.dir]);
  }

  // 3. Copy the rest into the host's cache and load them from there, never from their folders.
  let cacheDir = options.cacheDir ?? null;
  for (const { verified: v, snapshot, entry } of folders) {
    const id = v.manifest.id;
    const dirs = claimants.get(id) ?? [];
    if (dirs.length > 1) {
      const others = dirs.filter((d) => d !== v.dir);
      refuse(
        v.dir,
        id,
        new PluginError(
          "ASP_PLUGIN_DUPLICATE",
          `${dirs.length} verified folders claim plugin ${id} (also ${others.join(", ")}); none is loaded`,
          { data: { id, dirs } },
        ),
      );
      continue;
    }
    try {
      cacheDir ??= createTempPluginCache();
      const cached = cachePlugin(snapshot, entry, cacheDir);
      const evidence: PluginEvidence = { ...v.evidence, authorityGrant: "verified" };
      if (v.manifest.kind === "provider") {
        const capabilities = v.manifest.capabilities.filter((c): c is ProviderManifest["capabilities"][number] =>
          (CAPABILITY_FAMILIES as readonly string[]).includes(c),
        );
        const manifest = {
          id,
          version: v.manifest.version,
          digest: v.evidence.digest,
          executable: process.execPath,
          args: [cached.entryPath],
          cwd: cached.dir,
          capabilities,
          diagnosticSources: v.manifest.diagnosticSources,
          protocolVersion: v.manifest.protocolVersion,
        };
        const r = validate("provider-manifest", manifest);
        if (!r.ok) {
          const first = r.errors[0];
          throw new PluginError(
            "ASP_PLUGIN_BAD_MANIFEST",
            `provider ${id} has no launchable configuration: ${first?.pointer || "/"} ${first?.message ?? ""}`,
          );
        }
        providers.push(
          Object.freeze({
            $$type: "@asp/LoadedProvider",
            dir: v.dir,
            cached: cached.dir,
            plugin: v.manifest,
            manifest: r.value,
            evidence,
          }),
        );
      } else if (
        v.manifest.kind === "verifier" &&
        options.verifierIsolation === "subprocess" &&
        (options.kinds === undefined || options.kinds.includes("verifier"))
      ) {
        // Nothing of it runs here: its declaration is checked in the sandboxed child.
        verifiers.push(
          Object.freeze({
            $$type: "@asp/LoadedVerifier",
            dir: v.dir,
            cached: cached.dir,
            plugin: v.manifest,
            evidence,
            options: options.pluginOptions?.[id] ?? {},
            init: outOfProcessInit(id),
            isolation: "subprocess",
            entryPath: cached.entryPath,
          }),
        );
      } else if (options.kinds === undefined || options.kinds.includes(v.manifest.kind)) {
        const loaded = await loadInProcess(
          { ...v, entryPath: cached.entryPath },
          v.manifest.kind,
          options.pluginOptions?.[id] ?? {},
        );
        const common = {
          dir: v.dir,
          cached: cached.dir,
          plugin: v.manifest,
          evidence,
          options: loaded.options,
          init: loaded.init,
        };
        if (v.manifest.kind === "verifier") verifiers.push(Object.freeze({ $$type: "@asp/LoadedVerifier", ...common }));
        else if (v.manifest.kind === "engine") engines.push(Object.freeze({ $$type: "@asp/LoadedEngine", ...common }));
        else sandboxes.push(Object.freeze({ $$type: "@asp/LoadedSandbox", ...common }));
      }
    } catch (error) {
      refuse(v.dir, id, error);
    }
  }
  const result: PluginLoadResult = { providers, verifiers, sandboxes, engines, refused, cacheDir };
  if (options.factLog !== undefined) await options.factLog.append(factsOf(result));
  return result;
}

/** The facts `loadPlugins` records: one per plugin, loaded or refused. */
export function factsOf(result: PluginLoadResult): FactInput[] {
  const loaded = [
    ...result.providers.map((p) => ({ kind: "provider", plugin: p.plugin, dir: p.dir, evidence: p.evidence })),
    ...result.verifiers.map((p) => ({ kind: "verifier", plugin: p.plugin, dir: p.dir, evidence: p.evidence })),
    ...result.sandboxes.map((p) => ({ kind: "sandbox", plugin: p.plugin, dir: p.dir, evidence: p.evidence })),
    ...(result.engines ?? []).map((p) => ({ kind: "engine", plugin: p.plugin, dir: p.dir, evidence: p.evidence })),
  ];
  return [
    ...loaded.map((l) => ({
      kind: "plugin.loaded",
      record: {
        id: l.plugin.id,
        version: l.plugin.version,
        kind: l.kind,
        dir: l.dir,
        digest: l.evidence.digest,
        keyId: l.evidence.keyId,
        capabilities: [...l.evidence.capabilities],
        identity: l.evidence.identity,
        integrity: l.evidence.integrity,
        authorityGrant: l.evidence.authorityGrant,
      },
      index: [{ name: "plugin", value: l.plugin.id }],
    })),
    ...result.refused.map((r) => ({
      kind: "plugin.refused",
      record: { dir: r.dir, id: r.id, code: r.code, message: r.message },
      // Indexed by its folder: a refused plugin is never found under the id it claims.
      index: [{ name: "plugin", value: r.key }],
    })),
  ];
}
