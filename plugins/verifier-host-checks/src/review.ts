import type {
  EvidenceSnapshot,
  FindingSeverity,
  HostChecks,
  HostChecksFinding,
  ReviewFinding,
  ReviewResponse,
  Severity,
} from "@asp/contracts";
import { HostChecksReviewError } from "./errors.js";

/** What the Auto Run core sends a Reviewer: the candidate, its payload text and its Evidence Snapshot. */
export interface ReviewSubject {
  readonly candidate_id: string;
  readonly payload: string;
  readonly snapshot: EvidenceSnapshot;
}

/** The prefix of a file artifact's ref in a snapshot: `artifact:<repository-relative path>`. */
export const ARTIFACT_PREFIX = "artifact:";

/** At most this many findings in one answer (the contracts `plugin-verify-response` bound). */
const MAX_FINDINGS = 1_000;

/** How a host diagnostic's effective severity maps to a review finding's severity. */
export const SEVERITY_OF: Readonly<Record<Severity, FindingSeverity>> = Object.freeze({
  error: "major",
  warning: "minor",
  info: "info",
  hint: "info",
});

/** `host_check.<provider>`, lowercase, every character outside `[a-z0-9_.-]` as `_`, at most 128. */
export function categoryOf(provider: string): string {
  return `host_check.${provider.toLowerCase().replace(/[^a-z0-9_.-]/g, "_")}`.slice(0, 128);
}

/** `path:line code message` (the parts it has), bounded to the claim limit. */
export function claimOf(f: HostChecksFinding): string {
  const at = f.path === undefined ? "" : `${f.path}${f.line === undefined ? "" : `:${f.line}`} `;
  return `${at}${f.code} ${f.message}`.slice(0, 10_000);
}

/**
 * The file artifacts of a snapshot: each blob ref named `artifact:<path>` (the artifact id is
 * the repository-relative path). The host checks every path and blob again.
 *
 * @throws HostChecksReviewError `ASP_HOST_CHECKS_NOT_A_SUBJECT` when the subject is not a review
 *   subject; `ASP_HOST_CHECKS_NO_FILES` when it has no file artifact (there is nothing this
 *   Reviewer can judge: never a pass).
 */
export function filesOf(subject: unknown): Array<{ readonly path: string; readonly digest: string }> {
  const refs = (subject as { snapshot?: { refs?: unknown } } | null)?.snapshot?.refs;
  if (!Array.isArray(refs)) {
    throw new HostChecksReviewError("ASP_HOST_CHECKS_NOT_A_SUBJECT", "the subject has no evidence snapshot refs");
  }
  const files = (refs as Array<{ name?: unknown; kind?: unknown; digest?: unknown }>)
    .filter((r) => typeof r.name === "string" && r.name.startsWith(ARTIFACT_PREFIX) && r.kind === "blob")
    .map((r) => ({ path: (r.name as string).slice(ARTIFACT_PREFIX.length), digest: String(r.digest) }));
  if (files.length === 0) {
    throw new HostChecksReviewError("ASP_HOST_CHECKS_NO_FILES", "the candidate has no file artifact to check");
  }
  return files;
}

/**
 * Review a candidate: its file artifacts go to the host's checks (a gate evaluation over the
 * committed base, receipted by the host); `allow` is a pass, `deny` is `issues` with one finding
 * per gating finding, and anything else throws (the runner records `provider_failed`, never a pass).
 *
 * @throws HostChecksReviewError `ASP_HOST_CHECKS_NOT_A_SUBJECT`, `ASP_HOST_CHECKS_NO_FILES`,
 *   `ASP_HOST_CHECKS_INDETERMINATE` (the host could not decide, or denied without a gating finding);
 *   any error of the host's checks (a refused path) as is.
 */
export async function reviewWithHostChecks(
  subject: unknown,
  ports: { readonly checks: HostChecks },
): Promise<ReviewResponse> {
  const files = filesOf(subject);
  // The host checks every path, and that every blob is in its store, before it evaluates anything.
  const result = await ports.checks.evaluate({ files });
  if (result.decision === "allow") return { kind: "review", verdict: "pass", findings: [] };
  if (result.decision !== "deny" || result.findings.length === 0) {
    throw new HostChecksReviewError(
      "ASP_HOST_CHECKS_INDETERMINATE",
      `the host's checks decided ${String(result.decision)} (receipt ${String(result.receipt_id)})`,
      { data: { receipt_id: String(result.receipt_id) } },
    );
  }
  const artifacts = new Set(files.map((f) => f.path));
  const findings = result.findings.slice(0, MAX_FINDINGS).map(
    (f): ReviewFinding => ({
      severity: SEVERITY_OF[f.severity] ?? "major",
      category: categoryOf(f.provider),
      claim: claimOf(f),
      evidence_refs: [f.path !== undefined && artifacts.has(f.path) ? `${ARTIFACT_PREFIX}${f.path}` : "payload"],
      title: `${f.code}`.slice(0, 1_000) || "host check",
      detail: `receipt ${result.receipt_id}`.slice(0, 10_000),
      ...(f.path === undefined ? {} : { path: f.path.slice(0, 4_096) }),
    }),
  );
  return { kind: "review", verdict: "issues", findings };
}
