import {
  CALL_SITES,
  type CallSite,
  canonicalize,
  type DecisionEnvelope,
  type Digest,
  FAIL_CLASSES,
  type PermissionOutcome,
  SEVERITIES,
} from "@asp/contracts";
import { failPolicyCell, outcomeStrictness } from "./fail-policy.js";
import { toPointer } from "./json.js";
import { type ActivePolicy, type PolicyDocument, requireActive } from "./parse.js";
import { DEFAULT_CREDENTIAL_FENCE } from "./permissions.js";
import { assuranceRank, requiredAssurance } from "./requirements.js";

/** A `coverage.degraded[]` entry (the contracts `DegradedEntry` shape). */
export type DegradedEntry = DecisionEnvelope["coverage"]["degraded"][number];

/**
 * Every way a candidate policy can try to authorize the changeset that introduces it (host §7).
 * Each one, found by {@link assessPolicyChange}, degrades coverage with reason
 * `policy-self-authorization`.
 */
export const SELF_AUTHORIZATION_KINDS = [
  /** A grant to a pinned identity (id + version + digest) that holds no grant in the base policy. */
  "grants-new-provider",
  /** A new requirement × call-site cell for an identity the base already grants something: new blocking authority. */
  "adds-blocking-authority",
  /** A call-site's required assurance mode is lower than the base requires. */
  "lowers-assurance",
  /** A base requirement is gone. */
  "removes-requirement",
  /** A base requirement loses a call-site or a source, or changes capability. */
  "weakens-requirement",
  /** A fail-policy cell becomes `open`. */
  "opens-fail-policy-cell",
  /** A fail-policy cell becomes less strict without opening (`deny` -> `indeterminate`). */
  "weakens-fail-policy-cell",
  /** The `host` section (which trusted host implementation decides) differs from the base. */
  "selects-host-implementation",
  /** A severity cap is removed or raised, so a provider's findings may block where they could not. */
  "lifts-severity-cap",
  /** Auto Mode permissions become looser: a looser default, a new allow, a dropped deny/ask, a smaller fence. */
  "widens-permissions",
  /** A plugin id + digest may newly load, or load with more capabilities. */
  "grants-plugin",
] as const;

/** One of {@link SELF_AUTHORIZATION_KINDS}. */
export type SelfAuthorizationKind = (typeof SELF_AUTHORIZATION_KINDS)[number];

/** One self-authorization attempt found in a candidate policy. */
export interface SelfAuthorizationAttempt {
  readonly kind: SelfAuthorizationKind;
  /** Which document `pointer` points into: the candidate, or the base for something removed. */
  readonly document: "base" | "candidate";
  readonly pointer: string;
  readonly requirement?: string;
  readonly provider?: string;
  readonly callSite?: CallSite;
  readonly detail: string;
}

/** One difference between base and candidate, self-authorizing or not. */
export interface PolicyChange {
  readonly section: string;
  readonly change: "added" | "removed" | "changed";
  /** What changed inside the section (requirement id, provider id, `timed_out.gate` ...). */
  readonly key: string;
  readonly document: "base" | "candidate";
  readonly pointer: string;
  /** True when this change is (or contains) a self-authorization attempt. */
  readonly selfAuthorization: boolean;
}

/** The result of {@link assessPolicyChange}: the candidate stays pending whatever it says. */
export interface PolicyChangeAssessment {
  readonly status: "pending";
  /** Digest of the policy that decides (the base, tightened by the floor when one is given). */
  readonly base: Digest;
  readonly candidate: Digest;
  readonly attempts: ReadonlyArray<SelfAuthorizationAttempt>;
  readonly changes: ReadonlyArray<PolicyChange>;
  /** One entry per attempt, reason `policy-self-authorization`, ready for `coverage.degraded[]`. */
  readonly degraded: ReadonlyArray<DegradedEntry>;
  readonly selfAuthorizing: boolean;
}

/** The requirement id degraded entries name when an attempt is about the policy as a whole. */
export const POLICY_REQUIREMENT = "asp.policy";

const PERMISSION_STRICTNESS: Record<PermissionOutcome, number> = { allow: 0, ask: 1, deny: 2 };

type Doc = PolicyDocument;
type Grant = Doc["grants"][number];
type Rule = NonNullable<Doc["permissions"]>["rules"][number];

