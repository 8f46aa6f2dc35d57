import type { EvidenceSnapshot, RunIdentity } from "@asp/contracts";
import { canonicalBytes, parseCanonical } from "./canonical.js";
import { EvidenceError, type EvidenceErrorCode } from "./errors.js";
import { assertDigest, type Digest, digestBytes, isDigest } from "./hash.js";
import type { Store } from "./store.js";

/** What an evidence ref points at: a blob, a tree (checked recursively) or a fact log entry. */
export type EvidenceRefKind = "blob" | "tree" | "record";

/** One named ref of an evidence snapshot. */
export interface EvidenceRef {
  /** Unique within the snapshot (1–256 chars). */
  readonly name: string;
  readonly kind: EvidenceRefKind;
  readonly digest: Digest;
}

/** Input of {@link freezeSnapshot}. */
export interface FreezeInput {
  readonly refs: readonly EvidenceRef[];
  /** Free-form string labels (e.g. run id); part of the identity. */
  readonly labels?: Readonly<Record<string, string>>;
}

/** An immutable bundle of refs; `digest` covers the refs (sorted by name) and labels. */
export interface FrozenSnapshot {
  readonly digest: Digest;
  readonly refs: readonly EvidenceRef[];
  readonly labels: Readonly<Record<string, string>>;
}

/** One ref that failed {@link verifySnapshot}. */
export interface SnapshotFailure {
  readonly ref: EvidenceRef;
  readonly code: EvidenceErrorCode;
  readonly message: string;
}

/** Outcome of {@link verifySnapshot}. */
export interface SnapshotVerification {
  readonly ok: boolean;
  readonly digest: Digest;
  /** Objects and records re-hashed. */
  readonly checked: number;
  readonly failures: readonly SnapshotFailure[];
}

/** The part of a {@link Store} snapshots need. */
export type SnapshotStore = Pick<Store, "log" | "objects">;

const KINDS: ReadonlySet<string> = new Set(["blob", "tree", "record"]);
const SNAPSHOT_TYPE = "evidence-snapshot";

function normalize(input: FreezeInput): { refs: EvidenceRef[]; labels: Record<string, string> } {
  const bad = (message: string, data: Record<string, unknown> = {}): never => {
    throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", message, { data });
  };
  if (input === null || typeof input !== "object" || !Array.isArray(input.refs))
    bad("a snapshot needs { refs: [...] }");
  const refs = input.refs.map((r) => {
    if (typeof r?.name !== "string" || r.name.length === 0 || r.name.length > 256)
      bad("ref name must be 1-256 chars", { name: String(r?.name) });
    if (!KINDS.has(r.kind)) bad(`ref ${r.name} has unknown kind ${String(r.kind)}`, { name: r.name });
    assertDigest(r.digest, `ref ${r.name}`);
    return { name: r.name, kind: r.kind, digest: r.digest };
  });
  refs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (let i = 1; i < refs.length; i++)
    if (refs[i]?.name === refs[i - 1]?.name) bad(`two refs are named ${refs[i]?.name}`);
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(input.labels ?? {})) {
    if (typeof v !== "string") bad(`label ${k} must be a string`, { label: k });
    labels[k] = v;
  }
  return { refs, labels };
}

/** Check one ref; `deep` re-hashes every object under a tree, otherwise presence of the tree closure. */
async function check(store: SnapshotStore, ref: EvidenceRef, deep: boolean, seen: Set<string>): Promise<number> {
  let checked = 0;
  const blob = async (d: Digest): Promise<void> => {
    if (seen.has(`b${d}`)) return;
    seen.add(`b${d}`);
    if (deep) await store.objects.readBlob(d);
    else if (!(await store.objects.has("blob", d))) {
      throw new EvidenceError("ASP_EVIDENCE_NOT_FOUND", `blob ${d} is not in the store`, { data: { digest: d } });
    }
    checked++;
  };
  const tree = async (d: Digest): Promise<void> => {
    if (seen.has(`t${d}`)) return;
    seen.add(`t${d}`);
    const t = await store.objects.readTree(d);
    checked++;
    for (const e of t.entries) await (e.mode === "040000" ? tree(e.digest) : blob(e.digest));
  };
  if (ref.kind === "blob") await blob(ref.digest);
  else if (ref.kind === "tree") await tree(ref.digest);
  else {
    await store.log.readByDigest(ref.digest);
    checked++;
  }
  return checked;
}

/**
 * Freeze refs into an immutable evidence snapshot stored in the object store (as the blob of its
 * canonical JSON, so its id is both `digest(body)` and a blob id). Every ref must resolve: blobs
 * present, trees present with everything under them, records present and verified.
 *
 * @throws EvidenceError `ASP_EVIDENCE_UNRESOLVED_REF` naming the first ref that does not resolve
 *   (nothing is stored); `ASP_EVIDENCE_BAD_OBJECT` / `ASP_EVIDENCE_BAD_DIGEST` for malformed input.
 * @example
 * ```ts
 * const snap = await freezeSnapshot(store, { refs: [{ name: "worktree", kind: "tree", digest: tree }] });
 * ```
 */
