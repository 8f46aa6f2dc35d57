import type { EvidenceSnapshot, Verifier, VerifyRequest, VerifyResponse } from "@asp/contracts";
import { type Digest, listTree, type ObjectStore } from "@asp/evidence";

/** What a Reviewer's content port reads: a blob's bytes by digest, or null. */
export interface ReviewContentReader {
  read(digest: Digest): Promise<Uint8Array | null>;
}

/** A content port bounded to the evidence of the review in flight ({@link scopeReviewContent}). */
export interface ReviewContentScope {
  /** The port to give the Reviewer: null for any digest outside an in-flight review's snapshot. */
  readonly content: ReviewContentReader;
  /** `verifier` with each `verify` opening the scope of its request's snapshot for as long as it runs. */
  bind(verifier: Verifier): Verifier;
}

/** The snapshot a review request carries (`subject.snapshot`, as the review module builds it). */
function snapshotOf(request: VerifyRequest): EvidenceSnapshot | undefined {
  const subject = (request as { subject?: unknown }).subject;
  const snapshot = (subject as { snapshot?: unknown } | null | undefined)?.snapshot;
  const refs = (snapshot as { refs?: unknown } | null | undefined)?.refs;
  return Array.isArray(refs) ? (snapshot as EvidenceSnapshot) : undefined;
}

/**
 * Bound a Reviewer's content port to what it is asked to judge. The store holds every run's and
 * every repository's blobs; a port that answers any digest lets a Reviewer confirm a guessed
 * low-entropy file (a password, a key) anywhere in it, or read another run's material. Scoped,
 * a digest reads only while a `verify` is in flight and only when it is a `blob` ref of that
 * request's frozen snapshot or a file under one of its `tree` refs; anything else is null, as
 * for a digest the store lacks, so the answer reveals nothing.
 */
export function scopeReviewContent(objects: ObjectStore): ReviewContentScope {
  /** In-flight reviews: each the set of blob digests its snapshot reaches. */
  const open = new Set<Set<string>>();
  const reach = async (snapshot: EvidenceSnapshot | undefined): Promise<Set<string>> => {
    const blobs = new Set<string>();
    for (const ref of snapshot?.refs ?? []) {
      if (ref.kind === "blob") blobs.add(ref.digest);
      else if (ref.kind === "tree") {
        for (const file of await listTree(objects, ref.digest as Digest)) blobs.add(file.digest);
      }
    }
    return blobs;
  };
  return Object.freeze({
    content: Object.freeze({
      read: async (digest: Digest): Promise<Uint8Array | null> => {
        if (![...open].some((blobs) => blobs.has(digest))) return null;
        return (await objects.has("blob", digest)) ? objects.readBlob(digest) : null;
      },
    }),
    bind: (verifier: Verifier): Verifier =>
      Object.freeze({
        ...verifier,
        verify: async (request: VerifyRequest): Promise<VerifyResponse> => {
          const blobs = await reach(snapshotOf(request));
          open.add(blobs);
          try {
            return await verifier.verify(request);
          } finally {
            open.delete(blobs);
          }
        },
      }),
  });
}
