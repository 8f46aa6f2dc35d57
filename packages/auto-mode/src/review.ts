import {
  type AttemptOutcome,
  type EvidenceSnapshot,
  FINDING_SEVERITIES,
  type FindingSeverity,
  type IndependencePolicy,
  REVIEW_VERDICTS,
  type ReviewVerdict,
  VERIFIER_BOUNDARY_KINDS,
  type Verifier,
  type VerifierBoundary,
  type VerifierLaunch,
  validate,
} from "@asp/contracts";
import type { ActorIdentity } from "./engine.js";
import type { FindingContent } from "./identity.js";

/**
 * A Reviewer the host may select: a verifier port (contracts `Verifier`, e.g. a verifier plugin's
 * `init` result) with the identity it runs under and its read-only evidence adapter.
 */
export interface ReviewerPort {
  /** Who answers. Read before every attempt: a change from the frozen identity is drift. */
  readonly identity: ActorIdentity & { readonly model?: string };
  readonly verifier: Verifier;
  /**
   * How the Reviewer's process was launched (a verifier plugin under the host's sandbox, ADR
   * 0011), frozen into the review run's Reviewer binding. Absent: a Reviewer the composing host
   * runs itself.
   */
  readonly launch?: VerifierLaunch;
  /**
   * What the Reviewer's sandbox boundary recorded (`@asp/ths` `LaunchedVerifier`): each attempt's
   * new entries are frozen into its review attempt (`boundary`). Absent: nothing is recorded.
   */
  readonly boundary?: VerifierBoundarySource;
  /**
   * The read-only evidence adapter: the required material of the snapshot it cannot cover (empty
   * when it covers everything). Absent: the adapter covers every ref.
   */
  coverage?(snapshot: EvidenceSnapshot): ReadonlyArray<string> | Promise<ReadonlyArray<string>>;
}

/** A verifier's boundary record: the first entries kept, and how many there were in all. */
export interface VerifierBoundarySource {
  attempts(): ReadonlyArray<{ readonly kind: string; readonly detail: string; readonly at: string }>;
  attemptCount(): number;
}

/** Where a boundary record stood before a call ({@link boundarySince}). */
export interface BoundaryMark {
  readonly count: number;
  readonly kept: number;
}

/** Mark a boundary record before a call. Total: a throwing or absent source marks nothing. */
export function boundaryMark(source: VerifierBoundarySource | undefined): BoundaryMark {
  try {
    return { count: source?.attemptCount() ?? 0, kept: source?.attempts().length ?? 0 };
  } catch {
    return { count: 0, kept: 0 };
  }
}

/**
 * What a boundary record gained since `mark`: the count and the first 8 kept entries of a known
 * kind (undefined when nothing was added). Total: a source that throws or answers nonsense adds
 * nothing (the record is evidence of what the Reviewer tried, never a verdict).
 */
export function boundarySince(
  source: VerifierBoundarySource | undefined,
  mark: BoundaryMark,
): VerifierBoundary | undefined {
  if (source === undefined) return undefined;
  try {
    const count = source.attemptCount() - mark.count;
    if (!Number.isSafeInteger(count) || count <= 0) return undefined;
    const first = source
      .attempts()
      .slice(mark.kept, mark.kept + 8)
      .filter(
        (a) => (VERIFIER_BOUNDARY_KINDS as ReadonlyArray<string>).includes(a.kind) && !Number.isNaN(Date.parse(a.at)),
      )
      .map((a) => ({
        kind: a.kind as VerifierBoundary["first"][number]["kind"],
        detail: String(a.detail).slice(0, 500),
        at: new Date(a.at).toISOString(),
      }));
    return { count, first };
  } catch {
    return undefined;
  }
}

/**
 * Whether `v` is a {@link VerifierBoundary}: contracts' `verifier-boundary` schema (closed shape,
 * known kinds, at most 8 kept attempts, bounded details). Pure.
 */
export function isVerifierBoundary(v: unknown): v is VerifierBoundary {
  return validate("verifier-boundary", v).ok;
}

