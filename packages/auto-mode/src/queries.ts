import { type Candidate, type Digest, type RunIdentity, SUBJECT_KINDS, type SubjectKind } from "@asp/contracts";
import type { FactEntry, FactLog, ObjectStore } from "@asp/evidence";
import { AUTO_FACT_KINDS, type AutoEvent, type RecordFact, RUN_ID_INDEX } from "./durable.js";
import { AutoModeError } from "./errors.js";
import { runIdOf } from "./identity.js";

/** How many facts one page of a backwards scan reads. */
const SCAN_PAGE = 256;

/** Walk facts of one kind from the newest down (below `before`, when given), a page at a time. */
async function* newestFirst(log: Pick<FactLog, "list">, kind: string, before?: number): AsyncGenerator<FactEntry> {
  let cursor = before;
  for (;;) {
    const page = await log.list({
      kind,
      reverse: true,
      limit: SCAN_PAGE,
      ...(cursor === undefined ? {} : { afterSeq: cursor }),
    });
    yield* page;
    const last = page.at(-1);
    if (page.length < SCAN_PAGE || last === undefined) return;
    cursor = last.seq;
  }
}

/**
 * Check a page request: `limit` an integer from 1 to `max`, `before` (when given) a positive seq.
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION` naming the field.
 */
function checkPage(limit: number, max: number, before: number | undefined): number {
  if (!Number.isInteger(limit) || limit < 1 || limit > max) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", `limit is an integer from 1 to ${max}`, {
      data: { field: "limit" },
    });
  }
  if (before !== undefined && (!Number.isSafeInteger(before) || before < 1)) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", "before is a positive integer (a seq)", {
      data: { field: "before" },
    });
  }
  return limit;
}

/** What {@link listFrameAudits} is asked. */
export interface FrameAuditQuery {
  /** Only audits of this control plane (`result_review` or `permission_review`). */
  readonly subjectKind?: SubjectKind;
  /** Only events committed before this seq (the `next` of an earlier page). */
  readonly before?: number;
  /** At most this many rows (1–500, default 50). */
  readonly limit?: number;
}

/** One committed `auto_audit_started` or `auto_audit_completed` event and where it sits in the log. */
export interface FrameAuditRow {
  readonly seq: number;
  readonly at: string;
  readonly event: AutoEvent;
}

/** A page of a frame's audit events, newest first; `next` is the `before` of the next page, or null. */
export interface FrameAuditPage {
  readonly root_frame_id: string;
  readonly audits: readonly FrameAuditRow[];
  readonly next: number | null;
}

/**
 * The audit events of every run of one root frame (`GET /api/v1/frames/{fid}/auto-audits`):
 * the committed `auto_audit_started` and `auto_audit_completed` events, result and permission
 * reviews alike (one pair per `audit_id`), newest first, read from the verified fact log. Only
 * committed events are ever listed; a completion is the event as committed, its assessment and
 * `assessment_digest` included.
 *
 * The scan reads the log's canonical events newest first, a page at a time, so a page costs at
 * most the events committed since its cursor.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION` for a subject kind outside the vocabulary or a
 *   limit or cursor out of range. EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN` when the log does not verify.
 */
export async function listFrameAudits(
  log: Pick<FactLog, "list">,
  rootFrameId: string,
  query: FrameAuditQuery = {},
): Promise<FrameAuditPage> {
  const limit = checkPage(query.limit ?? 50, 500, query.before);
  if (query.subjectKind !== undefined && !SUBJECT_KINDS.includes(query.subjectKind)) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", `subject_kind is one of ${SUBJECT_KINDS.join(", ")}`, {
      data: { field: "subject_kind" },
    });
  }
  const audits: FrameAuditRow[] = [];
  for await (const entry of newestFirst(log, AUTO_FACT_KINDS.event, query.before)) {
    const event = entry.record as unknown as AutoEvent & { run?: { root_frame_id?: unknown }; subject_kind?: unknown };
    if (event.type !== "auto_audit_started" && event.type !== "auto_audit_completed") continue;
    if (event.run?.root_frame_id !== rootFrameId) continue;
    if (query.subjectKind !== undefined && event.subject_kind !== query.subjectKind) continue;
    audits.push({ seq: entry.seq, at: entry.at, event });
    if (audits.length === limit) break;
  }
  const last = audits.at(-1);
  return { root_frame_id: rootFrameId, audits, next: audits.length === limit && last !== undefined ? last.seq : null };
}

/** What {@link listAutoRuns} is asked. */
export interface AutoRunQuery {
  /** Only the runs of this root frame. */
  readonly rootFrameId?: string;
  /** Only runs started before this seq (the `next` of an earlier page). */
  readonly before?: number;
  /** At most this many runs (1–100, default 20). */
  readonly limit?: number;
}

/** One run as {@link listAutoRuns} lists it: where its `auto_run_started` committed, its id and identity. */
export interface AutoRunRow {
  readonly seq: number;
  readonly at: string;
  readonly run_id: string;
  readonly run: RunIdentity;
}

