import { type AssuranceMode, SEVERITIES, type Severity } from "@asp/contracts";
import { type ActivePolicy, requireActive } from "./parse.js";
import { assuranceRank } from "./requirements.js";

/** Whether the provider holds the grant for the requirement the diagnostic counts toward. */
export interface ProviderAuthority {
  readonly provider: string;
  readonly authority: "granted" | "ungranted";
}

/** The policy cap that applies to a provider, if any. */
export interface SeverityCeiling {
  readonly maxSeverity: Severity;
  /** Index of the deciding entry in `severityCaps[]`. */
  readonly capIndex: number;
  /** Why the cap applies, e.g. `authority ungranted`. */
  readonly because: string;
}

/** The result of {@link effectiveSeverity}. */
export interface EffectiveSeverity {
  /** What the host uses. Never more severe than `reported`. */
  readonly severity: Severity;
  /** What the provider said. */
  readonly reported: Severity;
  /** Present exactly when `severity` differs from `reported` (host §1: the downgrade is legible). */
  readonly severityNote?: string;
}

/** Rank of a severity, most severe first (`error` 0 … `hint` 3). */
export function severityRank(severity: Severity): number {
  return SEVERITIES.indexOf(severity);
}

/**
 * The strictest `severityCaps[]` entry that applies to a provider with this authority and
 * isolation, or `null`. A cap applies when each selector it sets matches: `provider` by id,
 * `authority` exactly, `isolation` when the provider's isolation is at or below it (an unknown
 * isolation, `null`, counts as `advisory`, the weakest). The lowest `maxSeverity` wins; ties go
 * to the first entry.
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE`.
 */
export function severityCeiling(
  policy: ActivePolicy,
  providerAuthority: ProviderAuthority,
  isolation: AssuranceMode | null,
): SeverityCeiling | null {
  const caps = requireActive(policy, "policy").document.severityCaps ?? [];
  const isolationRank = isolation === null ? 0 : Math.max(0, assuranceRank(isolation));
  let best: SeverityCeiling | null = null;
  caps.forEach((cap, capIndex) => {
    if (cap.provider !== undefined && cap.provider !== providerAuthority.provider) return;
    if (cap.authority !== undefined && cap.authority !== providerAuthority.authority) return;
    if (cap.isolation !== undefined && isolationRank > assuranceRank(cap.isolation)) return;
    if (best !== null && severityRank(cap.maxSeverity) <= severityRank(best.maxSeverity)) return;
    const because = [
      cap.provider === undefined ? null : `provider ${cap.provider}`,
      cap.authority === undefined ? null : `authority ${cap.authority}`,
      cap.isolation === undefined ? null : `isolation ${isolation ?? "unknown"} at or below ${cap.isolation}`,
    ].filter((s) => s !== null);
    best = {
      maxSeverity: cap.maxSeverity,
      capIndex,
      because: because.length > 0 ? because.join(", ") : "every provider",
    };
  });
  return best;
}

/**
 * The severity the host uses for a provider's self-reported one (host §1 "Effective severity"):
 * capped by `severityCaps[]` for the provider's authority and isolation, never raised. A
 * `severityNote` explains every difference.
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE`.
 * @example
 * ```ts
 * effectiveSeverity({ severity: "error" }, { provider: "p", authority: "ungranted" }, "advisory", policy);
 * // { severity: "warning", reported: "error", severityNote: "capped from error to warning by severityCaps[0] (authority ungranted)" }
 * ```
 */
export function effectiveSeverity(
  diagnostic: { readonly severity: Severity },
  providerAuthority: ProviderAuthority,
  isolation: AssuranceMode | null,
  policy: ActivePolicy,
): EffectiveSeverity {
  const reported = diagnostic.severity;
  const ceiling = severityCeiling(policy, providerAuthority, isolation);
  if (ceiling === null || severityRank(reported) >= severityRank(ceiling.maxSeverity)) {
    return { severity: reported, reported };
  }
  return {
    severity: ceiling.maxSeverity,
    reported,
    severityNote: capNote(reported, ceiling),
  };
}

/** The `severityNote` text for a capped severity. */
export function capNote(reported: Severity, ceiling: SeverityCeiling): string {
  return `capped from ${reported} to ${ceiling.maxSeverity} by severityCaps[${ceiling.capIndex}] (${ceiling.because})`;
}
