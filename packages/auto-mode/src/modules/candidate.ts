import type { Candidate, EvidenceSnapshot } from "@asp/contracts";
import { type Digest, digestBytes, type EvidenceRef, freezeSnapshot, toEvidenceSnapshot } from "@asp/evidence";
import type { ActorIdentity, EngineStep } from "../engine.js";
import { candidateIdOf } from "../identity.js";
import type { MachineTransition } from "../machine.js";
import type { RunContext, TerminalOutcome } from "../run/context.js";
import { type Problems, type Rec, type RunFacts, same } from "./facts.js";
import type { RunBase } from "./storage.js";

// The candidate module: a completion frozen with its snapshot. Its activity stores the
// completion's bytes and commits `candidate_ready`; its proof checks every candidate is immutable,
// bound to its verified snapshot and payload, and re-derives its id.

/** The rows the candidate module adds to the run machine. */
export const CANDIDATE_ROWS: ReadonlyArray<MachineTransition> = [
  {
    module: "candidate",
    stage: "stage2_auto_run_storage",
    from: "started",
    on: "candidate_ready",
    to: "candidate",
    entry:
      "a valid completion, its immutable Evidence Snapshot, payload and Artifact versions committed in one transition",
    test: "runner.test.ts: AM.states.2",
  },
];

/** The Engine's completion step. */
export type Completion = Extract<EngineStep, { kind: "completion" }>;

/** A committed candidate with what review needs of it. */
export interface Produced {
  readonly candidate: Candidate;
  readonly snapshot: EvidenceSnapshot;
  readonly payload: Uint8Array;
}

const utf8 = new TextEncoder();

/**
 * Who produced a candidate that is not the Engine's first: a Repair Run's actor, from the
 * candidate it repaired (Stage 5). Absent: the run's producer, with no parent.
 */
export interface CandidateOrigin {
  readonly producer: ActorIdentity;
  readonly parent: string;
}

/**
 * The snapshot ref of a run with a workspace that lists every change the host holds there, as
 * JSON `[{ "path", "digest" }]` in path order; `digest` null for a removed file.
 */
export const CHANGES_REF = "changes";

/**
 * Activity: store the completion's bytes (with a workspace, its Artifacts are only the files the
 * host itself holds there), freeze its snapshot and commit the candidate transition.
 */
export async function commitCandidate(
  ctx: RunContext,
  completion: Completion,
  origin?: CandidateOrigin,
): Promise<Produced | TerminalOutcome> {
  if (typeof completion.payload !== "string" || completion.payload.length === 0) {
    return { kind: "reason", reason: "agent_failed", candidateId: null };
  }
  const { objects } = ctx.options.store;
  const payload = utf8.encode(completion.payload);
  const refs: EvidenceRef[] = [{ name: "payload", kind: "blob", digest: await objects.putBlob(payload) }];
  const versions: Candidate["artifact_versions"] = [];
  let artifacts: ReadonlyArray<{ artifact_id: string; version_id: string; bytes: Uint8Array }> = completion.artifacts;
  const workspace = ctx.options.workspace;
  if (workspace !== undefined) {
    let written: ReadonlyArray<{ path: string; bytes: Uint8Array | null }>;
    try {
      written = await workspace.changes();
    } catch {
      return { kind: "reason", reason: "safety_boundary", candidateId: null };
    }
    // With a workspace the Artifacts are only what the host itself holds there: an Engine's
    // claim about other files is never part of the candidate. The `changes` manifest names every
    // change, removals too, so a Reviewer judges the whole change, not only what was written.
    const manifest = written.map((w) => ({ path: w.path, digest: w.bytes === null ? null : digestBytes(w.bytes) }));
    refs.push({
      name: CHANGES_REF,
      kind: "blob",
      digest: await objects.putBlob(utf8.encode(JSON.stringify(manifest))),
    });
    artifacts = written.flatMap((w) =>
      w.bytes === null ? [] : [{ artifact_id: w.path, version_id: digestBytes(w.bytes).slice(7, 23), bytes: w.bytes }],
    );
  }
  try {
    for (const a of artifacts) {
      const d = await objects.putBlob(a.bytes);
      refs.push({ name: `artifact:${a.artifact_id}`, kind: "blob", digest: d });
      versions.push({ artifact_id: a.artifact_id, version_id: a.version_id, checksum: d });
    }
    for (const e of completion.evidence) {
      // The host's own ref names (the payload, the change manifest, the Artifacts) are never an
      // Engine's to take.
      if (e.name === "payload" || e.name === CHANGES_REF || e.name.startsWith("artifact:")) {
        return { kind: "reason", reason: "agent_failed", candidateId: null };
      }
      refs.push(
        "bytes" in e
          ? { name: e.name, kind: "blob", digest: await objects.putBlob(e.bytes) }
          : { ...e.ref, name: e.name },
      );
    }
  } catch {
    return { kind: "reason", reason: "agent_failed", candidateId: null };
  }
  const payloadDigest = refs[0]?.digest as Digest;
  let frozen: Awaited<ReturnType<typeof freezeSnapshot>>;
  try {
    // A snapshot that cannot be frozen completely (an unresolved ref: a partial snapshot) is the
    // safety boundary, never a candidate.
    frozen = await freezeSnapshot(ctx.options.store, { refs, labels: { run_id: ctx.runId } });
  } catch {
    return { kind: "reason", reason: "safety_boundary", candidateId: null };
  }
  const generation = ctx.record.generation + 1;
  const candidateId = candidateIdOf(ctx.run, generation, payloadDigest, frozen.digest);
  const at = ctx.now();
  const snapshot = toEvidenceSnapshot(frozen, { run: ctx.run, candidateId, createdAt: at });
  const candidate: Candidate = {
    candidate_id: candidateId,
    run: ctx.run,
    snapshot_digest: frozen.digest,
    payload_digest: payloadDigest,
    artifact_versions: versions,
    producer: { ...(origin?.producer ?? ctx.producer) },
    review_status: "candidate",
    parent_candidate_id: origin?.parent ?? null,
    created_at: at,
  };
  await ctx.commit(
    {
      event_id: ctx.nextEventId(),
      type: "candidate_ready",
      run: ctx.run,
      committed_at: at,
      candidate_id: candidateId,
      snapshot_digest: frozen.digest,
    },
    [
      { kind: "snapshot", record: snapshot },
      { kind: "candidate", record: candidate },
    ],
    { state: "candidate", candidate_id: candidateId, generation },
  );
  return { candidate, snapshot, payload };
}

