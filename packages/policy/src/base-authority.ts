import {
  ASSURANCE_MODES,
  CALL_SITES,
  canonicalize,
  FAIL_CLASSES,
  type FailPolicyOutcome,
  type Policy,
} from "@asp/contracts";
import { assessPolicyChange, type PolicyChangeAssessment } from "./change.js";
import { type PolicyProblem, policyError } from "./errors.js";
import { failPolicyCell, stricterOutcome } from "./fail-policy.js";
import { type ActivePolicy, parsePolicy, requireActive, validatePolicy } from "./parse.js";

type Doc = Policy;
type Requirement = Doc["requirements"][number];

const union = <T>(a: ReadonlyArray<T>, b: ReadonlyArray<T>): T[] => [...new Set([...a, ...b])];
const minDefined = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.min(a, b);

function mergeRequirements(base: ReadonlyArray<Requirement>, floor: ReadonlyArray<Requirement>): Requirement[] {
  const out = base.map((r) => ({ ...r, sources: [...r.sources], callSites: [...r.callSites] }));
  for (const f of floor) {
    const r = out.find((x) => x.id === f.id);
    if (r === undefined) out.push({ ...f, sources: [...f.sources], callSites: [...f.callSites] });
    else {
      r.sources = union(r.sources, f.sources);
      r.callSites = union(r.callSites, f.callSites);
    }
  }
  return out;
}

function mergeFailPolicy(base: ActivePolicy, floor: ActivePolicy): Doc["failPolicy"] {
  const out: Record<string, Record<string, FailPolicyOutcome>> = {};
  for (const failClass of FAIL_CLASSES) {
    for (const site of CALL_SITES) {
      const setInEither =
        base.document.failPolicy?.[failClass]?.[site] !== undefined ||
        floor.document.failPolicy?.[failClass]?.[site] !== undefined;
      if (!setInEither) continue;
      const cell = stricterOutcome(
        failPolicyCell(base, failClass, site, { requiredSource: true }),
        failPolicyCell(floor, failClass, site, { requiredSource: true }),
      );
      const row = out[failClass] ?? {};
      row[site] = cell;
      out[failClass] = row;
    }
  }
  return out as Doc["failPolicy"];
}

/**
 * The policy that decides: `base` tightened by an organization `floor` (host §7 "plus any
 * organization-level non-weakenable floor"). The floor is a policy document too, but it may only
 * tighten: it pins no providers, grants nothing and loads no plugins. Requirements are merged
 * (union of sources and call-sites), fail-policy cells take the stricter outcome, assurance the
 * stronger mode, severity caps and credential fences add up, floor `deny`/`ask` rules are added
 * (its `allow` rules are not), the permission default is the stricter one, budgets the smaller,
 * and a floor `host` wins over the base's.
 *
 * @throws PolicyError `ASP_POLICY_FLOOR_GRANTS` when the floor pins providers, grants authority or
 *   grants plugins; `ASP_POLICY_NOT_ACTIVE` when either argument is not an {@link ActivePolicy}.
 */
