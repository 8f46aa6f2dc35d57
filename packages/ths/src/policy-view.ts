import type { AxisState, CallSite, CapabilityFamily, DecisionEnvelope, Policy, Severity } from "@asp/contracts";

type AuthorityEvidence = DecisionEnvelope["authority"][number];

import { ASSURANCE_MODES, type AssuranceMode, SEVERITIES } from "@asp/contracts";
import { type Digest, digest } from "@asp/evidence";

/** A requirement the policy makes for one call-site. */
export interface RequiredRequirement {
  readonly id: string;
  readonly capability: CapabilityFamily;
  readonly sources: readonly string[];
}

/** A provider's pinned identity (id, version, artifact digest). */
export interface ProviderPin {
  readonly id: string;
  readonly version: string;
  readonly digest: string;
}

/** A grant verified against a pinned identity, for one requirement at one call-site. */
export interface VerifiedGrant {
  readonly requirement: string;
  readonly callSite: CallSite;
}

/** The immutable identity of a trusted policy: the digest of its canonical JSON. */
export function policyDigest(policy: Policy): Digest {
  return digest(policy);
}

/** `host.requiredRequirements(callSite)` (host §1). */
export function requiredRequirements(policy: Policy, callSite: CallSite): RequiredRequirement[] {
  return policy.requirements
    .filter((r) => r.callSites.includes(callSite))
    .map((r) => ({ id: r.id, capability: r.capability, sources: [...r.sources] }));
}

/**
 * Grants of trusted policy pinned to this exact provider identity, version and digest for
 * `callSite` (host §1). Labels, manifests and repository configuration never grant.
 */
export function verifiedGrants(policy: Policy, pin: ProviderPin, callSite: CallSite): VerifiedGrant[] {
  const known = new Set(policy.requirements.filter((r) => r.callSites.includes(callSite)).map((r) => r.id));
  const pinned = policy.providers.some((p) => p.id === pin.id && p.version === pin.version && p.digest === pin.digest);
  if (!pinned) return [];
  return policy.grants
    .filter(
      (g) =>
        g.provider === pin.id &&
        g.version === pin.version &&
        g.digest === pin.digest &&
        g.callSites.includes(callSite) &&
        known.has(g.requirement),
    )
    .map((g) => ({ requirement: g.requirement, callSite }));
}

/** The `initialized` grants sent to a provider: every requirement it holds, with its call-sites and sources. */
export function initializedGrants(
  policy: Policy,
  pin: ProviderPin,
): Array<{ requirement: string; callSites: CallSite[]; sources: string[] }> {
  const out = new Map<string, { requirement: string; callSites: Set<CallSite>; sources: string[] }>();
  for (const g of policy.grants) {
    if (g.provider !== pin.id || g.version !== pin.version || g.digest !== pin.digest) continue;
    const req = policy.requirements.find((r) => r.id === g.requirement);
    if (req === undefined) continue;
    const row = out.get(g.requirement) ?? {
      requirement: g.requirement,
      callSites: new Set(),
      sources: [...req.sources],
    };
    for (const c of g.callSites) row.callSites.add(c);
    out.set(g.requirement, row);
  }
  return [...out.values()].map((r) => ({
    requirement: r.requirement,
    callSites: [...r.callSites],
    sources: r.sources,
  }));
}

/** Evidence on the five authority axes (host §1 "Authority axes"). */
export function authorityEvidence(
  policy: Policy,
  pin: ProviderPin,
  callSite: CallSite,
  facts: { readonly identityVerified: boolean; readonly integrityVerified: boolean; readonly isolated: boolean },
): AuthorityEvidence {
  const grants = verifiedGrants(policy, pin, callSite);
  const namedButSkewed = policy.grants.some(
    (g) => g.provider === pin.id && (g.version !== pin.version || g.digest !== pin.digest),
  );
  const grantAxis: AxisState = grants.length > 0 ? "verified" : namedButSkewed ? "failed" : "unverified";
  return {
    providerId: pin.id,
    providerVersion: pin.version,
    providerDigest: pin.digest,
    identity: facts.identityVerified ? "verified" : "unverified",
    integrity: facts.integrityVerified ? "verified" : "unverified",
    conformance: "unverified",
    isolation: facts.isolated ? "verified" : "unverified",
    authorityGrant: grantAxis,
    grants: grants.map((g) => ({ requirement: g.requirement, callSite: g.callSite })),
  };
}

const severityRank = (s: Severity): number => SEVERITIES.indexOf(s);

/**
 * The host's effective severity for a diagnostic (host §1): the provider's self-report capped
 * by every matching `severityCaps` row (by provider, by granted/ungranted authority, by the
 * achieved isolation). Returns a `note` when the severity was lowered.
 */
export function effectiveSeverity(
  policy: Policy,
  reported: Severity,
  ctx: { readonly provider: string; readonly granted: boolean; readonly isolation: AssuranceMode },
): { severity: Severity; note?: string } {
  let severity = reported;
  let why = "";
  for (const cap of policy.severityCaps ?? []) {
    if (cap.provider !== undefined && cap.provider !== ctx.provider) continue;
    if (cap.authority !== undefined && cap.authority !== (ctx.granted ? "granted" : "ungranted")) continue;
    // a cap on an isolation level applies to providers at or below it
    if (cap.isolation !== undefined && !assuranceAtLeast(cap.isolation, ctx.isolation)) continue;
    if (severityRank(cap.maxSeverity) > severityRank(severity)) {
      severity = cap.maxSeverity;
      why = [
        cap.provider && `provider ${cap.provider}`,
        cap.authority && `${cap.authority} authority`,
        cap.isolation && `isolation ${cap.isolation}`,
      ]
        .filter(Boolean)
        .join(", ");
    }
  }
  if (severity === reported) return { severity };
  return {
    severity,
    note: `capped from ${reported} to ${severity} by trusted policy (${why || "every provider"})`,
  };
}

/** The assurance mode trusted policy requires at a call-site (default: advisory interactive, gated otherwise). */
export function requiredAssurance(policy: Policy, callSite: CallSite): AssuranceMode {
  return policy.assurance?.[callSite] ?? (callSite === "interactive" ? "advisory" : "gated");
}

/** True when mode `a` is at least as strong as `b`. */
export function assuranceAtLeast(a: AssuranceMode, b: AssuranceMode): boolean {
  return ASSURANCE_MODES.indexOf(a) >= ASSURANCE_MODES.indexOf(b);
}