/** The frozen independence policy of a run and the actors that may never review its candidate. */
export interface IndependenceInput {
  readonly policy: IndependencePolicy;
  /** The candidate's producer (fingerprint frozen when the run started). */
  readonly producer: ActorIdentity;
  /** Repair actors and promotion actors: never eligible, whatever their model. */
  readonly excluded: ReadonlyArray<Pick<ActorIdentity, "actor_id" | "session_id">>;
}

/**
 * Whether a Reviewer identity is eligible. Actor and session independence is absolute (not the
 * producer, no Repair or promotion actor); the fingerprint rule follows the frozen policy (by
 * default the Reviewer fingerprint differs from the producer's). Pure.
 */
export function isEligibleReviewer(reviewer: ActorIdentity, input: IndependenceInput): boolean {
  const actors = [input.producer, ...input.excluded];
  if (actors.some((a) => a.actor_id === reviewer.actor_id || a.session_id === reviewer.session_id)) return false;
  if (input.policy === "distinct_fingerprint" && reviewer.fingerprint === input.producer.fingerprint) return false;
  return true;
}

/** The first eligible Reviewer in the given order, or null (no inference call is admitted). Pure. */
export function selectReviewer(reviewers: ReadonlyArray<ReviewerPort>, input: IndependenceInput): ReviewerPort | null {
  return reviewers.find((r) => isEligibleReviewer(r.identity, input)) ?? null;
}

/** An admissible verdict, parsed and schema-checked against the reviewed snapshot. */
export interface ParsedVerdict {
  readonly verdict: ReviewVerdict;
  readonly findings: ReadonlyArray<FindingContent>;
  readonly rationale: string | null;
}

const CATEGORY = /^[a-z][a-z0-9_.-]*$/;

/**
 * Parse a Reviewer's answer as a verdict over `snapshot`, or null when it is not admissible: not a
 * review answer, an unknown verdict or severity, a malformed finding, a finding citing a ref the
 * snapshot does not hold, or an `issues` verdict without findings. Total over any input. Pure.
 */
export function parseVerdict(answer: unknown, snapshot: EvidenceSnapshot): ParsedVerdict | null {
  if (typeof answer !== "object" || answer === null) return null;
  const a = answer as { kind?: unknown; verdict?: unknown; findings?: unknown; rationale?: unknown };
  if (a.kind !== "review" || !(REVIEW_VERDICTS as ReadonlyArray<unknown>).includes(a.verdict)) return null;
  if (!Array.isArray(a.findings) || a.findings.length > 1_000) return null;
  const names = new Set(snapshot.refs.map((r) => r.name));
  const findings: FindingContent[] = [];
  for (const f of a.findings as unknown[]) {
    if (typeof f !== "object" || f === null) return null;
    const x = f as Record<string, unknown>;
    if (!(FINDING_SEVERITIES as ReadonlyArray<unknown>).includes(x.severity)) return null;
    if (typeof x.category !== "string" || x.category.length > 128 || !CATEGORY.test(x.category)) return null;
    if (typeof x.claim !== "string" || x.claim.length === 0 || x.claim.length > 10_000) return null;
    if (!Array.isArray(x.evidence_refs) || x.evidence_refs.length > 256) return null;
    const refs = x.evidence_refs as unknown[];
    if (!refs.every((r): r is string => typeof r === "string" && names.has(r))) return null;
    findings.push({
      severity: x.severity as FindingSeverity,
      category: x.category,
      claim: x.claim,
      evidence_refs: [...new Set(refs as string[])].sort(),
    });
  }
  if (a.verdict === "issues" && findings.length === 0) return null;
  const rationale = typeof a.rationale === "string" ? a.rationale.slice(0, 10_000) : null;
  return { verdict: a.verdict as ReviewVerdict, findings, rationale };
}

/** How an attempt without an admissible answer is recorded when the Reviewer call threw. */
export type FailedOutcome = "timeout" | "unparseable" | "provider_failed";
const REPORTED: ReadonlyArray<FailedOutcome> = ["timeout", "unparseable", "provider_failed"];

