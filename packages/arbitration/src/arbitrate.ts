import {
  type Assessment,
  type AssuranceMode,
  CALL_SITES,
  type CallSite,
  canonicalize,
  type DegradationReason,
  type Diagnostic,
  degradationReasonOf,
  FAIL_CLASSES,
  type FailClass,
  type FailPolicyOutcome,
  type ProviderState,
  SEVERITIES,
  type Severity,
} from "@asp/contracts";
import {
  type ActivePolicy,
  authorityFor,
  capNote,
  type DegradedEntry,
  failPolicyCell,
  type ProviderClaim,
  requiredRequirements,
  type SeverityCeiling,
  severityCeiling,
} from "@asp/policy";
import { arbitrationError } from "./errors.js";

/** A provider as a finding names it: id and version (the digest stays in authority evidence). */
export interface ProviderRef {
  readonly id: string;
  readonly version: string;
}

/** What the host got from one provider for this evaluation. */
export type ProviderResult =
  | { readonly status: "assessed"; readonly assessment: Assessment }
  | {
      readonly status: "failed";
      /** The typed failure (host §2): crashed, timed_out, stale, quarantined ... */
      readonly failClass: FailClass;
      readonly providerState?: ProviderState;
      readonly detail?: string;
    };

/** One provider's part in an evaluation: who it is, what it declared, what it returned. */
export interface ProviderRun {
  /** The identity the host measured (id, version, artifact digest). Labels never grant authority. */
  readonly provider: ProviderClaim;
  /** The diagnostic sources it declared at initialize (host §4 source ownership). */
  readonly declaredSources: ReadonlyArray<string>;
  /** The isolation it ran under, for severity caps; `null` or absent means unknown (treated as weakest). */
  readonly isolation?: AssuranceMode | null;
  readonly result: ProviderResult;
}

/** Parameters of {@link arbitrate}. */
export interface ArbitrateParams {
  readonly policy: ActivePolicy;
  readonly callSite: CallSite;
  readonly runs: ReadonlyArray<ProviderRun>;
}

/** A diagnostic kept after arbitration, with the host's view of it. */
export interface KeptDiagnostic {
  readonly diagnostic: Diagnostic;
  readonly provider: ProviderRef;
  /** The requirement it counts toward, or `null` for advisory findings. */
  readonly requirement: string | null;
  /** `gating` when an authorized provider reported it on a required source; otherwise `advisory`. */
  readonly disposition: "gating" | "advisory";
  readonly effectiveSeverity: Severity;
  /** Present exactly when the effective severity differs from the reported one. */
  readonly severityNote?: string;
}

/** Why a diagnostic was dropped. */
export type DropReason =
  /** Its code is not namespaced under a source the provider declared at initialize (host §4). */
  | "undeclared-source"
  /** Its `source` field differs from the namespace of its code. */
  | "source-mismatch"
  /** The same provider reported the same fingerprint twice in one source (the less severe copy is dropped). */
  | "duplicate-fingerprint";

/** A typed event for every dropped diagnostic: nothing is dropped silently. */
export interface DroppedDiagnostic {
  readonly type: "diagnostic-dropped";
  readonly reason: DropReason;
  readonly provider: ProviderRef;
  readonly source: string;
  readonly code: string;
  readonly fingerprint: string;
}

/** Two or more authorized providers disagree on a required source: a gate becomes indeterminate (host §4). */
export interface TieMarker {
  readonly requirement: string;
  readonly source: string;
  /** Every authorized provider on that source, with whether it reported a blocking finding. */
  readonly providers: ReadonlyArray<{ readonly provider: ProviderRef; readonly blocking: boolean }>;
}

/** One required requirement after arbitration. */
export interface RequirementOutcome {
  readonly requirement: string;
  readonly sources: ReadonlyArray<string>;
  /** Providers holding the grant for this requirement at this call-site that declared one of its sources. */
  readonly authorized: ReadonlyArray<ProviderRef>;
  /** Gating findings, sorted by source, fingerprint, provider. */
  readonly diagnostics: ReadonlyArray<KeptDiagnostic>;
  /** How many of them have effective severity `error`. */
  readonly blocking: number;
  /** Every source covered by authorized providers that all completed. */
  readonly ran: boolean;
  readonly tie: boolean;
}

/** The fail-policy outcome of one degraded entry, in the same order as `coverage.degraded`. */
export interface FailPolicyDecision {
  readonly provider: string | null;
  readonly requirement: string | null;
  readonly failClass: FailClass;
  readonly outcome: FailPolicyOutcome;
}

