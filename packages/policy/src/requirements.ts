import { ASSURANCE_MODES, type AssuranceMode, type CallSite } from "@asp/contracts";
import type { PolicyDocument } from "./parse.js";
import { type ActivePolicy, requireActive } from "./parse.js";

/** One requirement of an active policy (`requirements[]` entry). */
export type PolicyRequirement = PolicyDocument["requirements"][number];

/**
 * The requirements required at `callSite` (host §1 `requiredRequirements`), sorted by id.
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE` when `policy` is not an {@link ActivePolicy}.
 * @example
 * ```ts
 * requiredRequirements(policy, "gate").map((r) => r.id); // ["secrets", "types"]
 * ```
 */
export function requiredRequirements(policy: ActivePolicy, callSite: CallSite): ReadonlyArray<PolicyRequirement> {
  const doc = requireActive(policy, "policy").document;
  return doc.requirements.filter((r) => r.callSites.includes(callSite)).sort((a, b) => (a.id < b.id ? -1 : 1));
}

/**
 * Every diagnostic source some requirement requires at `callSite`, sorted.
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE`.
 */
export function requiredSources(policy: ActivePolicy, callSite: CallSite): ReadonlyArray<string> {
  const sources = new Set<string>();
  for (const r of requiredRequirements(policy, callSite)) for (const s of r.sources) sources.add(s);
  return [...sources].sort();
}

/**
 * True when some requirement requires `source` at `callSite`: the `requiredSource` input of
 * {@link failPolicyCell}.
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE`.
 */
export function isRequiredSource(policy: ActivePolicy, source: string, callSite: CallSite): boolean {
  return requiredRequirements(policy, callSite).some((r) => r.sources.includes(source));
}

/**
 * The built-in required assurance per call-site, used where the policy's `assurance` map is
 * silent: `advisory` interactively and in sweeps, `gated` at the gate.
 */
export const DEFAULT_ASSURANCE: { readonly [S in CallSite]: AssuranceMode } = Object.freeze({
  interactive: "advisory",
  gate: "gated",
  sweep: "advisory",
});

/**
 * The assurance mode `callSite` requires under `policy` (host §3).
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE`.
 */
export function requiredAssurance(policy: ActivePolicy, callSite: CallSite): AssuranceMode {
  return requireActive(policy, "policy").document.assurance?.[callSite] ?? DEFAULT_ASSURANCE[callSite];
}

/** Rank of an assurance mode, weakest first (`advisory` 0 … `isolated` 3). */
export function assuranceRank(mode: AssuranceMode): number {
  return ASSURANCE_MODES.indexOf(mode);
}

/**
 * True when the `achieved` assurance mode is at least the `required` one.
 *
 * @example
 * ```ts
 * assuranceSatisfies("mediated-write", "gated"); // true
 * assuranceSatisfies("advisory", "gated");       // false
 * ```
 */
export function assuranceSatisfies(achieved: AssuranceMode, required: AssuranceMode): boolean {
  const a = assuranceRank(achieved);
  return a >= 0 && a >= assuranceRank(required);
}
