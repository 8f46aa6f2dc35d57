import {
  type Assessment,
  type AssuranceMode,
  CALL_SITES,
  type CallSite,
  type CapabilityFamily,
  type Decision,
  type DecisionEnvelope,
  type DegradationReason,
  type Diagnostic,
  degradationReasonOf,
  FAIL_CLASSES,
  type FailClass,
  type FailPolicyOutcome,
  type ProviderState,
} from "@asp/contracts";
import { type ActivePolicy, DEFAULT_FAIL_POLICY, failPolicyCell } from "@asp/policy";
import {
  assuranceAtLeast,
  effectiveSeverity,
  type RequiredRequirement,
  requiredAssurance,
  type VerifiedGrant,
} from "./policy-view.js";
import { reconcile } from "./reconcile.js";

// ============================================================================ the fail table
//
// host §2 / DESIGN §4: typed failure × call-site -> open | indeterminate | deny. Trusted policy
// (`failPolicy`) overrides a cell; the built-in table fills the rest; the FLOOR holds whatever
// either says: no gate cell ever opens for a required requirement.

/**
 * The built-in fail table (owned by `@asp/policy`, DESIGN §4), used for every cell trusted policy
 * leaves out. `interactive` is warn-allow for availability failures and indeterminate when the
 * answer cannot be trusted; `gate` and `sweep` are never `open`; `malformed` and
 * `policy_self_authorization` deny.
 */
export const DEFAULT_FAIL_TABLE = DEFAULT_FAIL_POLICY;

/**
 * The fail-policy cell for a failure of a REQUIRED requirement: the policy's cell, else the
 * built-in one. The floor is enforced here too, whatever the policy module returns: a gate cell
 * never opens.
 */
export function failCell(policy: ActivePolicy, failClass: FailClass, callSite: CallSite): FailPolicyOutcome {
  const outcome = failPolicyCell(policy, failClass, callSite, { requiredSource: true });
  return callSite === "gate" && outcome === "open" ? "indeterminate" : outcome;
}

/** The complete effective fail table of a policy (every fail class × call-site). */
export function failTable(policy: ActivePolicy): Record<FailClass, Record<CallSite, FailPolicyOutcome>> {
  const out = {} as Record<FailClass, Record<CallSite, FailPolicyOutcome>>;
  for (const c of FAIL_CLASSES) {
    out[c] = { interactive: "open", gate: "indeterminate", sweep: "indeterminate" };
    for (const s of CALL_SITES) out[c][s] = failCell(policy, c, s);
  }
  return out;
}

// ============================================================================ decide()

/** What one provider contributed to an evaluation. */
export interface ProviderEvaluation {
  readonly provider: { readonly id: string; readonly version: string; readonly digest: string };
  readonly capability: CapabilityFamily;
  readonly state: ProviderState;
  /** Sources declared at initialize and allowed by the trusted manifest. */
  readonly declaredSources: readonly string[];
  /** Grants verified against the provider's pinned identity, at this call-site. */
  readonly grants: readonly VerifiedGrant[];
  readonly authority: AuthorityEvidence;
  /** A validated, fresh assessment; or the typed failure. Stale answers arrive as failures. */
  readonly outcome:
    | { readonly kind: "ok"; readonly assessment: Assessment }
    | { readonly kind: "failed"; readonly failClass: FailClass; readonly detail: string };
  /** A local subprocess that can write the real worktree (host §3). */
  readonly directWrite: boolean;
}

/** A failure the host found on a requirement rather than a provider (e.g. policy self-authorization). */
export interface RequirementFailure {
  readonly requirement: string;
  readonly failClass: FailClass;
  readonly detail: string;
}

/** Everything {@link decide} needs; nothing else influences the decision. */
export interface DecideInput {
  readonly callSite: CallSite;
  readonly policy: ActivePolicy;
  readonly baseline: string;
  readonly changeset: string | null;
  readonly required: readonly RequiredRequirement[];
  readonly providers: readonly ProviderEvaluation[];
  /** The assurance mode the host actually achieved (never more than it can enforce). */
  readonly assurance: { readonly mode: AssuranceMode; readonly directWriteRisk: boolean };
  readonly requirementFailures?: readonly RequirementFailure[];
  readonly decisionId: string;
  readonly decidedAt: string;
}