/**
 * How a Reviewer call that threw is recorded. An answer the plugin host refused against the verify
 * response schema (`ASP_PLUGIN_BAD_OUTPUT`) is `unparseable`; a Reviewer may name its own failure
 * in `data.attempt_outcome` (`timeout`, `unparseable` or `provider_failed`: a label only, since none
 * of them is ever a pass); anything else is `provider_failed`. Pure, total.
 */
export function attemptOutcomeOfError(error: unknown): FailedOutcome {
  if (typeof error !== "object" || error === null) return "provider_failed";
  const e = error as { code?: unknown; data?: { attempt_outcome?: unknown } };
  if (e.code === "ASP_PLUGIN_BAD_OUTPUT") return "unparseable";
  const reported = typeof e.data === "object" && e.data !== null ? e.data.attempt_outcome : undefined;
  return REPORTED.find((o) => o === reported) ?? "provider_failed";
}

/**
 * The result of one bounded attempt. `tokens`: what the answer says it cost (input + output, as
 * the Reviewer's model endpoint reported them), 0 when it said nothing or there was no answer.
 */
export type AttemptResult = (
  | { readonly outcome: "verdict"; readonly verdict: ParsedVerdict }
  | { readonly outcome: Exclude<AttemptOutcome, "verdict">; readonly missing_coverage: ReadonlyArray<string> }
) & { readonly tokens?: number };

/** The tokens a Reviewer's answer reports (`usage`), or 0 when it reports none well-formed. Pure, total. */
export function answerTokens(answer: unknown): number {
  const usage = (answer as { usage?: { input_tokens?: unknown; output_tokens?: unknown } } | null)?.usage;
  const input = usage?.input_tokens;
  const output = usage?.output_tokens;
  if (!Number.isSafeInteger(input) || !Number.isSafeInteger(output)) return 0;
  if ((input as number) < 0 || (output as number) < 0) return 0;
  return (input as number) + (output as number);
}

/**
 * Run one attempt against a Reviewer: the evidence adapter first (missing coverage: no inference),
 * then the verifier under a timeout. A timeout, a thrown/rejected call and an inadmissible answer
 * are each recorded as their outcome; none is a pass.
 */
export async function runAttempt(
  reviewer: ReviewerPort,
  snapshot: EvidenceSnapshot,
  subject: unknown,
  timeoutMs: number,
): Promise<AttemptResult> {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), timeoutMs);
  });
  // One deadline covers the adapter and the inference call: neither may hang the run.
  const within = async <T>(work: () => T | Promise<T>): Promise<T | "timeout"> => Promise.race([work(), timeout]);
  try {
    let missing: ReadonlyArray<string> | "timeout";
    try {
      missing =
        reviewer.coverage === undefined
          ? []
          : await within(() => (reviewer.coverage as NonNullable<ReviewerPort["coverage"]>)(snapshot));
    } catch {
      return { outcome: "provider_failed", missing_coverage: [] };
    }
    if (missing === "timeout") return { outcome: "timeout", missing_coverage: [] };
    if (!Array.isArray(missing) || missing.some((m) => typeof m !== "string" || m.length === 0)) {
      return { outcome: "provider_failed", missing_coverage: [] };
    }
    if (missing.length > 0) return { outcome: "evidence_incomplete", missing_coverage: [...missing].sort() };
    let answer: unknown;
    try {
      answer = await within(() => reviewer.verifier.verify({ kind: "review", subject, signal: controller.signal }));
    } catch (error) {
      return { outcome: attemptOutcomeOfError(error), missing_coverage: [] };
    }
    if (answer === "timeout") {
      controller.abort();
      return { outcome: "timeout", missing_coverage: [] };
    }
    const verdict = parseVerdict(answer, snapshot);
    const tokens = answerTokens(answer);
    return verdict === null
      ? { outcome: "unparseable", missing_coverage: [], tokens }
      : { outcome: "verdict", verdict, tokens };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}