export function applyFloor(base: ActivePolicy, floor: ActivePolicy): ActivePolicy {
  const b = requireActive(base, "base policy");
  const f = requireActive(floor, "organization floor");
  const fd = f.document;
  for (const section of ["providers", "grants", "plugins"] as const) {
    if ((fd[section] ?? []).length > 0) {
      throw policyError(
        "ASP_POLICY_FLOOR_GRANTS",
        `an organization floor only tightens: it may not contain ${section}; authority comes from the base policy`,
        { pointer: `/${section}` },
      );
    }
  }
  // A plain mutable copy of the frozen base document.
  const bd = JSON.parse(canonicalize(b.document)) as Doc;
  const merged: Doc = { ...bd, requirements: mergeRequirements(bd.requirements, fd.requirements as Requirement[]) };
  const failPolicy = mergeFailPolicy(b, f);
  if (failPolicy !== undefined && Object.keys(failPolicy).length > 0) merged.failPolicy = failPolicy;
  const assurance: Record<string, (typeof ASSURANCE_MODES)[number]> = { ...(bd.assurance ?? {}) };
  for (const site of CALL_SITES) {
    const want = fd.assurance?.[site];
    const have = assurance[site];
    if (want !== undefined && (have === undefined || ASSURANCE_MODES.indexOf(want) > ASSURANCE_MODES.indexOf(have))) {
      assurance[site] = want;
    }
  }
  if (Object.keys(assurance).length > 0) merged.assurance = assurance;
  const caps = [...(bd.severityCaps ?? [])];
  for (const cap of fd.severityCaps ?? []) {
    if (!caps.some((c) => canonicalize(c) === canonicalize(cap))) caps.push({ ...cap });
  }
  if (caps.length > 0) merged.severityCaps = caps;
  if (fd.permissions !== undefined || bd.permissions !== undefined) {
    const strict = { allow: 0, ask: 1, deny: 2 } as const;
    const bDefault = bd.permissions?.default ?? "ask";
    const fDefault = fd.permissions?.default ?? "ask";
    const rules = [...(bd.permissions?.rules ?? [])];
    for (const r of fd.permissions?.rules ?? []) {
      if (r.outcome !== "allow" && !rules.some((x) => canonicalize(x) === canonicalize(r))) rules.push({ ...r });
    }
    const fence = union(bd.permissions?.credentialFence ?? [], fd.permissions?.credentialFence ?? []);
    merged.permissions = {
      default: strict[fDefault] > strict[bDefault] ? fDefault : bDefault,
      rules,
      ...(fence.length > 0 ? { credentialFence: fence } : {}),
    };
  }
  if (fd.host !== undefined) merged.host = { ...fd.host };
  if (fd.budgets !== undefined) {
    const budgets: NonNullable<Doc["budgets"]> = { ...(bd.budgets ?? {}) };
    const numeric = [
      "callbacksPerRequest",
      "callbacksPerSession",
      "maxResponseBytes",
      "quarantineAfterFailures",
      "editRetries",
    ] as const;
    for (const key of numeric) {
      const v = minDefined(bd.budgets?.[key], fd.budgets[key]);
      if (v !== undefined) budgets[key] = v;
    }
    const timeouts: Record<string, number> = { ...(bd.budgets?.timeoutMs ?? {}) };
    for (const site of CALL_SITES) {
      const v = minDefined(bd.budgets?.timeoutMs?.[site], fd.budgets.timeoutMs?.[site]);
      if (v !== undefined) timeouts[site] = v;
    }
    if (Object.keys(timeouts).length > 0) budgets.timeoutMs = timeouts;
    merged.budgets = budgets;
  }
  return parsePolicy(merged, {
    origin: { kind: "floor", base: b.digest, floor: f.digest },
    what: "base policy with the organization floor",
  });
}

/** Options of {@link createBasePolicyAuthority}. */
export interface BasePolicyAuthorityOptions {
  /** The active policy of the target branch (read from a trusted source, never from the changeset). */
  readonly base: ActivePolicy;
  /** The organization-level non-weakenable floor, when there is one. */
  readonly floor?: ActivePolicy;
}

/** What a changeset's candidate policy amounts to under {@link BasePolicyAuthority}. */
export type PendingPolicy =
  | { readonly status: "pending"; readonly policy: ActivePolicy; readonly assessment: PolicyChangeAssessment }
  | { readonly status: "invalid"; readonly problems: ReadonlyArray<PolicyProblem> };

/** The result of {@link BasePolicyAuthority.evaluate}. */
export interface PolicyEvaluation {
  /** The policy that decides this changeset: always the base (with the floor), never the candidate. */
  readonly active: ActivePolicy;
  readonly pending: PendingPolicy;
}

/**
 * BasePolicyAuthority (host §7): the trusted base policy of the target branch plus an
 * organization floor decide every changeset, including one that edits policy.
 */
export interface BasePolicyAuthority {
  /** The deciding policy (base tightened by the floor). */
  readonly active: ActivePolicy;
  /**
   * Evaluate a changeset's candidate policy (JSON text or value): parse and validate it, and
   * report it as pending, with every self-authorization attempt against {@link active}. An
   * invalid candidate is reported with its problems; nothing in it is ever activated.
   */
  evaluate(candidate: unknown): PolicyEvaluation;
}

/**
 * Create the {@link BasePolicyAuthority} for a target branch.
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE` or `ASP_POLICY_FLOOR_GRANTS` (see {@link applyFloor}).
 * @example
 * ```ts
 * const authority = createBasePolicyAuthority({ base, floor });
 * const { active, pending } = authority.evaluate(candidateText);
 * if (pending.status === "pending" && pending.assessment.selfAuthorizing) { ... } // degraded: policy-self-authorization
 * ```
 */
export function createBasePolicyAuthority(options: BasePolicyAuthorityOptions): BasePolicyAuthority {
  const base = requireActive(options.base, "base policy");
  const active = options.floor === undefined ? base : applyFloor(base, options.floor);
  return Object.freeze({
    active,
    evaluate(candidate: unknown): PolicyEvaluation {
      const parsed = validatePolicy(candidate, { what: "candidate policy" });
      if (!parsed.ok)
        return Object.freeze({
          active,
          pending: Object.freeze({ status: "invalid" as const, problems: parsed.problems }),
        });
      return Object.freeze({
        active,
        pending: Object.freeze({
          status: "pending" as const,
          policy: parsed.policy,
          assessment: assessPolicyChange(active, parsed.policy),
        }),
      });
    },
  });
}