/** One fail-open: logged with provider id, failClass and call-site (host §2), and kept in the receipt. */
export interface FailOpen {
  /** The provider id, or `requirement:<id>` when no provider was there to fail. */
  readonly provider: string;
  readonly failClass: FailClass;
  readonly callSite: CallSite;
  readonly requirement?: string;
  readonly detail: string;
}

/** The decision and what it opened. */
export interface DecideResult {
  readonly envelope: DecisionEnvelope;
  readonly failOpens: readonly FailOpen[];
}

type Degraded = DecisionEnvelope["coverage"]["degraded"][number];
type AuthorityEvidence = DecisionEnvelope["authority"][number];
type Finding = DecisionEnvelope["findings"][number];

const STATUS_FAILURE: Readonly<Record<Exclude<Assessment["status"], "complete">, FailClass>> = {
  incomplete: "incomplete",
  unsupported: "unsupported",
  error: "errored",
};

const clip = (s: string, n = 2000): string => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** The guaranteed next step of a gating finding: the provider's fix, help or link, else host-synthesized. */
export function nextStepFor(d: Diagnostic, provider: string): string {
  if (d.fix !== undefined) return clip(`Fix: ${d.fix.description}`, 4000);
  if (d.help !== undefined && d.help.trim() !== "") return clip(d.help, 4000);
  if (d.codeDescription !== undefined) return clip(`See ${d.codeDescription.href}`, 4000);
  const where =
    d.range === undefined ? "" : ` at ${d.range.path}:${d.range.start.line + 1}:${d.range.start.character + 1}`;
  return clip(
    `Resolve ${d.code}${where} (reported by ${provider} under source ${d.source}), then run the check again.`,
    4000,
  );
}

/**
 * The host's decision (host §1, §2, §3), as a pure function of its input: allow only when every
 * required requirement ran on a fresh, valid, complete assessment of a granted provider, no
 * required coverage is degraded (unless the fail table lets it open, which a gate never does),
 * nothing blocks, authority evidence is present and achieved assurance satisfies the call-site.
 */