/**
 * The Auto Runs of a store, newest first, from their committed `auto_run_started` events
 * (optionally of one root frame), paged by a `before` seq; `next` is the next page's cursor or null.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_INVALID_OPTION` for a limit or cursor out of range.
 *   EvidenceError `ASP_EVIDENCE_CHAIN_BROKEN` when the log does not verify.
 */
export async function listAutoRuns(
  log: Pick<FactLog, "list">,
  query: AutoRunQuery = {},
): Promise<{ readonly runs: readonly AutoRunRow[]; readonly next: number | null }> {
  const limit = checkPage(query.limit ?? 20, 100, query.before);
  const runs: AutoRunRow[] = [];
  for await (const entry of newestFirst(log, AUTO_FACT_KINDS.event, query.before)) {
    const event = entry.record as unknown as { type?: unknown; run?: RunIdentity };
    if (event.type !== "auto_run_started" || event.run === undefined) continue;
    if (query.rootFrameId !== undefined && event.run.root_frame_id !== query.rootFrameId) continue;
    runs.push({ seq: entry.seq, at: entry.at, run_id: runIdOf(event.run), run: event.run });
    if (runs.length === limit) break;
  }
  const last = runs.at(-1);
  return { runs, next: runs.length === limit && last !== undefined ? last.seq : null };
}

/** Where one Artifact version was committed: the candidate that names it. */
export interface ArtifactVersionSource {
  readonly run_id: string;
  readonly candidate_id: string;
  readonly seq: number;
}

/** One frozen Artifact version and its bytes, verified against its checksum. */
export interface ArtifactVersion {
  readonly artifact_id: string;
  readonly version_id: string;
  readonly checksum: Digest;
  readonly bytes: Uint8Array;
  /** Every committed candidate that names this version (the same bytes), once each, oldest first. */
  readonly sources: readonly ArtifactVersionSource[];
}

/**
 * The frozen bytes of one Artifact version (`GET /api/v1/artifacts/versions/{version_id}`),
 * found through the committed candidates that name it and read from the object store, which
 * verifies them against the checksum the candidate committed. A version id that names two
 * different checksums (an Engine may choose its version ids) is refused rather than guessed.
 *
 * @throws AutoModeError `ASP_AUTO_MODE_VERSION_NOT_FOUND` when no committed candidate names the
 *   version; `ASP_AUTO_MODE_VERSION_AMBIGUOUS` (`data.checksums`) when candidates name it with
 *   different bytes or Artifacts. EvidenceError `ASP_EVIDENCE_INTEGRITY` or
 *   `ASP_EVIDENCE_NOT_FOUND` when the bytes are damaged or missing; `ASP_EVIDENCE_CHAIN_BROKEN`.
 */
export async function readArtifactVersion(
  store: { readonly log: Pick<FactLog, "list">; readonly objects: Pick<ObjectStore, "readBlob"> },
  versionId: string,
): Promise<ArtifactVersion> {
  if (typeof versionId !== "string" || versionId.length === 0 || versionId.length > 256) {
    throw new AutoModeError("ASP_AUTO_MODE_INVALID_OPTION", "a version id is 1–256 characters", {
      data: { field: "version_id" },
    });
  }
  const found = new Map<string, { artifact_id: string; checksum: Digest; sources: ArtifactVersionSource[] }>();
  for (const entry of await store.log.list({ kind: AUTO_FACT_KINDS.candidate })) {
    const candidate = (entry.record as unknown as RecordFact).body as Candidate;
    for (const v of candidate.artifact_versions) {
      if (v.version_id !== versionId) continue;
      const key = `${v.artifact_id}\u0000${v.checksum}`;
      const row = found.get(key) ?? { artifact_id: v.artifact_id, checksum: v.checksum as Digest, sources: [] };
      // A candidate is committed again as it moves (verified, repaired): name it once, where it was first.
      if (!row.sources.some((x) => x.candidate_id === candidate.candidate_id)) {
        row.sources.push({ run_id: runIdOfEntry(entry), candidate_id: candidate.candidate_id, seq: entry.seq });
      }
      found.set(key, row);
    }
  }
  const rows = [...found.values()];
  const [only] = rows;
  if (only === undefined) {
    throw new AutoModeError("ASP_AUTO_MODE_VERSION_NOT_FOUND", `no committed candidate names version ${versionId}`, {
      data: { version_id: versionId },
    });
  }
  if (rows.length > 1) {
    throw new AutoModeError(
      "ASP_AUTO_MODE_VERSION_AMBIGUOUS",
      `version ${versionId} names ${rows.length} different Artifacts or checksums; ask for it through its candidate`,
      { data: { version_id: versionId, checksums: rows.map((r) => r.checksum) } },
    );
  }
  const bytes = await store.objects.readBlob(only.checksum);
  return {
    artifact_id: only.artifact_id,
    version_id: versionId,
    checksum: only.checksum,
    bytes,
    sources: only.sources,
  };
}

function runIdOfEntry(entry: FactEntry): string {
  return entry.index.find((k) => k.name === RUN_ID_INDEX)?.value ?? "";
}
