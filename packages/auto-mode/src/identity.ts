import type { FindingSeverity, RunIdentity } from "@asp/contracts";
import { type Digest, digest } from "@asp/evidence";
import { checkRunIdentity } from "@asp/rollout";
import { AutoModeError } from "./errors.js";

/**
 * Check a run identity: root_frame_id + branch_id + turn_id + execution_id, each a non-empty
 * string of at most 256 characters, and nothing else (the one check, `@asp/rollout`'s
 * `checkRunIdentity`, under this package's code). Returns a copy.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION` naming the first bad field.
 */
export function checkRun(run: unknown): RunIdentity {
  try {
    return checkRunIdentity(run);
  } catch (cause) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", "not a run identity", {
      cause,
      data: { key: (cause as { data?: { key?: unknown } }).data?.key ?? "run" },
    });
  }
}

/**
 * The id of an Auto Run: the digest of its canonical identity (root_frame_id + branch_id +
 * turn_id + execution_id). Two runs differing in any one part have different ids. Pure.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION` for a malformed identity.
 */
export function runIdOf(run: RunIdentity): Digest {
  const r = checkRun(run);
  return digest({ type: "auto-run", run: r });
}

/** The content of a finding its fingerprint covers (the contract's "Finding identity"). */
export interface FindingContent {
  readonly severity: FindingSeverity;
  readonly category: string;
  readonly claim: string;
  readonly evidence_refs: ReadonlyArray<string>;
}

/**
 * A finding's fingerprint: content only (severity, category, claim and the evidence refs as a
 * set), so a finding that survives a repair round has the same fingerprint. Pure.
 */
export function findingFingerprint(content: FindingContent): Digest {
  const refs = [...new Set(content.evidence_refs)].sort();
  return digest({
    type: "finding-fingerprint",
    severity: content.severity,
    category: content.category,
    claim: content.claim,
    evidence_refs: refs,
  });
}

/**
 * A finding's identity: its content within one review run, so two review runs (two sessions)
 * reaching the same conclusion record two findings and never collide on one key. Pure.
 */
export function findingIdOf(reviewRunId: string, fingerprint: string): string {
  return `finding:${digest({ type: "finding-id", review_run_id: reviewRunId, fingerprint }).slice(7)}`;
}

/** A candidate's id: the run, the generation and the exact payload and snapshot digests. Pure. */
export function candidateIdOf(
  run: RunIdentity,
  generation: number,
  payloadDigest: string,
  snapshotDigest: string,
): string {
  return `candidate:${digest({ type: "candidate", run, generation, payload: payloadDigest, snapshot: snapshotDigest }).slice(7)}`;
}

/** The id of the `ordinal`-th review run of a candidate (1-based). Pure. */
export function reviewRunIdOf(run: RunIdentity, candidateId: string, ordinal: number): string {
  return `review:${digest({ type: "review-run", run, candidate_id: candidateId, ordinal }).slice(7)}`;
}

/**
 * The canonical fingerprint of a model-driven actor (an Engine or a Reviewer calling a model):
 * `model:<endpoint host[:port]>/<model>`, lower-cased, so a producer and a Reviewer using the same
 * model at the same endpoint compare equal, whatever their code, and the default
 * `distinct_fingerprint` policy refuses the pairing. Pure.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION` for an endpoint that is not an http(s) URL
 *   or an empty model.
 * @example
 * ```ts
 * modelFingerprint({ endpoint: "https://API.example.com/v1", model: "GPT-X" }); // "model:api.example.com/gpt-x"
 * ```
 */
export function modelFingerprint(input: { readonly endpoint: string; readonly model: string }): string {
  let host: string;
  try {
    const url = new URL(input.endpoint);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("scheme");
    host = url.host.toLowerCase();
  } catch {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", "a model fingerprint needs an http(s) endpoint URL", {
      data: { key: "endpoint" },
    });
  }
  const model = typeof input.model === "string" ? input.model.trim().toLowerCase() : "";
  if (model === "" || model.length > 128) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", "a model fingerprint needs a model name", {
      data: { key: "model" },
    });
  }
  return `model:${host}/${model}`;
}

/**
 * The canonical fingerprint of a deterministic actor (scripted engine, host-checks Reviewer):
 * `code:<id>@<digest of its code and trusted options>`. Pure.
 */
export function codeFingerprint(id: string, codeDigest: string): string {
  return `code:${id}@${codeDigest}`;
}

/** The id of a run's Repair Run of `round` (1-based) from a candidate. Pure. */
export function repairRunIdOf(run: RunIdentity, fromCandidateId: string, round: number): string {
  return `repair:${digest({ type: "repair-run", run, from_candidate_id: fromCandidateId, round }).slice(7)}`;
}

/** The id of a checkpoint: its frozen snapshot digest, named. Pure. */
export function checkpointIdOf(snapshotDigest: string): string {
  return `checkpoint:${snapshotDigest.replace(/^sha256:/, "").slice(0, 32)}`;
}