export function decide(input: DecideInput): DecideResult {
  const { callSite, policy } = input;
  const degraded: Degraded[] = [];
  const failOpens: FailOpen[] = [];
  const cells: FailPolicyOutcome[] = [];
  const byId = new Map(input.providers.map((p) => [p.provider.id, p]));

  // Arbitration first: source ownership and dedup. An ownership violation is malformed data.
  const fresh = input.providers.filter(
    (p): p is ProviderEvaluation & { outcome: { kind: "ok"; assessment: Assessment } } => p.outcome.kind === "ok",
  );
  const arbitration = reconcile(
    fresh.map((p) => ({
      provider: p.provider.id,
      declaredSources: p.declaredSources,
      diagnostics: p.outcome.assessment.diagnostics,
    })),
  );
  const ownershipViolations = new Map<string, string>();
  for (const d of arbitration.dropped) {
    if (d.reason === "undeclared-source" && !ownershipViolations.has(d.provider)) {
      ownershipViolations.set(
        d.provider,
        `diagnostic ${d.diagnostic.code} under undeclared source ${d.diagnostic.source}`,
      );
    }
  }

  /** The provider's failure, if any: transport/validation failure, status, or ownership. */
  const failureOf = (p: ProviderEvaluation): { failClass: FailClass; detail: string } | null => {
    if (p.outcome.kind === "failed") return { failClass: p.outcome.failClass, detail: p.outcome.detail };
    const violation = ownershipViolations.get(p.provider.id);
    if (violation !== undefined) return { failClass: "malformed", detail: violation };
    const status = p.outcome.assessment.status;
    if (status !== "complete") {
      const err = p.outcome.assessment.error;
      return {
        failClass: STATUS_FAILURE[status],
        detail: err === undefined ? `assessment status ${status}` : `assessment status ${status}: ${err.code}`,
      };
    }
    return null;
  };

  const push = (entry: Omit<Degraded, "reason" | "failOpen"> & { failClass: FailClass }, required: boolean) => {
    const reason: DegradationReason = degradationReasonOf(entry.failClass);
    if (!required) {
      degraded.push({ ...entry, reason, failOpen: false });
      return;
    }
    const cell = failCell(policy, entry.failClass, callSite);
    cells.push(cell);
    const failOpen = cell === "open";
    degraded.push({ ...entry, reason, failOpen });
    if (failOpen) {
      failOpens.push({
        provider: entry.provider ?? `requirement:${entry.requirement}`,
        failClass: entry.failClass,
        callSite,
        ...(entry.requirement === undefined ? {} : { requirement: entry.requirement }),
        detail: entry.detail ?? "",
      });
    }
  };

  const detailOf = (s: string): { detail: string } => ({ detail: clip(s) });
  const ran: string[] = [];
  const requiredProviders = new Set<string>();

  for (const req of input.required) {
    const granted = input.providers.filter((p) => p.grants.some((g) => g.requirement === req.id));
    let satisfied = granted.length > 0;
    if (granted.length === 0) {
      const candidates = input.providers.filter(
        (p) => p.capability === req.capability && req.sources.some((s) => p.declaredSources.includes(s)),
      );
      if (candidates.length > 0) {
        for (const p of candidates) {
          push(
            {
              provider: p.provider.id,
              requirement: req.id,
              failClass: "missing_authority",
              capability: req.capability,
              providerState: p.state,
              ...detailOf(
                `no trusted-policy grant pins ${p.provider.id}@${p.provider.version} for ${req.id} at ${callSite}`,
              ),
            },
            true,
          );
        }
      } else {
        push(
          {
            requirement: req.id,
            failClass: "missing",
            capability: req.capability,
            ...detailOf(`no granted provider for requirement ${req.id} (sources ${req.sources.join(", ")})`),
          },
          true,
        );
      }
      continue;
    }
    for (const p of granted) {
      requiredProviders.add(p.provider.id);
      const base = { provider: p.provider.id, requirement: req.id, capability: req.capability, providerState: p.state };
      const failure = failureOf(p);
      if (failure !== null) {
        satisfied = false;
        push({ ...base, failClass: failure.failClass, ...detailOf(failure.detail) }, true);
        continue;
      }
      if (p.authority.identity !== "verified" || p.authority.authorityGrant !== "verified") {
        satisfied = false;
        push({ ...base, failClass: "missing_authority", ...detailOf("authority evidence is incomplete") }, true);
        continue;
      }
      const a = (p.outcome as { assessment: Assessment }).assessment;
      const covered = new Set(a.coverage?.sources ?? p.declaredSources);
      const uncovered = req.sources.filter((s) => !p.declaredSources.includes(s) || !covered.has(s));
      if (uncovered.length > 0) {
        satisfied = false;
        const failClass: FailClass = uncovered.some((s) => !p.declaredSources.includes(s))
          ? "unsupported"
          : "incomplete";
        push({ ...base, failClass, ...detailOf(`required sources not covered: ${uncovered.join(", ")}`) }, true);
      }
    }
    if (satisfied) ran.push(req.id);
  }

  // Failures the host found on a requirement itself (host §7 policy self-authorization ...).
  for (const f of input.requirementFailures ?? []) {
    push({ requirement: f.requirement, failClass: f.failClass, ...detailOf(f.detail) }, true);
    const i = ran.indexOf(f.requirement);
    if (i >= 0) ran.splice(i, 1);
  }

  // Optional providers: their loss reduces coverage visibly but does not gate (host §2).
  for (const p of input.providers) {
    if (requiredProviders.has(p.provider.id)) continue;
    const failure = failureOf(p);
    if (failure === null) continue;
    push(
      {
        provider: p.provider.id,
        failClass: failure.failClass,
        capability: p.capability,
        providerState: p.state,
        ...detailOf(`optional provider: ${failure.detail}`),
      },
      false,
    );
  }

  // host §3: achieved assurance must satisfy the call-site; direct write risk caps it.
  const needed = requiredAssurance(policy, callSite);
  if (input.required.length > 0 && !assuranceAtLeast(input.assurance.mode, needed)) {
    const risky = input.providers.filter((p) => requiredProviders.has(p.provider.id) && p.directWrite);
    if (risky.length > 0) {
      for (const p of risky) {
        push(
          {
            provider: p.provider.id,
            failClass: "direct_write_risk",
            capability: p.capability,
            providerState: p.state,
            ...detailOf(
              `a local subprocess can write the worktree: at most ${input.assurance.mode}, ${callSite} needs ${needed}`,
            ),
          },
          true,
        );
      }
    } else {
      for (const req of input.required) {
        push(
          {
            requirement: req.id,
            failClass: "insufficient_assurance",
            ...detailOf(`achieved ${input.assurance.mode}, ${callSite} needs ${needed}`),
          },
          true,
        );
      }
    }
    ran.length = 0;
  }

  // Findings: stamped with provenance, disposition and effective severity (host §1).
  const requiredSources = new Map<string, Set<string>>(); // provider -> sources it is granted for here
  for (const req of input.required) {
    for (const p of input.providers) {
      if (!p.grants.some((g) => g.requirement === req.id)) continue;
      const set = requiredSources.get(p.provider.id) ?? new Set<string>();
      for (const s of req.sources) set.add(s);
      requiredSources.set(p.provider.id, set);
    }
  }
  const findings: Finding[] = [];
  for (const k of arbitration.kept) {
    const p = byId.get(k.provider);
    if (p === undefined) continue;
    const d = k.diagnostic;
    const gatingSource = requiredSources.get(p.provider.id)?.has(d.source) === true;
    const grant = gatingSource
      ? (p.grants.find((g) => input.required.some((r) => r.id === g.requirement && r.sources.includes(d.source))) ??
        null)
      : null;
    const eff = effectiveSeverity(policy, d.severity, {
      provider: p.provider.id,
      granted: grant !== null,
      isolation: input.assurance.mode,
    });
    const gating = grant !== null && eff.severity === "error";
    findings.push({
      diagnostic: d,
      provider: { id: p.provider.id, version: p.provider.version },
      provenance: { source: d.source, authenticated: true },
      disposition: gating ? "gating" : "advisory",
      effectiveSeverity: eff.severity,
      ...(eff.note === undefined ? {} : { severityNote: clip(eff.note) }),
      ...(gating ? { nextStep: nextStepFor(d, p.provider.id) } : {}),
      grant: grant === null ? null : { requirement: grant.requirement, callSite: grant.callSite },
    });
  }
  const key = (f: Finding): string =>
    `${f.disposition === "gating" ? 0 : 1}\u0000${f.provider.id}\u0000${f.diagnostic.source}\u0000${f.diagnostic.fingerprint}`;
  findings.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));

  // The §1 rule, conservative.
  let decision: Decision = "allow";
  if (findings.some((f) => f.disposition === "gating") || cells.includes("deny")) decision = "deny";
  else if (cells.includes("indeterminate")) decision = "indeterminate";

  const envelope: DecisionEnvelope = {
    $$type: "@asp/DecisionEnvelope",
    version: 1,
    decisionId: input.decisionId,
    decision,
    callSite,
    policyDigest: policy.digest,
    baseline: input.baseline,
    changeset: input.changeset,
    findings,
    coverage: { required: input.required.map((r) => r.id), ran, degraded },
    authority: input.providers.map((p) => p.authority),
    assurance: { mode: input.assurance.mode, directWriteRisk: input.assurance.directWriteRisk },
    decidedAt: input.decidedAt,
  };
  return { envelope, failOpens };
}
