import { lstatSync } from "node:fs";
import { basename, dirname, relative, sep } from "node:path";
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
 * when the change does not touch `path` (each of them, given several) or deletes it.
 */
export async function candidatePolicyFailures(
  active: ActivePolicy,
  changeset: Changeset | null,
  path: string | readonly string[],
  objects: ObjectStore,
): Promise<RequirementFailure[]> {
  if (typeof path !== "string") {
    const out: RequirementFailure[] = [];
    for (const p of new Set(path)) out.push(...(await candidatePolicyFailures(active, changeset, p, objects)));
    return out;
  }
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

/** The policy fields of a host configuration, as {@link candidatePolicyPaths} reads them. */
export interface CandidatePolicySetting {
  /** The trusted policy: an absolute file path, or a base-revision `{ git, path }`. */
  readonly policy: string | { readonly git: string; readonly path: string };
  /** An explicit candidate policy path, `null` when not set, `false` for none at all. */
  readonly candidatePolicy: string | false | null;
}

function isGitTop(dir: string): boolean {
  try {
    lstatSync(`${dir}${sep}.git`);
    return true;
  } catch {
    return false;
  }
}

/**
 * The repository-relative "twin" of a trusted policy file: its path inside the git work tree that
 * holds it (a trusted checkout of the protected branch, outside the repository under evaluation),
 * or, outside any work tree, its file name at the repository root.
 */
function twinOf(file: string): string {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    if (isGitTop(dir)) return relative(dir, file).split(sep).join("/");
    if (dirname(dir) === dir) return basename(file);
  }
}

/**
 * The repository-relative policy files a change is checked against as pending candidates (host
 * §7), derived from trusted configuration so that self-authorization never depends on an operator
 * remembering to name the file: the explicit `candidatePolicy`, plus the trusted policy's own path
 * in the repository (a base-revision policy's `path`; for a policy file when no `candidatePolicy`
 * is set, its path in the work tree that holds it, else its file name at the root). `false`: none.
 * @example
 * ```ts
 * candidatePolicyPaths({ policy: { git: id, path: ".ci/self-gate.policy.json" }, candidatePolicy: null });
 * // [".ci/self-gate.policy.json"]
 * ```
 */
export function candidatePolicyPaths(setting: CandidatePolicySetting): string[] {
  const { policy, candidatePolicy } = setting;
  if (candidatePolicy === false) return [];
  const paths = candidatePolicy === null ? [] : [candidatePolicy];
  if (typeof policy !== "string") paths.push(policy.path);
  else if (candidatePolicy === null) paths.push(twinOf(policy));
  return [...new Set(paths)];
}
