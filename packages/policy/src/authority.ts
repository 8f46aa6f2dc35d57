import type { CallSite, PluginCapability } from "@asp/contracts";
import { type ActivePolicy, requireActive } from "./parse.js";

/**
 * What the host knows about a provider when it asks for authority. Only `id`, `version` and
 * `digest` are compared; `labels` and `evidence` (certification, first-party, manifest presence,
 * installed state, package scope, repository configuration ...) are accepted so callers can pass
 * everything they have, and are ignored on purpose (host §1, §2: they are evidence, never authority).
 */
export interface ProviderClaim {
  readonly id: string;
  readonly version: string;
  /** `sha256:<hex>` of the provider artifact, as measured by the host. */
  readonly digest: string;
  readonly labels?: ReadonlyArray<string>;
  readonly evidence?: Readonly<Record<string, unknown>>;
}

/** A pinned provider identity. */
export interface ProviderPin {
  readonly id: string;
  readonly version: string;
  readonly digest: string;
}

/** One cell of authority: a pinned provider may satisfy `requirement` at `callSite`. */
export interface AuthorityGrant {
  readonly provider: ProviderPin;
  readonly requirement: string;
  readonly callSite: CallSite;
}

const samePin = (a: ProviderPin, b: ProviderPin): boolean =>
  a.id === b.id && a.version === b.version && a.digest === b.digest;

/**
 * The grant that lets `provider` satisfy `requirement` at `callSite`, or `null`. Only an exact
 * pinned match counts: a `grants[]` entry with the same id + version + digest + requirement +
 * call-site, whose identity is also pinned in `providers[]`, for a requirement required at that
 * call-site. Labels and evidence never produce a grant (host §1 "Authority grant").
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE` when `policy` is not an {@link ActivePolicy}.
 * @example
 * ```ts
 * authorityFor(policy, { id: "asp.provider-typescript", version: "0.1.0", digest }, "types", "gate");
 * // { provider: { id, version, digest }, requirement: "types", callSite: "gate" } or null
 * ```
 */
export function authorityFor(
  policy: ActivePolicy,
  provider: ProviderClaim,
  requirement: string,
  callSite: CallSite,
): AuthorityGrant | null {
  const doc = requireActive(policy, "policy").document;
  const pin: ProviderPin = { id: provider.id, version: provider.version, digest: provider.digest };
  if (typeof pin.id !== "string" || typeof pin.version !== "string" || typeof pin.digest !== "string") return null;
  if (!doc.providers.some((p) => samePin(p, pin))) return null;
  const req = doc.requirements.find((r) => r.id === requirement);
  if (req === undefined || !req.callSites.includes(callSite)) return null;
  const granted = doc.grants.some(
    (g) =>
      samePin({ id: g.provider, version: g.version, digest: g.digest }, pin) &&
      g.requirement === requirement &&
      g.callSites.includes(callSite),
  );
  return granted ? Object.freeze({ provider: Object.freeze(pin), requirement, callSite }) : null;
}

/**
 * Every authority cell `provider` holds, sorted by requirement then call-site (what the
 * `authorityGrant` axis of authority evidence lists).
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE`.
 */
export function grantsFor(policy: ActivePolicy, provider: ProviderClaim): ReadonlyArray<AuthorityGrant> {
  const doc = requireActive(policy, "policy").document;
  const out: AuthorityGrant[] = [];
  for (const r of doc.requirements) {
    for (const site of r.callSites) {
      const g = authorityFor(policy, provider, r.id, site);
      if (g !== null) out.push(g);
    }
  }
  return out.sort((a, b) =>
    a.requirement === b.requirement ? (a.callSite < b.callSite ? -1 : 1) : a.requirement < b.requirement ? -1 : 1,
  );
}

/** A signed plugin as the plugin host measured it. Labels are ignored, as for providers. */
export interface PluginClaim {
  readonly id: string;
  /** `sha256:<hex>` of the verified plugin artifact. */
  readonly digest: string;
  readonly labels?: ReadonlyArray<string>;
}

/** A plugin grant: the plugin may load with exactly these capabilities. */
export interface PluginGrant {
  readonly id: string;
  readonly digest: string;
  readonly capabilities: ReadonlyArray<PluginCapability>;
}

/**
 * The grant that lets `plugin` load, when its id and digest match a `plugins[]` entry exactly
 * and, if `capability` is given, the entry grants it; otherwise `null`.
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE`.
 * @example
 * ```ts
 * pluginGrant(policy, { id: "asp.verifier-rules", digest }, "review")?.capabilities; // ["review"]
 * ```
 */
export function pluginGrant(
  policy: ActivePolicy,
  plugin: PluginClaim,
  capability?: PluginCapability,
): PluginGrant | null {
  const doc = requireActive(policy, "policy").document;
  const entry = (doc.plugins ?? []).find((p) => p.id === plugin.id && p.digest === plugin.digest);
  if (entry === undefined) return null;
  if (capability !== undefined && !entry.capabilities.includes(capability)) return null;
  return Object.freeze({ id: entry.id, digest: entry.digest, capabilities: Object.freeze([...entry.capabilities]) });
}

/** The state of the `conformance` authority axis: the contracts `AxisState` values it can take. */
export type ConformanceAxis = "verified" | "unverified" | "failed";

/**
 * The `conformance` authority axis of `provider` (host §1 "Authority axes"; issue 32): what the
 * conformance result the operator pinned next to its `providers[]` entry says, and only when that
 * result was run against the digest of the provider that ran. `verified` for a `pass`, `failed`
 * for a `fail`, both only when (1) a `providers[]` entry pins exactly `provider`'s id + version +
 * digest, (2) its `conformance.subjectDigest` equals that digest, and (3) the host measured the
 * running provider to be that digest (`measured.integrity` is `verified`). Anything else is
 * `unverified`: labels and evidence (a provider's own claim of conformance) are ignored on
 * purpose, and the axis never grants authority (that is {@link authorityFor}'s alone).
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE` when `policy` is not an {@link ActivePolicy}.
 * @example
 * ```ts
 * conformanceOf(policy, { id, version, digest }, { integrity: "verified" }); // "verified" | "unverified" | "failed"
 * ```
 */
export function conformanceOf(
  policy: ActivePolicy,
  provider: ProviderClaim,
  measured: { readonly integrity: string },
): ConformanceAxis {
  const doc = requireActive(policy, "policy").document;
  const pin: ProviderPin = { id: provider.id, version: provider.version, digest: provider.digest };
  const entry = doc.providers.find((p) => samePin(p, pin));
  const result = entry?.conformance;
  if (result === undefined || measured.integrity !== "verified" || result.subjectDigest !== pin.digest) {
    return "unverified";
  }
  return result.result === "pass" ? "verified" : "failed";
}