export async function freezeSnapshot(store: SnapshotStore, input: FreezeInput): Promise<FrozenSnapshot> {
  const { refs, labels } = normalize(input);
  const seen = new Set<string>();
  for (const ref of refs) {
    try {
      await check(store, ref, false, seen);
    } catch (cause) {
      const code = (cause as EvidenceError).code ?? "unknown";
      throw new EvidenceError(
        "ASP_EVIDENCE_UNRESOLVED_REF",
        `ref ${ref.name} (${ref.kind} ${ref.digest}) does not resolve: ${code}`,
        {
          cause,
          data: { name: ref.name, kind: ref.kind, digest: ref.digest, reason: code },
        },
      );
    }
  }
  const bytes = canonicalBytes({ type: SNAPSHOT_TYPE, v: 1, refs, labels });
  const digest = await store.objects.putBlob(bytes);
  return { digest, refs, labels };
}

/**
 * Read an evidence snapshot (verified against its id).
 *
 * @throws EvidenceError `ASP_EVIDENCE_NOT_FOUND`, `ASP_EVIDENCE_INTEGRITY`, `ASP_EVIDENCE_BAD_OBJECT` (not a snapshot).
 */
export async function readSnapshot(store: SnapshotStore, digest: Digest): Promise<FrozenSnapshot> {
  const bytes = await store.objects.readBlob(digest);
  const v = parseCanonical(bytes, "evidence snapshot") as {
    type?: unknown;
    v?: unknown;
    refs?: unknown;
    labels?: unknown;
  };
  if (
    v?.type !== SNAPSHOT_TYPE ||
    v.v !== 1 ||
    !Array.isArray(v.refs) ||
    typeof v.labels !== "object" ||
    v.labels === null
  ) {
    throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", `blob ${digest} is not an evidence snapshot`, {
      data: { digest },
    });
  }
  const { refs, labels } = normalize({ refs: v.refs as EvidenceRef[], labels: v.labels as Record<string, string> });
  if (
    digestBytes(canonicalBytes({ type: SNAPSHOT_TYPE, v: 1, refs, labels })) !== digest ||
    !refs.every((r) => isDigest(r.digest))
  ) {
    throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", `blob ${digest} is not a canonical evidence snapshot`, {
      data: { digest },
    });
  }
  return { digest, refs, labels };
}

/**
 * Re-hash everything a snapshot names: the snapshot itself, every blob, every tree and all it
 * contains, every record (with its chain link). Reports each ref that fails with its code.
 *
 * @throws EvidenceError for the snapshot object itself (`ASP_EVIDENCE_NOT_FOUND`, `ASP_EVIDENCE_INTEGRITY`, `ASP_EVIDENCE_BAD_OBJECT`).
 */
export async function verifySnapshot(store: SnapshotStore, digest: Digest): Promise<SnapshotVerification> {
  const snap = await readSnapshot(store, digest);
  const failures: SnapshotFailure[] = [];
  const seen = new Set<string>();
  let checked = 1;
  for (const ref of snap.refs) {
    try {
      checked += await check(store, ref, true, seen);
    } catch (error) {
      const e = error as EvidenceError;
      failures.push({ ref, code: e.code ?? "ASP_EVIDENCE_INTEGRITY", message: e.message });
    }
  }
  return { ok: failures.length === 0, digest, checked, failures };
}

/** What {@link toEvidenceSnapshot} binds a frozen snapshot to. */
export interface EvidenceSnapshotBinding {
  readonly run: RunIdentity;
  readonly candidateId: string;
  /** ISO-8601 time the snapshot was frozen (the caller's clock). */
  readonly createdAt: string;
}

/**
 * Adapt a frozen snapshot to the Auto Mode contract's one Evidence Snapshot shape
 * (`@asp/contracts` `EvidenceSnapshot`): the same digest, refs and labels, bound to a run and a
 * candidate. A {@link FrozenSnapshot} exists only once every ref resolved, so it is `complete`.
 * Pure; the refs and labels are copied so the record cannot alias the snapshot.
 *
 * @throws EvidenceError `ASP_EVIDENCE_BAD_OBJECT` when the refs are not a canonical (sorted,
 *   uniquely named) frozen snapshot's, or `ASP_EVIDENCE_BAD_DIGEST` for a malformed digest.
 * @example
 * ```ts
 * const snap = await freezeSnapshot(store, { refs });
 * const record = toEvidenceSnapshot(snap, { run, candidateId: "cand-1", createdAt: new Date().toISOString() });
 * ```
 */
export function toEvidenceSnapshot(frozen: FrozenSnapshot, binding: EvidenceSnapshotBinding): EvidenceSnapshot {
  assertDigest(frozen.digest, "snapshot");
  const { refs, labels } = normalize({ refs: frozen.refs, labels: frozen.labels });
  if (refs.some((r, i) => r.name !== frozen.refs[i]?.name) || refs.length !== frozen.refs.length) {
    throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", "refs are not a frozen snapshot's (sorted by name)", {
      data: { digest: frozen.digest },
    });
  }
  return {
    digest: frozen.digest,
    run: { ...binding.run },
    candidate_id: binding.candidateId,
    complete: true,
    refs: refs.map((r) => ({ name: r.name, kind: r.kind, digest: r.digest })),
    labels,
    created_at: binding.createdAt,
  };
}