const same = (a: unknown, b: unknown): boolean => canonicalize(a ?? null) === canonicalize(b ?? null);
const pinKey = (id: string, version: string, digest: string): string => `${id}\u0000${version}\u0000${digest}`;
const grantPin = (g: Grant): string => pinKey(g.provider, g.version, g.digest);

function grantAttempts(base: Doc, cand: Doc, out: SelfAuthorizationAttempt[]): void {
  const baseCells = new Set<string>();
  const basePins = new Set<string>();
  for (const g of base.grants) {
    basePins.add(grantPin(g));
    for (const site of g.callSites) baseCells.add(`${grantPin(g)}\u0000${g.requirement}\u0000${site}`);
  }
  cand.grants.forEach((g, i) => {
    if (!basePins.has(grantPin(g))) {
      out.push({
        kind: "grants-new-provider",
        document: "candidate",
        pointer: `/grants/${i}`,
        requirement: g.requirement,
        provider: g.provider,
        detail: `grants ${g.requirement} at ${g.callSites.join(", ")} to ${g.provider}@${g.version} (${g.digest.slice(0, 19)}…), an identity the base policy grants nothing`,
      });
      return;
    }
    g.callSites.forEach((site, j) => {
      if (baseCells.has(`${grantPin(g)}\u0000${g.requirement}\u0000${site}`)) return;
      out.push({
        kind: "adds-blocking-authority",
        document: "candidate",
        pointer: `/grants/${i}/callSites/${j}`,
        requirement: g.requirement,
        provider: g.provider,
        callSite: site,
        detail: `makes ${g.provider}@${g.version} an authority for ${g.requirement} at ${site}`,
      });
    });
  });
}

function requirementAttempts(base: Doc, cand: Doc, out: SelfAuthorizationAttempt[]): void {
  const byId = new Map(cand.requirements.map((r, i) => [r.id, { r, i }]));
  base.requirements.forEach((r, i) => {
    const c = byId.get(r.id);
    if (c === undefined) {
      out.push({
        kind: "removes-requirement",
        document: "base",
        pointer: `/requirements/${i}`,
        requirement: r.id,
        detail: `removes requirement ${r.id} (required at ${r.callSites.join(", ")})`,
      });
      return;
    }
    const lostSites = r.callSites.filter((s) => !c.r.callSites.includes(s));
    for (const site of lostSites) {
      out.push({
        kind: "weakens-requirement",
        document: "candidate",
        pointer: `/requirements/${c.i}/callSites`,
        requirement: r.id,
        callSite: site,
        detail: `requirement ${r.id} is no longer required at ${site}`,
      });
    }
    const lostSources = r.sources.filter((s) => !c.r.sources.includes(s));
    if (lostSources.length > 0) {
      out.push({
        kind: "weakens-requirement",
        document: "candidate",
        pointer: `/requirements/${c.i}/sources`,
        requirement: r.id,
        detail: `requirement ${r.id} no longer requires source${lostSources.length > 1 ? "s" : ""} ${lostSources.join(", ")}`,
      });
    }
    if (c.r.capability !== r.capability) {
      out.push({
        kind: "weakens-requirement",
        document: "candidate",
        pointer: `/requirements/${c.i}/capability`,
        requirement: r.id,
        detail: `requirement ${r.id} changes capability from ${r.capability} to ${c.r.capability}`,
      });
    }
  });
}

function assuranceAttempts(base: ActivePolicy, cand: ActivePolicy, out: SelfAuthorizationAttempt[]): void {
  for (const site of CALL_SITES) {
    const was = requiredAssurance(base, site);
    const now = requiredAssurance(cand, site);
    if (assuranceRank(now) < assuranceRank(was)) {
      out.push({
        kind: "lowers-assurance",
        document: "candidate",
        pointer: `/assurance/${site}`,
        callSite: site,
        detail: `required assurance at ${site} drops from ${was} to ${now}`,
      });
    }
  }
}

function failPolicyAttempts(base: ActivePolicy, cand: ActivePolicy, out: SelfAuthorizationAttempt[]): void {
  for (const failClass of FAIL_CLASSES) {
    for (const site of CALL_SITES) {
      const was = failPolicyCell(base, failClass, site, { requiredSource: true });
      const now = failPolicyCell(cand, failClass, site, { requiredSource: true });
      if (outcomeStrictness(now) >= outcomeStrictness(was)) continue;
      out.push({
        kind: now === "open" ? "opens-fail-policy-cell" : "weakens-fail-policy-cell",
        document: "candidate",
        pointer: toPointer(["failPolicy", failClass, site]),
        callSite: site,
        detail: `fail-policy ${failClass} at ${site} goes from ${was} to ${now}`,
      });
    }
  }
}