/** Coverage as the decision envelope reports it (host §1). */
export interface ArbitrationCoverage {
  readonly required: ReadonlyArray<string>;
  readonly ran: ReadonlyArray<string>;
  readonly degraded: ReadonlyArray<DegradedEntry>;
}

/** Everything `decide()` needs from arbitration. Every list is sorted: equal inputs, equal output. */
export interface ArbitrationResult {
  readonly callSite: CallSite;
  readonly policyDigest: string;
  readonly requirements: ReadonlyArray<RequirementOutcome>;
  readonly advisory: ReadonlyArray<KeptDiagnostic>;
  readonly dropped: ReadonlyArray<DroppedDiagnostic>;
  readonly ties: ReadonlyArray<TieMarker>;
  readonly coverage: ArbitrationCoverage;
  readonly failPolicy: ReadonlyArray<FailPolicyDecision>;
}

const SEVERITY_RANK: Record<Severity, number> = { error: 0, warning: 1, info: 2, hint: 3 };

interface RunState {
  readonly run: ProviderRun;
  readonly ref: ProviderRef;
  readonly declared: ReadonlySet<string>;
  /** The assessment, when it is one this provider may have produced (identity matches). */
  readonly assessment: Assessment | null;
  readonly failure: { readonly failClass: FailClass; readonly detail: string; readonly state?: ProviderState } | null;
  /** Requirement ids this provider is authorized for at this call-site. */
  readonly authorizedFor: ReadonlySet<string>;
  readonly grantedCeiling: SeverityCeiling | null;
  readonly ungrantedCeiling: SeverityCeiling | null;
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function checkRun(run: ProviderRun, i: number): void {
  const p = run?.provider;
  if (typeof p?.id !== "string" || typeof p.version !== "string" || typeof p.digest !== "string") {
    throw arbitrationError(
      "ASP_ARBITRATION_INVALID_INPUT",
      "a provider run needs provider { id, version, digest }",
      `/runs/${i}/provider`,
    );
  }
  if (!Array.isArray(run.declaredSources)) {
    throw arbitrationError(
      "ASP_ARBITRATION_INVALID_INPUT",
      "a provider run needs its declaredSources",
      `/runs/${i}/declaredSources`,
    );
  }
  const r = run.result;
  const ok =
    (r?.status === "assessed" && Array.isArray(r.assessment?.diagnostics)) ||
    (r?.status === "failed" && (FAIL_CLASSES as ReadonlyArray<string>).includes(r.failClass));
  if (!ok) {
    throw arbitrationError(
      "ASP_ARBITRATION_INVALID_INPUT",
      "a provider run's result is { status: 'assessed', assessment } or { status: 'failed', failClass }",
      `/runs/${i}/result`,
    );
  }
}

function stateOf(
  policy: ActivePolicy,
  callSite: CallSite,
  run: ProviderRun,
  requirementIds: ReadonlyArray<string>,
): RunState {
  const ref: ProviderRef = { id: run.provider.id, version: run.provider.version };
  const isolation = run.isolation ?? null;
  let assessment: Assessment | null = null;
  let failure: RunState["failure"] = null;
  if (run.result.status === "failed") {
    failure = {
      failClass: run.result.failClass,
      detail: run.result.detail ?? `provider ${run.result.failClass}`,
      ...(run.result.providerState === undefined ? {} : { state: run.result.providerState }),
    };
  } else {
    const a = run.result.assessment;
    if (a.provider?.id !== ref.id || a.provider?.version !== ref.version) {
      // An assessment that names someone else is not this provider's answer (host §1: malformed).
      failure = { failClass: "malformed", detail: "the assessment names a different provider identity" };
    } else assessment = a;
  }
  const authorizedFor = new Set(
    requirementIds.filter((id) => authorityFor(policy, run.provider, id, callSite) !== null),
  );
  return {
    run,
    ref,
    declared: new Set(run.declaredSources),
    assessment,
    failure,
    authorizedFor,
    grantedCeiling: severityCeiling(policy, { provider: ref.id, authority: "granted" }, isolation),
    ungrantedCeiling: severityCeiling(policy, { provider: ref.id, authority: "ungranted" }, isolation),
  };
}

function kept(
  d: Diagnostic,
  rank: number,
  state: RunState,
  requirement: string | null,
  ceiling: SeverityCeiling | null,
): KeptDiagnostic {
  const disposition = requirement === null ? "advisory" : "gating";
  // One literal per shape, no spreads: this runs once per kept diagnostic (100k in the bench).
  if (ceiling !== null && SEVERITY_RANK[ceiling.maxSeverity] > rank) {
    return {
      diagnostic: d,
      provider: state.ref,
      requirement,
      disposition,
      effectiveSeverity: ceiling.maxSeverity,
      severityNote: capNote(d.severity, ceiling),
    };
  }
  return { diagnostic: d, provider: state.ref, requirement, disposition, effectiveSeverity: d.severity };
}

/** `text` without control characters, at most `max` characters. */
function oneLine(text: string, max: number): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping them is the point.
  const flat = text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** Reason for an assessment that is not a complete answer for `source`, or null when it is. */
function incompleteness(a: Assessment, source: string): { failClass: FailClass; detail: string } | null {
  if (a.status === "error") return { failClass: "errored", detail: `provider error ${a.error?.code ?? ""}`.trim() };
  if (a.status === "unsupported") {
    // The provider's own reason (e.g. a compiler version it cannot serve), one line, bounded.
    const why = a.error === undefined ? "" : `: ${a.error.code} ${oneLine(a.error.message, 600)}`.trimEnd();
    return { failClass: "unsupported", detail: `the provider does not support this check${why}` };
  }
  // A finding cap: how many there were and which files were cut (issue 26 item 4), never just "incomplete".
  const cut = a.coverage?.truncated;
  if (cut !== undefined) {
    const files = a.coverage?.missing ?? [];
    const named = files.slice(0, 5).map((f) => oneLine(f, 200));
    const more = files.length > named.length ? ` and ${files.length - named.length} more` : "";
    return {
      failClass: "incomplete",
      detail: `the provider found ${cut.total} finding(s) and reported the first ${cut.reported} (its cap); ${files.length} path(s) missing${files.length > 0 ? `: ${named.join(", ")}${more}` : ""}`,
    };
  }
  if (a.status === "incomplete") return { failClass: "incomplete", detail: "the assessment is incomplete" };
  // host §2: "complete" while listing what it did not cover is not complete.
  const missed = a.coverage?.missing?.length ?? 0;
  if (missed > 0) {
    return { failClass: "incomplete", detail: `the assessment says complete but misses ${missed} item(s)` };
  }
  if (a.coverage !== undefined && !a.coverage.sources.includes(source)) {
    return { failClass: "incomplete", detail: `the assessment does not cover source ${source}` };
  }
  return null;
}

/**
 * Reconcile the providers' answers for one evaluation (host §4). Pure and deterministic:
 * shuffling runs or diagnostics yields an identical result.
 *
 * - Source ownership: a diagnostic whose code is not namespaced under a source its provider
 *   declared at initialize, or whose `source` disagrees with that namespace, is dropped and
 *   reported as a {@link DroppedDiagnostic}.
 * - Dedup within one provider's source by fingerprint (the most severe copy is kept). Equal
 *   fingerprints from different providers are never merged and never change the outcome.
 * - Precedence per requirement by authority grant: only providers granted the requirement at
 *   this call-site produce gating findings; everything else is advisory, with severity capped by
 *   the policy for ungranted providers.
 * - Ties: two authorized, complete providers on one required source that disagree on whether
 *   it blocks are both surfaced, with a {@link TieMarker}.
 * - Coverage: required requirement ids, those that ran, and a degraded entry (with the
 *   assurance-vocabulary reason and its fail-policy outcome) for every missing, unauthorized,
 *   failed or incomplete source.
 *
 * @throws ArbitrationError `ASP_ARBITRATION_INVALID_INPUT` for a malformed run or call-site,
 *   `ASP_ARBITRATION_DUPLICATE_PROVIDER` for two runs of one provider id; PolicyError
 *   `ASP_POLICY_NOT_ACTIVE` when `policy` is not an active policy.
 * @example
 * ```ts
 * const result = arbitrate({ policy, callSite: "gate", runs });
 * result.coverage; // { required: ["secrets", "types"], ran: ["types"], degraded: [...] }
 * ```
 */
export function arbitrate(params: ArbitrateParams): ArbitrationResult {
  const { policy, callSite } = params;
  if (!(CALL_SITES as ReadonlyArray<string>).includes(callSite)) {
    throw arbitrationError(
      "ASP_ARBITRATION_INVALID_INPUT",
      `unknown call-site ${JSON.stringify(String(callSite))}`,
      "/callSite",
    );
  }
  const required = requiredRequirements(policy, callSite);
  const requiredIds = required.map((r) => r.id);
  params.runs.forEach(checkRun);
  const runs = [...params.runs].sort((a, b) => cmp(a.provider.id, b.provider.id));
  for (let i = 1; i < runs.length; i++) {
    if (runs[i]?.provider.id === runs[i - 1]?.provider.id) {
      const index = params.runs.lastIndexOf(runs[i] as ProviderRun);
      throw arbitrationError(
        "ASP_ARBITRATION_DUPLICATE_PROVIDER",
        `provider ${runs[i]?.provider.id} appears in two runs; one evaluation has one run per provider`,
        `/runs/${index}/provider/id`,
      );
    }
  }
  const states = runs.map((run) => stateOf(policy, callSite, run, requiredIds));

  // Source ownership, then one sort that orders everything and makes duplicates adjacent.
  const dropped: DroppedDiagnostic[] = [];
  const drop = (reason: DropReason, state: RunState, d: Diagnostic): void => {
    dropped.push({
      type: "diagnostic-dropped",
      reason,
      provider: state.ref,
      source: d.source,
      code: d.code,
      fingerprint: d.fingerprint,
    });
  };
  // Parallel arrays and an index sort: no per-diagnostic wrapper objects on the hot path.
  const ds: Diagnostic[] = [];
  const runOf: number[] = [];
  const rankOf: number[] = [];
  states.forEach((state, run) => {
    if (state.assessment === null) return;
    for (const d of state.assessment.diagnostics) {
      const source = d.source;
      const code = d.code;
      // Fast path: the code is `<source>/...` and the source was declared.
      if (code.charCodeAt(source.length) === 47 && code.startsWith(source) && state.declared.has(source)) {
        ds.push(d);
        runOf.push(run);
        rankOf.push(SEVERITY_RANK[d.severity] ?? SEVERITIES.length);
        continue;
      }
      const slash = code.indexOf("/");
      const namespace = slash < 0 ? "" : code.slice(0, slash);
      drop(state.declared.has(namespace) ? "source-mismatch" : "undeclared-source", state, d);
    }
  });
  const canonical = new Map<number, string>();
  const canonicalOf = (i: number): string => {
    let c = canonical.get(i);
    if (c === undefined) {
      c = canonicalize(ds[i]);
      canonical.set(i, c);
    }
    return c;
  };
  const order = Array.from({ length: ds.length }, (_, i) => i);
  order.sort((x, y) => {
    const a = ds[x] as Diagnostic;
    const b = ds[y] as Diagnostic;
    return (
      cmp(a.source, b.source) ||
      cmp(a.fingerprint, b.fingerprint) ||
      (runOf[x] as number) - (runOf[y] as number) ||
      (rankOf[x] as number) - (rankOf[y] as number) ||
      // Only reached for two copies of one finding that differ elsewhere: pick one canonically.
      cmp(canonicalOf(x), canonicalOf(y))
    );
  });

  const sourceToRequirements = new Map<string, string[]>();
  for (const r of required) {
    for (const s of r.sources) sourceToRequirements.set(s, [...(sourceToRequirements.get(s) ?? []), r.id]);
  }
  const gating = new Map<string, KeptDiagnostic[]>(requiredIds.map((id) => [id, []]));
  const advisory: KeptDiagnostic[] = [];
  // "<requirement>\0<source>" -> run indexes that reported a blocking finding there
  const blockingRuns = new Map<string, Set<number>>();
  const NONE: ReadonlyArray<string> = [];
  let previous = -1;
  for (const i of order) {
    const d = ds[i] as Diagnostic;
    const run = runOf[i] as number;
    const rank = rankOf[i] as number;
    const state = states[run] as RunState;
    if (previous >= 0) {
      const p = ds[previous] as Diagnostic;
      if (runOf[previous] === run && p.fingerprint === d.fingerprint && p.source === d.source) {
        drop("duplicate-fingerprint", state, d);
        continue;
      }
    }
    previous = i;
    let counted = false;
    for (const requirement of sourceToRequirements.get(d.source) ?? NONE) {
      if (!state.authorizedFor.has(requirement)) continue;
      const k = kept(d, rank, state, requirement, state.grantedCeiling);
      (gating.get(requirement) as KeptDiagnostic[]).push(k);
      if (k.effectiveSeverity === "error") {
        const key = `${requirement}\u0000${d.source}`;
        let set = blockingRuns.get(key);
        if (set === undefined) {
          set = new Set<number>();
          blockingRuns.set(key, set);
        }
        set.add(run);
      }
      counted = true;
    }
    if (!counted) advisory.push(kept(d, rank, state, null, state.ungrantedCeiling));
  }

  // Coverage, ties and degradation, requirement by requirement, source by source.
  const degraded: Array<{ entry: DegradedEntry; decision: FailPolicyDecision }> = [];
  const seen = new Set<string>();
  const degrade = (
    failClass: FailClass,
    requirement: string | null,
    state: RunState | null,
    detail: string,
    requiredSource: boolean,
  ): void => {
    const key = `${requirement ?? ""}\u0000${state?.ref.id ?? ""}\u0000${failClass}\u0000${detail}`;
    if (seen.has(key)) return;
    seen.add(key);
    const outcome = failPolicyCell(policy, failClass, callSite, { requiredSource });
    const reason: DegradationReason = degradationReasonOf(failClass);
    const entry: DegradedEntry = {
      ...(state === null ? {} : { provider: state.ref.id }),
      ...(requirement === null ? {} : { requirement }),
      reason,
      failClass,
      capability: "check",
      ...(state?.failure?.state === undefined ? {} : { providerState: state.failure.state }),
      failOpen: outcome === "open",
      detail: detail.length > 2000 ? `${detail.slice(0, 1999)}…` : detail,
    };
    degraded.push({
      entry,
      decision: { provider: state?.ref.id ?? null, requirement, failClass, outcome },
    });
  };

  const ties: TieMarker[] = [];
  const outcomes: RequirementOutcome[] = [];
  const ran: string[] = [];
  for (const r of required) {
    const authorized = states.filter((s) => s.authorizedFor.has(r.id) && r.sources.some((src) => s.declared.has(src)));
    let complete = true;
    let tie = false;
    for (const source of r.sources) {
      const onSource = authorized.filter((s) => s.declared.has(source));
      if (onSource.length === 0) {
        complete = false;
        const unauthorized = states.some((s) => s.declared.has(source));
        if (unauthorized) {
          degrade(
            "missing_authority",
            r.id,
            null,
            `source ${source}: no provider holding the grant for ${r.id} at ${callSite} declared it`,
            true,
          );
        } else degrade("missing", r.id, null, `source ${source}: no provider declared it`, true);
        continue;
      }
      const answered: RunState[] = [];
      for (const s of onSource) {
        if (s.failure !== null) {
          complete = false;
          degrade(s.failure.failClass, r.id, s, `source ${source}: ${s.failure.detail}`, true);
          continue;
        }
        const gap = incompleteness(s.assessment as Assessment, source);
        if (gap !== null) {
          complete = false;
          degrade(gap.failClass, r.id, s, `source ${source}: ${gap.detail}`, true);
          continue;
        }
        answered.push(s);
      }
      if (answered.length >= 2) {
        const blockers = blockingRuns.get(`${r.id}\u0000${source}`) ?? new Set<number>();
        const flags = answered.map((s) => blockers.has(states.indexOf(s)));
        if (flags.some((f) => f) && flags.some((f) => !f)) {
          tie = true;
          ties.push({
            requirement: r.id,
            source,
            providers: answered.map((s, i) => ({ provider: s.ref, blocking: flags[i] as boolean })),
          });
        }
      }
    }
    if (complete) ran.push(r.id);
    const diagnostics = gating.get(r.id) as KeptDiagnostic[];
    outcomes.push({
      requirement: r.id,
      sources: [...r.sources].sort(),
      authorized: authorized.map((s) => s.ref),
      diagnostics,
      blocking: diagnostics.reduce((n, k) => n + (k.effectiveSeverity === "error" ? 1 : 0), 0),
      ran: complete,
      tie,
    });
  }
  // Providers that failed without serving any required requirement: optional loss, still visible.
  for (const s of states) {
    if (
      s.failure === null ||
      required.some((r) => s.authorizedFor.has(r.id) && r.sources.some((src) => s.declared.has(src)))
    ) {
      continue;
    }
    const requiredSource = required.some((r) => r.sources.some((src) => s.declared.has(src)));
    degrade(s.failure.failClass, null, s, s.failure.detail, requiredSource);
  }

  degraded.sort(
    (a, b) =>
      cmp(a.entry.requirement ?? "", b.entry.requirement ?? "") ||
      cmp(a.entry.provider ?? "", b.entry.provider ?? "") ||
      cmp(a.entry.reason, b.entry.reason) ||
      cmp(a.entry.detail ?? "", b.entry.detail ?? ""),
  );
  dropped.sort(
    (a, b) =>
      cmp(a.provider.id, b.provider.id) ||
      cmp(a.source, b.source) ||
      cmp(a.fingerprint, b.fingerprint) ||
      cmp(a.code, b.code) ||
      cmp(a.reason, b.reason),
  );
  return {
    callSite,
    policyDigest: policy.digest,
    requirements: outcomes,
    advisory,
    dropped,
    ties,
    coverage: { required: requiredIds, ran, degraded: degraded.map((d) => d.entry) },
    failPolicy: degraded.map((d) => d.decision),
  };
}
