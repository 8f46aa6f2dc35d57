import type { AssuranceMode, AxisState, CallSite, CapabilityFamily, DecisionEnvelope, Severity } from "@asp/contracts";
import {
  type ActivePolicy,
  assuranceSatisfies,
  conformanceOf,
  grantsFor,
  effectiveSeverity as policyEffectiveSeverity,
  requiredAssurance as policyRequiredAssurance,
  requiredRequirements as policyRequiredRequirements,
} from "@asp/policy";

type AuthorityEvidence = DecisionEnvelope["authority"][number];

// The host's view of trusted policy: thin adapters over @asp/policy, in the shapes ths uses.

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

/** `host.requiredRequirements(callSite)` (host §1). */
export function requiredRequirements(policy: ActivePolicy, callSite: CallSite): RequiredRequirement[] {
  return policyRequiredRequirements(policy, callSite).map((r) => ({
    id: r.id,
    capability: r.capability,
    sources: [...r.sources],
  }));
}

/**
 * Grants of trusted policy pinned to this exact provider identity, version and digest for
 * `callSite` (host §1). Labels, manifests and repository configuration never grant.
 */
export function verifiedGrants(policy: ActivePolicy, pin: ProviderPin, callSite: CallSite): VerifiedGrant[] {
  return grantsFor(policy, { id: pin.id, version: pin.version, digest: pin.digest })
    .filter((g) => g.callSite === callSite)
    .map((g) => ({ requirement: g.requirement, callSite: g.callSite }));
}

/** The `initialized` grants sent to a provider: every requirement it holds, with its call-sites and sources. */
export function initializedGrants(
  policy: ActivePolicy,
  pin: ProviderPin,
): Array<{ requirement: string; callSites: CallSite[]; sources: string[] }> {
  const out = new Map<string, { requirement: string; callSites: CallSite[]; sources: string[] }>();
  for (const g of grantsFor(policy, { id: pin.id, version: pin.version, digest: pin.digest })) {
    const req = policy.document.requirements.find((r) => r.id === g.requirement);
    const row = out.get(g.requirement) ?? {
      requirement: g.requirement,
      callSites: [],
      sources: [...(req?.sources ?? [])],
    };
    if (!row.callSites.includes(g.callSite)) row.callSites.push(g.callSite);
    out.set(g.requirement, row);
  }
  return [...out.values()];
}

/** The assurance modes, weakest first (host §3). */
const MODE_ORDER: readonly AssuranceMode[] = ["advisory", "gated", "mediated-write", "isolated"];

/**
 * The assurance a decision achieved (host §3), from how each provider process this host
 * launched was confined: the weakest of their modes, each counted as at least `gated`, because
 * the host alone decides and re-snapshots the worktree after the providers answer, so a write
 * is detected (`worktree_changed`) whatever a provider's confinement. Only a sandbox that
 * enforces more (bubblewrap: `isolated`) raises it. `directWriteRisk` is set when any of them
 * could write the real worktree. With no launched provider: `gated`, no risk.
 */
export function achievedAssurance(
  launches: ReadonlyArray<{ readonly mode: AssuranceMode; readonly directWrite: boolean }>,
): {
  mode: AssuranceMode;
  directWriteRisk: boolean;
} {
  if (launches.length === 0) return { mode: "gated", directWriteRisk: false };
  const rank = Math.min(...launches.map((l) => Math.max(MODE_ORDER.indexOf(l.mode), 1)));
  return { mode: MODE_ORDER[rank] ?? "gated", directWriteRisk: launches.some((l) => l.directWrite) };
}

/**
 * Evidence on the five authority axes (host §1 "Authority axes"). `identity` and `integrity`
 * are measured facts (a verified signature, a measured digest equal to the pin), never what the
 * provider said about itself at `initialize`; `conformance` is the result trusted policy pins for
 * that digest (`conformanceOf`), counted only when integrity is verified.
 */
export function authorityEvidence(
  policy: ActivePolicy,
  pin: ProviderPin,
  callSite: CallSite,
  facts: { readonly identity: AxisState; readonly integrity: AxisState; readonly isolated: boolean },
): AuthorityEvidence {
  const grants = verifiedGrants(policy, pin, callSite);
  const namedButSkewed = policy.document.grants.some(
    (g) => g.provider === pin.id && (g.version !== pin.version || g.digest !== pin.digest),
  );
  const grantAxis: AxisState = grants.length > 0 ? "verified" : namedButSkewed ? "failed" : "unverified";
  return {
    providerId: pin.id,
    providerVersion: pin.version,
    providerDigest: pin.digest,
    identity: facts.identity,
    integrity: facts.integrity,
    // issue 32: the operator's pinned conformance result, bound to the measured digest; never the provider's word.
    conformance: conformanceOf(policy, pin, { integrity: facts.integrity }),
    isolation: facts.isolated ? "verified" : "unverified",
    authorityGrant: grantAxis,
    grants: grants.map((g) => ({ requirement: g.requirement, callSite: g.callSite })),
  };
}

/** The host's effective severity for a diagnostic (host §1), with a note when it was lowered. */
export function effectiveSeverity(
  policy: ActivePolicy,
  reported: Severity,
  ctx: { readonly provider: string; readonly granted: boolean; readonly isolation: AssuranceMode },
): { severity: Severity; note?: string } {
  const r = policyEffectiveSeverity(
    { severity: reported },
    { provider: ctx.provider, authority: ctx.granted ? "granted" : "ungranted" },
    ctx.isolation,
    policy,
  );
  return r.severityNote === undefined ? { severity: r.severity } : { severity: r.severity, note: r.severityNote };
}

/** The assurance mode trusted policy requires at a call-site. */
export function requiredAssurance(policy: ActivePolicy, callSite: CallSite): AssuranceMode {
  return policyRequiredAssurance(policy, callSite);
}

/** True when mode `a` is at least as strong as `b`. */
export function assuranceAtLeast(a: AssuranceMode, b: AssuranceMode): boolean {
  return assuranceSatisfies(a, b);
}
