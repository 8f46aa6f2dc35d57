import type { Changeset, ObjectStore } from "@asp/evidence";
import { type ActivePolicy, assessPolicyChange, POLICY_REQUIREMENT, validatePolicy } from "@asp/policy";
import type { RequirementFailure } from "./decide.js";

/**
 * host §7 (BasePolicyAuthority): when the change under evaluation edits the repository's own
 * policy file, that candidate is parsed and assessed against the active base policy; it never
 * decides this change. Every self-authorization attempt (a new provider granted blocking
 * authority, lowered assurance, a weakened requirement or call-site, an opened fail-policy
 * cell, a privileged host implementation ...) becomes a `policy_self_authorization` failure on
 * the requirement it touches; a candidate that does not parse is `malformed`. Returns nothing
 * when the change does not touch `path` or deletes it.
 */
export async function candidatePolicyFailures(
  active: ActivePolicy,
  changeset: Changeset | null,
  path: string,
  objects: ObjectStore,
): Promise<RequirementFailure[]> {
  const change = changeset?.changes.find((c) => c.path === path);
  if (change === undefined || change.after === null) return [];
  const text = new TextDecoder().decode(await objects.readBlob(change.after.digest));
  const candidate = validatePolicy(text, { what: `candidate policy ${path}`, origin: { kind: "inline" } });
  if (!candidate.ok) {
    const first = candidate.problems[0];
    return [
      {
        requirement: POLICY_REQUIREMENT,
        failClass: "malformed",
        detail:
          `candidate policy ${path} is pending and invalid: ${first?.pointer ?? ""} ${first?.message ?? ""}`.trim(),
      },
    ];
  }
  const assessment = assessPolicyChange(active, candidate.policy);
  return assessment.attempts.map((a) => ({
    requirement: a.requirement ?? POLICY_REQUIREMENT,
    failClass: "policy_self_authorization" as const,
    detail: `candidate policy ${path} (pending) ${a.kind} at ${a.pointer}: ${a.detail}; it cannot authorize the change that introduces it`,
  }));
}
