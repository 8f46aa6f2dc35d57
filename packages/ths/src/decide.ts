import { arbitrate, type KeptDiagnostic, type ProviderRun, provisionalDecision } from "@asp/arbitration";
import {
  type Assessment,
  type AssuranceMode,
  CALL_SITES,
  type CallSite,
  type CapabilityFamily,
  type Decision,
  type DecisionEnvelope,
  type Diagnostic,
  degradationReasonOf,
  FAIL_CLASSES,
  type FailClass,
  type FailPolicyOutcome,
  type ProviderState,
} from "@asp/contracts";
import { type ActivePolicy, DEFAULT_FAIL_POLICY, failPolicyCell, hostPinMismatch, type RunningHost } from "@asp/policy";
import { assuranceAtLeast, type RequiredRequirement, requiredAssurance, type VerifiedGrant } from "./policy-view.js";

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
  /**
   * The isolation this provider really ran under, from how it was launched (for
   * `severityCaps[].isolation`). Absent means unknown, which counts as the weakest (`advisory`).
   */
  readonly isolation?: AssuranceMode;
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
  /** The host deciding, compared with the policy's `host` pin (host §2: an incompatible host never allows). */
  readonly host: RunningHost;
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
 * Host-level pre-checks arbitration does not make: a diagnostic outside the provider's declared
 * sources is malformed contract data (the provider is degraded, host §4); a granted provider
 * whose integrity was not measured equal to its pin has its grants refused (`integrity_unverified`,
 * host §1: authority only over measured identity and integrity); and one without verified
 * identity has no authority evidence (host §1).
 */
function preCheck(p: ProviderEvaluation): ProviderEvaluation["outcome"] {
  if (p.outcome.kind === "failed") return p.outcome;
  const declared = new Set(p.declaredSources);
  for (const d of p.outcome.assessment.diagnostics) {
    const namespace = d.code.slice(0, Math.max(0, d.code.indexOf("/")));
    if (!declared.has(namespace) || d.source !== namespace) {
      return {
        kind: "failed",
        failClass: "malformed",
        detail: `diagnostic ${d.code} under undeclared source ${d.source}`,
      };
    }
  }
  if (p.grants.length > 0 && p.authority.integrity !== "verified") {
    return {
      kind: "failed",
      failClass: "integrity_unverified",
      detail:
        p.authority.integrity === "failed"
          ? "the provider's measured digest does not equal its pin: its grants are not honoured"
          : "no measured digest or verified signature backs the provider's pin (a configured provider needs a root): its grants are not honoured",
    };
  }
  if (p.grants.length > 0 && p.authority.identity !== "verified") {
    return { kind: "failed", failClass: "missing_authority", detail: "provider identity is not verified" };
  }
  return p.outcome;
}

/**
 * The host's decision (host §1, §2, §3), as a pure function of its input. Arbitration
 * (`@asp/arbitration`: ownership, dedup, precedence by grant, ties, coverage, fail-policy cells)
 * runs first, with severity caps applied by each provider's own isolation; the host then adds
 * what only it knows (requirement-level failures such as policy self-authorization, a host the
 * policy's `host` pin does not name, achieved assurance), stamps the findings and applies the §1 rule: allow
 * only when every required requirement ran on fresh, valid, complete, granted assessments,
 * nothing blocks, nothing ties, and no required degradation fails closed. A gate cell never opens.
 */
