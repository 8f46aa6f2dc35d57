import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import type { CallSite, Digest, PluginManifest, Policy } from "@asp/contracts";
import { parsePolicy } from "@asp/policy";
import { errnoOf, PluginError } from "./errors.js";

/** A `providers[]` pin: the exact id + version + tree digest that gate authority goes to. */
export type PolicyProviderPin = Policy["providers"][number];
/** A `grants[]` entry: gate authority for one requirement at some call-sites. */
export type PolicyAuthorityGrant = Policy["grants"][number];
/** A `plugins[]` entry: the loader's grant of id + digest + capabilities. */
export type PolicyPluginGrant = NonNullable<Policy["plugins"]>[number];

/** A request for gate authority: a requirement the policy defines, at some of its call-sites. */
export interface GrantRequest {
  readonly requirement: string;
  readonly callSites: readonly CallSite[];
}

/**
 * Everything trusted policy needs to admit one plugin and give a provider gate authority. The
 * digest in each entry is the plugin's **tree digest** (`digestPlugin`, what `asp-plugin.sig`
 * signs), not a digest of any single file.
 */
export interface PolicySnippet {
  /** The `providers[]` pin; `null` for a verifier or sandbox (they carry no gate authority). */
  readonly provider: PolicyProviderPin | null;
  /** The `grants[]` entries, one per requested requirement. */
  readonly grants: readonly PolicyAuthorityGrant[];
  /** The `plugins[]` entry with every capability the manifest declares. */
  readonly plugin: PolicyPluginGrant;
}

/**
 * The policy entries that admit the plugin with `manifest` and tree `digest` and grant it each
 * requested requirement. Pure.
 *
 * @throws PluginError `ASP_PLUGIN_NOT_A_PROVIDER` when grants are requested for a verifier or sandbox.
 * @example
 * ```ts
 * const { manifest } = readPluginManifest(dir);
 * const snippet = policySnippet(manifest, digestPlugin(dir).digest, [{ requirement: "todo", callSites: ["gate"] }]);
 * ```
 */
export function policySnippet(
  manifest: PluginManifest,
  digest: Digest,
  grants: readonly GrantRequest[] = [],
): PolicySnippet {
  const plugin: PolicyPluginGrant = { id: manifest.id, digest, capabilities: [...manifest.capabilities] };
  if (manifest.kind !== "provider") {
    if (grants.length > 0) {
      throw new PluginError(
        "ASP_PLUGIN_NOT_A_PROVIDER",
        `${manifest.id} is a ${manifest.kind}: only a provider is pinned in providers[] and granted requirements; drop --requirement`,
        { data: { id: manifest.id, kind: manifest.kind } },
      );
    }
    return { provider: null, grants: [], plugin };
  }
  return {
    provider: { id: manifest.id, version: manifest.version, digest },
    grants: grants.map((g) => ({
      provider: manifest.id,
      version: manifest.version,
      digest,
      requirement: g.requirement,
      callSites: [...g.callSites],
    })),
    plugin,
  };
}

/**
 * The requirements of `policy` a provider can serve: its manifest declares the requirement's
 * capability and every one of its sources. Each is requested at all the requirement's call-sites.
 */
export function matchingGrants(policy: Policy, manifest: PluginManifest): GrantRequest[] {
  if (manifest.kind !== "provider") return [];
  return policy.requirements
    .filter(
      (r) =>
        (manifest.capabilities as readonly string[]).includes(r.capability) &&
        r.sources.every((s) => manifest.diagnosticSources.includes(s)),
    )
    .map((r) => ({ requirement: r.id, callSites: [...r.callSites] }));
}

/**
 * Refuse a grant for a requirement `policy` does not define: pinning never creates requirements
 * (what a gate requires is the policy author's decision, not the plugin's).
 *
 * With the provider's `manifest`, the example requirement in the message uses its capability and
 * diagnostic sources.
 *
 * @throws PluginError `ASP_PLUGIN_UNKNOWN_REQUIREMENT` naming the requirement and how to add it
 *   (`data.example`: a requirement to paste).
 */
export function assertRequirementsExist(
  policy: Policy,
  grants: readonly GrantRequest[],
  manifest?: PluginManifest,
): void {
  const known = new Set(policy.requirements.map((r) => r.id));
  const missing = grants.find((g) => !known.has(g.requirement));
  if (missing === undefined) return;
  // The example requirement is what this provider could serve, when its manifest is known.
  const example = {
    id: missing.requirement,
    capability: manifest?.capabilities.find((c) => ["check", "inspect", "edit"].includes(c)) ?? "check",
    sources: manifest?.diagnosticSources.length ? manifest.diagnosticSources : ["<diagnostic source>"],
    callSites: missing.callSites,
  };
  throw new PluginError(
    "ASP_PLUGIN_UNKNOWN_REQUIREMENT",
    `the policy defines no requirement ${JSON.stringify(missing.requirement)}; pinning never creates one: add it to the policy's requirements[] first, e.g. ${JSON.stringify(example)}, then pin again`,
    { data: { requirement: missing.requirement, known: [...known], example } },
  );
}