function hostAttempts(base: Doc, cand: Doc, out: SelfAuthorizationAttempt[]): void {
  if (same(base.host, cand.host)) return;
  const name = (h: Doc["host"]): string =>
    h === undefined ? "the built-in host" : `${h.implementation}${h.version === undefined ? "" : `@${h.version}`}`;
  out.push({
    kind: "selects-host-implementation",
    document: cand.host === undefined ? "base" : "candidate",
    pointer: "/host",
    detail: `selects ${name(cand.host)} instead of ${name(base.host)}`,
  });
}

function capAttempts(base: Doc, cand: Doc, out: SelfAuthorizationAttempt[]): void {
  const rank = (s: (typeof SEVERITIES)[number]): number => SEVERITIES.indexOf(s);
  (base.severityCaps ?? []).forEach((cap, i) => {
    const kept = (cand.severityCaps ?? []).some(
      (c) =>
        c.provider === cap.provider &&
        c.authority === cap.authority &&
        c.isolation === cap.isolation &&
        rank(c.maxSeverity) >= rank(cap.maxSeverity),
    );
    if (kept) return;
    const selector =
      [
        cap.provider && `provider ${cap.provider}`,
        cap.authority && `authority ${cap.authority}`,
        cap.isolation && `isolation ${cap.isolation}`,
      ]
        .filter(Boolean)
        .join(", ") || "every provider";
    out.push({
      kind: "lifts-severity-cap",
      document: "base",
      pointer: `/severityCaps/${i}`,
      ...(cap.provider === undefined ? {} : { provider: cap.provider }),
      detail: `lifts the cap of ${selector} at ${cap.maxSeverity}`,
    });
  });
}

function permissionAttempts(base: Doc, cand: Doc, out: SelfAuthorizationAttempt[]): void {
  const baseDefault = base.permissions?.default ?? "ask";
  const candDefault = cand.permissions?.default ?? "ask";
  if (PERMISSION_STRICTNESS[candDefault] < PERMISSION_STRICTNESS[baseDefault]) {
    out.push({
      kind: "widens-permissions",
      document: "candidate",
      pointer: "/permissions/default",
      detail: `the permission default goes from ${baseDefault} to ${candDefault}`,
    });
  }
  const baseRules = base.permissions?.rules ?? [];
  const candRules = cand.permissions?.rules ?? [];
  const has = (rules: ReadonlyArray<Rule>, r: Rule): boolean => rules.some((x) => same(x, r));
  baseRules.forEach((r, i) => {
    if (r.outcome !== "allow" && !has(candRules, r)) {
      out.push({
        kind: "widens-permissions",
        document: "base",
        pointer: `/permissions/rules/${i}`,
        detail: `drops the ${r.outcome} rule for ${r.tool}${r.path ? ` ${r.path}` : ""}${r.network ? ` ${r.network}` : ""}`,
      });
    }
  });
  candRules.forEach((r, i) => {
    if (has(baseRules, r)) return;
    if (r.outcome === "allow" || (r.outcome === "ask" && baseDefault === "deny")) {
      out.push({
        kind: "widens-permissions",
        document: "candidate",
        pointer: `/permissions/rules/${i}`,
        detail: `adds an ${r.outcome} rule for ${r.tool}${r.path ? ` ${r.path}` : ""}${r.network ? ` ${r.network}` : ""}`,
      });
    }
  });
  const candFence = new Set([...DEFAULT_CREDENTIAL_FENCE, ...(cand.permissions?.credentialFence ?? [])]);
  (base.permissions?.credentialFence ?? []).forEach((glob, i) => {
    if (!candFence.has(glob)) {
      out.push({
        kind: "widens-permissions",
        document: "base",
        pointer: `/permissions/credentialFence/${i}`,
        detail: `removes ${glob} from the credential fence`,
      });
    }
  });
}