export function decide(input: DecideInput): DecideResult {
  const { callSite, policy } = input;
  const byId = new Map(input.providers.map((p) => [p.provider.id, p]));
  const runs: ProviderRun[] = input.providers.map((p) => {
    const outcome = preCheck(p);
    return {
      provider: p.provider,
      declaredSources: p.declaredSources,
      // Each provider's own isolation (how it was launched), never the host's assurance mode.
      isolation: p.isolation ?? null,
      result:
        outcome.kind === "ok"
          ? { status: "assessed", assessment: outcome.assessment }
          : { status: "failed", failClass: outcome.failClass, providerState: p.state, detail: outcome.detail },
    };
  });
  const arbitration = arbitrate({ policy, callSite, runs });
  const provisional = provisionalDecision(arbitration);

  const degraded: Degraded[] = arbitration.coverage.degraded.map((d) => ({ ...d }));
  const ran = new Set(arbitration.coverage.ran);
  const hostCells: FailPolicyOutcome[] = [];
  const addRequired = (entry: Omit<Degraded, "reason" | "failOpen"> & { failClass: FailClass }): void => {
    const cell = failCell(policy, entry.failClass, callSite);
    hostCells.push(cell);
    degraded.push({ ...entry, reason: degradationReasonOf(entry.failClass), failOpen: cell === "open" });
    if (entry.requirement !== undefined) ran.delete(entry.requirement);
  };

  // Failures the host found on a requirement itself (host §7 policy self-authorization ...).
  for (const f of input.requirementFailures ?? []) {
    addRequired({ requirement: f.requirement, failClass: f.failClass, detail: clip(f.detail) });
  }

  // host §2: a host the policy does not pin (implementation, version range, digest) never allows.
  const hostMismatch = hostPinMismatch(policy, input.host);
  if (hostMismatch !== null) {
    for (const req of input.required) {
      addRequired({ requirement: req.id, failClass: "host_incompatible", detail: clip(hostMismatch.detail) });
    }
  }

  // host §3: achieved assurance must satisfy the call-site; a local subprocess caps it (direct-write-risk).
  const needed = requiredAssurance(policy, callSite);
  if (input.required.length > 0 && !assuranceAtLeast(input.assurance.mode, needed)) {
    const risky = input.providers.filter((p) => p.directWrite && p.grants.length > 0);
    for (const p of risky) {
      addRequired({
        provider: p.provider.id,
        failClass: "direct_write_risk",
        capability: p.capability,
        providerState: p.state,
        detail: clip(
          `a local subprocess can write the worktree: at most ${input.assurance.mode}, ${callSite} needs ${needed}`,
        ),
      });
    }
    for (const req of input.required) {
      addRequired({
        requirement: req.id,
        failClass: "insufficient_assurance",
        detail: clip(`achieved ${input.assurance.mode}, ${callSite} needs ${needed}`),
      });
    }
  }

  // Findings: host-stamped provenance, disposition, effective severity, guaranteed nextStep (host §1).
  const findings: Finding[] = [];
  const seen = new Set<string>();
  const stamp = (k: KeptDiagnostic): void => {
    const d = k.diagnostic;
    const key = `${k.provider.id}\u0000${d.source}\u0000${d.fingerprint}`;
    if (seen.has(key)) return;
    seen.add(key);
    const gating = k.disposition === "gating" && k.requirement !== null;
    findings.push({
      diagnostic: d,
      provider: { id: k.provider.id, version: k.provider.version },
      provenance: { source: d.source, authenticated: true },
      disposition: gating ? "gating" : "advisory",
      effectiveSeverity: k.effectiveSeverity,
      ...(k.severityNote === undefined ? {} : { severityNote: clip(k.severityNote) }),
      ...(gating ? { nextStep: nextStepFor(d, k.provider.id) } : {}),
      grant: gating && k.requirement !== null ? { requirement: k.requirement, callSite } : null,
    });
  };
  for (const r of arbitration.requirements) for (const k of r.diagnostics) stamp(k);
  for (const k of arbitration.advisory) stamp(k);
  const order = (f: Finding): string =>
    `${f.disposition === "gating" ? 0 : 1}\u0000${f.provider.id}\u0000${f.diagnostic.source}\u0000${f.diagnostic.fingerprint}`;
  findings.sort((a, b) => (order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : 0));

  // The §1 rule, conservative: arbitration's provisional outcome, then the host's own cells.
  let decision: Decision = provisional.decision;
  if (hostCells.includes("deny")) decision = "deny";
  else if (hostCells.includes("indeterminate") && decision === "allow") decision = "indeterminate";
  if (callSite === "gate" && decision === "allow" && input.required.some((r) => !ran.has(r.id))) {
    decision = "indeterminate"; // belt and braces: a gate never allows with required coverage missing
  }

  const failOpens: FailOpen[] = degraded
    .filter((d) => d.failOpen)
    .map((d) => ({
      provider: d.provider ?? `requirement:${d.requirement}`,
      failClass: d.failClass ?? "missing",
      callSite,
      ...(d.requirement === undefined ? {} : { requirement: d.requirement }),
      detail: d.detail ?? "",
    }));

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
    coverage: {
      required: [...arbitration.coverage.required],
      ran: arbitration.coverage.ran.filter((r) => ran.has(r)),
      degraded,
    },
    authority: input.providers.map((p) => byId.get(p.provider.id)?.authority ?? p.authority),
    assurance: { mode: input.assurance.mode, directWriteRisk: input.assurance.directWriteRisk },
    decidedAt: input.decidedAt,
  };
  return { envelope, failOpens };
}