/** Replace the entry `same` matches, in place, or append it. */
function upsert<T>(xs: T[], entry: T, same: (x: T) => boolean): T[] {
  const i = xs.findIndex(same);
  if (i < 0) return [...xs, entry];
  return xs.map((x, j) => (j === i ? entry : x));
}

/**
 * Write `snippets` into `policy`: each plugin's `plugins[]` entry and, for a provider, its
 * `providers[]` pin are added or replaced; the provider's other grants follow the new pin
 * (version and digest, so the policy stays valid); each requested grant is added or replaced
 * (one per provider and requirement). Everything else is kept as it is, in its order. Pure.
 */
export function pinInPolicy(policy: Policy, snippets: readonly PolicySnippet[]): Policy {
  let plugins = [...(policy.plugins ?? [])];
  let providers = [...policy.providers];
  let grants = [...policy.grants];
  for (const s of snippets) {
    plugins = upsert(plugins, s.plugin, (p) => p.id === s.plugin.id);
    const pin = s.provider;
    if (pin === null) continue;
    providers = upsert(providers, pin, (p) => p.id === pin.id);
    grants = grants.map((g) => (g.provider === pin.id ? { ...g, version: pin.version, digest: pin.digest } : g));
    for (const g of s.grants) {
      grants = upsert(grants, g, (x) => x.provider === g.provider && x.requirement === g.requirement);
    }
  }
  return { ...policy, providers, grants, plugins };
}

/** What {@link pinPolicyFile} computed (and wrote unless asked not to). */
export interface PinPolicyFileResult {
  /** Absolute path of the policy file. */
  readonly path: string;
  /** The pinned policy, validated by `parsePolicy` exactly as the host validates it. */
  readonly policy: Policy;
  /** Its digest as the host reports it (`policyDigest` of every decision). */
  readonly policyDigest: Digest;
  /** The file's new text (2-space JSON and a final newline). */
  readonly text: string;
  /** Whether the text differs from the file's. */
  readonly changed: boolean;
  /** Whether the file was (atomically) replaced. */
  readonly written: boolean;
}

/**
 * Pin into the policy file at `path`: read it and validate it as the host does (`parsePolicy`
 * from `@asp/policy`, the function behind the host's `loadPolicy`: duplicate keys, schema, pins,
 * gate floor), apply `update`, validate the result the same way **before** writing, and replace
 * the file atomically (a temporary file in the same folder, flushed, then renamed over it, with
 * the file's mode kept) unless `write` is false or nothing changed.
 *
 * @throws PluginError `ASP_PLUGIN_IO` when the file cannot be read (category `input`) or written
 *   (category `internal`); PolicyError
 *   (`ASP_POLICY_*`) when the file, or the pinned result, is not a policy the host accepts;
 *   whatever `update` throws.
 * @example
 * ```ts
 * pinPolicyFile("/etc/asp/policy.json", (p) => pinInPolicy(p, [policySnippet(manifest, digest)]));
 * ```
 */
export function pinPolicyFile(
  path: string,
  update: (policy: Policy) => Policy,
  options: { readonly write?: boolean } = {},
): PinPolicyFileResult {
  const abs = resolve(path);
  let before: string;
  try {
    before = readFileSync(abs, "utf8");
  } catch (error) {
    // The caller named the file: a missing or unreadable one is bad input, not a host fault.
    throw new PluginError(
      "ASP_PLUGIN_IO",
      `cannot read policy ${abs}: ${errnoOf(error)}; pin edits an existing trusted policy (create it with its requirements[] first, see docs/policy.md)`,
      { cause: error, data: { path: abs }, category: "input" },
    );
  }
  const origin = { kind: "file" as const, path: abs };
  const current = parsePolicy(before, { what: `policy ${abs}`, origin });
  const next = update(structuredClone(current.document) as Policy);
  const text = `${JSON.stringify(next, null, 2)}\n`;
  const pinned = parsePolicy(text, { what: `pinned policy ${abs}`, origin });
  const changed = text !== before;
  const written = changed && options.write !== false;
  if (written) writeAtomically(abs, text);
  return { path: abs, policy: next, policyDigest: pinned.digest, text, changed, written };
}

/**
 * Replace `path` with `text` so a reader sees the old file or the new one, never a part. A
 * symbolic link is followed: its target is replaced and the link stays a link.
 */
function writeAtomically(path: string, text: string): void {
  let target = path;
  let tmp = "";
  try {
    target = realpathSync(path);
    tmp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString("hex")}.tmp`);
    const fd = openSync(tmp, "wx", statSync(target).mode & 0o777);
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, target);
  } catch (error) {
    if (tmp !== "") rmSync(tmp, { force: true });
    throw new PluginError("ASP_PLUGIN_IO", `cannot write policy ${path}: ${errnoOf(error)}`, {
      cause: error,
      data: { path },
    });
  }
}