function pluginAttempts(base: Doc, cand: Doc, out: SelfAuthorizationAttempt[]): void {
  (cand.plugins ?? []).forEach((p, i) => {
    const was = (base.plugins ?? []).find((b) => b.id === p.id && b.digest === p.digest);
    if (was === undefined) {
      out.push({
        kind: "grants-plugin",
        document: "candidate",
        pointer: `/plugins/${i}`,
        detail: `lets plugin ${p.id} (${p.digest.slice(0, 19)}…) load with ${p.capabilities.join(", ")}`,
      });
      return;
    }
    const added = p.capabilities.filter((c) => !was.capabilities.includes(c));
    if (added.length > 0) {
      out.push({
        kind: "grants-plugin",
        document: "candidate",
        pointer: `/plugins/${i}/capabilities`,
        detail: `gives plugin ${p.id} ${added.join(", ")}`,
      });
    }
  });
}

// ------------------------------------------------------------------ plain differences

function keyedChanges<T>(
  section: string,
  base: ReadonlyArray<T>,
  cand: ReadonlyArray<T>,
  key: (t: T) => string,
  out: Array<Omit<PolicyChange, "selfAuthorization">>,
): void {
  const candByKey = new Map(cand.map((t, i) => [key(t), { t, i }]));
  const baseKeys = new Set<string>();
  base.forEach((t, i) => {
    const k = key(t);
    baseKeys.add(k);
    const c = candByKey.get(k);
    if (c === undefined)
      out.push({ section, change: "removed", key: k, document: "base", pointer: `/${section}/${i}` });
    else if (!same(t, c.t)) {
      out.push({ section, change: "changed", key: k, document: "candidate", pointer: `/${section}/${c.i}` });
    }
  });
  cand.forEach((t, i) => {
    const k = key(t);
    if (!baseKeys.has(k))
      out.push({ section, change: "added", key: k, document: "candidate", pointer: `/${section}/${i}` });
  });
}

function objectChanges(
  section: string,
  base: Readonly<Record<string, unknown>> | undefined,
  cand: Readonly<Record<string, unknown>> | undefined,
  out: Array<Omit<PolicyChange, "selfAuthorization">>,
  prefix: string[] = [section],
): void {
  const keys = [...new Set([...Object.keys(base ?? {}), ...Object.keys(cand ?? {})])].sort();
  for (const k of keys) {
    const b = base?.[k];
    const c = cand?.[k];
    if (same(b, c)) continue;
    const nested =
      typeof b === "object" &&
      b !== null &&
      !Array.isArray(b) &&
      typeof c === "object" &&
      c !== null &&
      !Array.isArray(c);
    if (nested) {
      objectChanges(section, b as Record<string, unknown>, c as Record<string, unknown>, out, [...prefix, k]);
      continue;
    }
    const change = b === undefined ? "added" : c === undefined ? "removed" : "changed";
    out.push({
      section,
      change,
      key: [...prefix.slice(1), k].join("."),
      document: change === "removed" ? "base" : "candidate",
      pointer: toPointer([...prefix, k]),
    });
  }
}

function plainChanges(base: Doc, cand: Doc): Array<Omit<PolicyChange, "selfAuthorization">> {
  const out: Array<Omit<PolicyChange, "selfAuthorization">> = [];
  if (!same(base.description, cand.description)) {
    out.push({
      section: "description",
      change: "changed",
      key: "description",
      document: "candidate",
      pointer: "/description",
    });
  }
  keyedChanges("requirements", base.requirements, cand.requirements, (r) => r.id, out);
  keyedChanges("providers", base.providers, cand.providers, (p) => p.id, out);
  keyedChanges("grants", base.grants, cand.grants, (g) => `${g.provider} -> ${g.requirement}`, out);
  keyedChanges("severityCaps", base.severityCaps ?? [], cand.severityCaps ?? [], (c) => canonicalize(c), out);
  objectChanges("failPolicy", base.failPolicy, cand.failPolicy, out);
  objectChanges("assurance", base.assurance, cand.assurance, out);
  keyedChanges("plugins", base.plugins ?? [], cand.plugins ?? [], (p) => p.id, out);
  if (!same(base.permissions?.default, cand.permissions?.default)) {
    out.push({
      section: "permissions",
      change: cand.permissions === undefined ? "removed" : base.permissions === undefined ? "added" : "changed",
      key: "default",
      document: cand.permissions === undefined ? "base" : "candidate",
      pointer: "/permissions/default",
    });
  }
  const rulesBase = base.permissions?.rules ?? [];
  const rulesCand = cand.permissions?.rules ?? [];
  rulesBase.forEach((r, i) => {
    if (!rulesCand.some((x) => same(x, r))) {
      out.push({
        section: "permissions",
        change: "removed",
        key: `rule ${r.outcome} ${r.tool}`,
        document: "base",
        pointer: `/permissions/rules/${i}`,
      });
    }
  });
  rulesCand.forEach((r, i) => {
    if (!rulesBase.some((x) => same(x, r))) {
      out.push({
        section: "permissions",
        change: "added",
        key: `rule ${r.outcome} ${r.tool}`,
        document: "candidate",
        pointer: `/permissions/rules/${i}`,
      });
    }
  });
  const fenceBase = base.permissions?.credentialFence ?? [];
  const fenceCand = cand.permissions?.credentialFence ?? [];
  fenceBase.forEach((g, i) => {
    if (!fenceCand.includes(g)) {
      out.push({
        section: "permissions",
        change: "removed",
        key: `fence ${g}`,
        document: "base",
        pointer: `/permissions/credentialFence/${i}`,
      });
    }
  });
  fenceCand.forEach((g, i) => {
    if (!fenceBase.includes(g)) {
      out.push({
        section: "permissions",
        change: "added",
        key: `fence ${g}`,
        document: "candidate",
        pointer: `/permissions/credentialFence/${i}`,
      });
    }
  });
  if (!same(base.host, cand.host)) {
    out.push({
      section: "host",
      change: base.host === undefined ? "added" : cand.host === undefined ? "removed" : "changed",
      key: "host",
      document: cand.host === undefined ? "base" : "candidate",
      pointer: "/host",
    });
  }
  objectChanges("budgets", base.budgets, cand.budgets, out);
  return out;
}

