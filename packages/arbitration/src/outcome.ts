import type { Decision } from "@asp/contracts";
import type { ArbitrationResult } from "./arbitrate.js";

/** The arbitration-level outcome and why. */
export interface ProvisionalDecision {
  readonly decision: Decision;
  /** One line per reason the decision is not `allow` (empty for `allow`). */
  readonly reasons: ReadonlyArray<string>;
}

/**
 * What arbitration alone lets a decision be: a necessary condition for `decide()`'s allow, never a
 * sufficient one (freshness, authority evidence and achieved assurance are checked there). `deny`
 * when an authorized provider reported a blocking finding on a requirement without a tie, or a
 * degraded required source's fail-policy cell says `deny`; otherwise `indeterminate` when a
 * requirement is tied or a degraded required source's cell says `indeterminate`; otherwise `allow`
 * (degradations whose cell is `open` are logged fail-opens, visible in `coverage.degraded`).
 *
 * @example
 * ```ts
 * provisionalDecision(arbitrate({ policy, callSite: "gate", runs })).decision; // "indeterminate"
 * ```
 */
export function provisionalDecision(result: ArbitrationResult): ProvisionalDecision {
  const deny: string[] = [];
  const indeterminate: string[] = [];
  for (const r of result.requirements) {
    if (r.tie) indeterminate.push(`${r.requirement}: authorized providers disagree`);
    else if (r.blocking > 0) deny.push(`${r.requirement}: ${r.blocking} blocking finding${r.blocking > 1 ? "s" : ""}`);
  }
  for (const f of result.failPolicy) {
    if (f.requirement === null || f.outcome === "open") continue;
    const line = `${f.requirement}: ${f.failClass}${f.provider === null ? "" : ` (${f.provider})`} -> ${f.outcome}`;
    (f.outcome === "deny" ? deny : indeterminate).push(line);
  }
  if (deny.length > 0) return { decision: "deny", reasons: [...deny, ...indeterminate] };
  if (indeterminate.length > 0) return { decision: "indeterminate", reasons: indeterminate };
  return { decision: "allow", reasons: [] };
}