/** What the candidate proof establishes: every committed candidate, its promotions, the latest. */
export interface CandidateSet {
  readonly candidates: ReadonlyMap<string, Rec<Candidate>>;
  /** Later records of an already committed candidate (only a Verified promotion may be one). */
  readonly promotions: ReadonlyArray<Rec<Candidate>>;
  readonly snapshots: ReadonlyMap<string, EvidenceSnapshot>;
  /** The candidate the latest run record points at. */
  readonly latest: Rec<Candidate> | undefined;
}

/**
 * Prove the candidates: each immutable, committed with its `candidate_ready` and its Evidence
 * Snapshot in one transition, the snapshot and payload re-hashing in the object store, the
 * producer the frozen one, the id re-deriving from its generation and digests.
 */
export function proveCandidates(facts: RunFacts, base: RunBase, bad: Problems): CandidateSet {
  const { recs, events, input } = facts;
  const { first, run, runs, latestRun } = base;
  const candidates = new Map<string, Rec<Candidate>>();
  const promotions: Rec<Candidate>[] = [];
  const snapshots = new Map<string, EvidenceSnapshot>();
  for (const s of recs.snapshot as ReadonlyArray<Rec<EvidenceSnapshot>>) snapshots.set(s.body.candidate_id, s.body);
  for (const c of recs.candidate as ReadonlyArray<Rec<Candidate>>) {
    const prior = candidates.get(c.body.candidate_id);
    if (prior !== undefined) {
      promotions.push(c);
      if (!same({ ...c.body, review_status: "candidate" }, prior.body)) bad(`candidate ${c.body.candidate_id} mutated`);
      continue;
    }
    candidates.set(c.body.candidate_id, c);
    const ready = events.get(c.event_id)?.event;
    const snap = snapshots.get(c.body.candidate_id);
    if (ready?.type !== "candidate_ready" || ready.candidate_id !== c.body.candidate_id) {
      bad(`candidate ${c.body.candidate_id} did not commit with its candidate_ready`);
    } else if (ready.snapshot_digest !== c.body.snapshot_digest) bad("candidate_ready names another snapshot");
    if (c.body.review_status !== "candidate")
      bad(`candidate ${c.body.candidate_id} committed as ${c.body.review_status}`);
    if (snap === undefined || snap.digest !== c.body.snapshot_digest) {
      bad(`candidate ${c.body.candidate_id} has no matching Evidence Snapshot`);
    } else if (
      !recs.snapshot.some((s) => s.event_id === c.event_id && (s.body as EvidenceSnapshot).digest === snap.digest)
    ) {
      bad(`snapshot of ${c.body.candidate_id} not committed in the candidate transition`);
    }
    const frozen = input.snapshots[c.body.snapshot_digest];
    if (frozen === undefined || frozen === null) bad(`snapshot ${c.body.snapshot_digest} does not verify`);
    else if (snap !== undefined && (!same(snap.refs, frozen.refs) || !same(snap.labels, frozen.labels))) {
      bad(`the snapshot record of ${c.body.candidate_id} differs from the frozen snapshot`);
    }
    if (input.payloadsVerified[c.body.payload_digest] !== true) bad(`payload ${c.body.payload_digest} does not verify`);
    // A repaired candidate's producer is its Repair Run's actor (the repair proof checks it); every
    // other candidate is the run's producer, under the frozen fingerprint.
    if (
      c.body.parent_candidate_id === null &&
      !same(c.body.producer, { ...c.body.producer, fingerprint: first.independence.producer_fingerprint })
    ) {
      bad(`candidate ${c.body.candidate_id} producer fingerprint drifted from the frozen one`);
    }
  }
  for (const c of candidates.values()) {
    const gen = runs.find((r) => r.event_id === c.event_id)?.body.generation;
    if (
      gen === undefined ||
      candidateIdOf(run, gen, c.body.payload_digest, c.body.snapshot_digest) !== c.body.candidate_id
    ) {
      bad(`candidate ${c.body.candidate_id} id does not re-derive`);
    }
  }
  const latest = latestRun.candidate_id === null ? undefined : candidates.get(latestRun.candidate_id);
  if (latestRun.candidate_id !== null && latest === undefined)
    bad("the run points at a candidate that never committed");
  return { candidates, promotions, snapshots, latest };
}