const within = (pointer: string, root: string): boolean => pointer === root || pointer.startsWith(`${root}/`);

function degradedOf(a: SelfAuthorizationAttempt): DegradedEntry {
  const detail = `${a.kind}: ${a.detail}`;
  return {
    ...(a.provider === undefined ? {} : { provider: a.provider }),
    requirement: a.requirement ?? POLICY_REQUIREMENT,
    reason: "policy-self-authorization",
    failClass: "policy_self_authorization",
    failOpen: false,
    detail: detail.length > 2000 ? `${detail.slice(0, 1999)}…` : detail,
  };
}

/**
 * Compare a candidate policy (from the changeset) with the base policy that decides it
 * (host §7, BasePolicyAuthority). The candidate stays `pending`: this never activates it. Every
 * self-authorization attempt is listed (see {@link SELF_AUTHORIZATION_KINDS}) with a degraded
 * entry of reason `policy-self-authorization` each; every other difference is listed as a
 * plain change. Effective values are compared, so spelling out a built-in default is no change.
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE` when either argument is not an {@link ActivePolicy}.
 * @example
 * ```ts
 * const r = assessPolicyChange(base, parsePolicy(candidateText));
 * if (r.selfAuthorizing) coverage.degraded.push(...r.degraded); // gate: indeterminate or deny
 * ```
 */
export function assessPolicyChange(base: ActivePolicy, candidate: ActivePolicy): PolicyChangeAssessment {
  const b = requireActive(base, "base policy");
  const c = requireActive(candidate, "candidate policy");
  const attempts: SelfAuthorizationAttempt[] = [];
  grantAttempts(b.document, c.document, attempts);
  requirementAttempts(b.document, c.document, attempts);
  assuranceAttempts(b, c, attempts);
  failPolicyAttempts(b, c, attempts);
  hostAttempts(b.document, c.document, attempts);
  capAttempts(b.document, c.document, attempts);
  permissionAttempts(b.document, c.document, attempts);
  pluginAttempts(b.document, c.document, attempts);
  const changes: PolicyChange[] = plainChanges(b.document, c.document).map((ch) => ({
    ...ch,
    selfAuthorization: attempts.some(
      (a) =>
        // Array indexes differ between the two documents; object paths (failPolicy, assurance,
        // host, budgets) name the same place in both.
        (a.document === ch.document || !/\/\d+(?:\/|$)/.test(a.pointer)) &&
        (within(a.pointer, ch.pointer) || within(ch.pointer, a.pointer)),
    ),
  }));
  return Object.freeze({
    status: "pending" as const,
    base: b.digest,
    candidate: c.digest,
    attempts: Object.freeze(attempts),
    changes: Object.freeze(changes),
    degraded: Object.freeze(attempts.map(degradedOf)),
    selfAuthorizing: attempts.length > 0,
  });
}
