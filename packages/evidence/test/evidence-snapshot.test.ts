import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { validate } from "@asp/contracts";
import { afterEach, describe, expect, it } from "vitest";
import {
  blobDigest,
  digest,
  type EvidenceRef,
  freezeSnapshot,
  openStore,
  readSnapshot,
  type Store,
  snapshotWorktree,
  toEvidenceSnapshot,
  verifySnapshot,
} from "../src/index.js";
import { BACKENDS } from "./helpers/stores.js";
import { rawSpace, tempDir, withRawLevel } from "./helpers/tmp.js";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function evidence(store: Store): Promise<EvidenceRef[]> {
  const dir = tempDir();
  writeFileSync(join(dir, "a.txt"), "a");
  writeFileSync(join(dir, "b.txt"), "b");
  const { tree } = await snapshotWorktree(dir, { store });
  const blob = await store.objects.putBlob(enc("assessment"));
  const [record] = await store.log.append([{ kind: "decision", record: { verdict: "allow" } }]);
  return [
    { name: "worktree", kind: "tree", digest: tree },
    { name: "assessment", kind: "blob", digest: blob },
    { name: "decision", kind: "record", digest: record?.digest ?? digest(null) },
  ];
}

describe.each(BACKENDS)("evidence snapshots (%s)", (_name, make) => {
  const fresh = async (): Promise<Store> => {
    const s = await make();
    open.push(s);
    return s;
  };

  describe("when every ref resolves", () => {
    it("freezes them into an immutable bundle whose id does not depend on ref order", async () => {
      const store = await fresh();
      const refs = await evidence(store);
      const a = await freezeSnapshot(store, { refs, labels: { run: "r1" } });
      const b = await freezeSnapshot(store, { refs: [...refs].reverse(), labels: { run: "r1" } });
      expect(a.digest).toBe(b.digest);
      expect(a.digest).not.toBe((await freezeSnapshot(store, { refs, labels: { run: "r2" } })).digest);
      expect(await readSnapshot(store, a.digest)).toEqual(a);
      expect(await verifySnapshot(store, a.digest)).toMatchObject({ ok: true, failures: [] });
    });
  });

  describe("AM.states.2 when adapted to the contract's Evidence Snapshot", () => {
    const run = { root_frame_id: "f", branch_id: "b", turn_id: "t", execution_id: "e" };
    it("is the one contract shape: same digest, refs and labels, bound to run and candidate, complete", async () => {
      const store = await fresh();
      const snap = await freezeSnapshot(store, { refs: await evidence(store), labels: { run: "r1" } });
      const record = toEvidenceSnapshot(snap, { run, candidateId: "cand-1", createdAt: "2026-12-01T10:00:00Z" });
      expect(validate("evidence-snapshot", record)).toMatchObject({ ok: true });
      expect(record).toMatchObject({
        digest: snap.digest,
        candidate_id: "cand-1",
        complete: true,
        labels: { run: "r1" },
      });
      expect(record.refs.map((r) => r.name)).toEqual(snap.refs.map((r) => r.name));
      expect((await readSnapshot(store, snap.digest)).refs).toEqual(record.refs);
    });

    it("refuses refs that are not a frozen snapshot's", async () => {
      const store = await fresh();
      const snap = await freezeSnapshot(store, { refs: await evidence(store) });
      const forged = { ...snap, refs: [...snap.refs].reverse() };
      expect(() =>
        toEvidenceSnapshot(forged, { run, candidateId: "c", createdAt: "2026-12-01T10:00:00Z" }),
      ).toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
    });
  });

  describe("when a ref does not resolve", () => {
    it.each([
      ["blob", { name: "x", kind: "blob", digest: blobDigest(enc("never stored")) }],
      ["tree", { name: "x", kind: "tree", digest: blobDigest(enc("no tree")) }],
      ["record", { name: "x", kind: "record", digest: digest({ not: "appended" }) }],
    ] as const)("freeze fails with UNRESOLVED_REF for a missing %s", async (_kind, ref) => {
      const store = await fresh();
      const refs = await evidence(store);
      await expect(freezeSnapshot(store, { refs: [...refs, ref] })).rejects.toThrowWithCode(
        "ASP_EVIDENCE_UNRESOLVED_REF",
      );
    });

    it("freeze fails when a tree's content is incomplete", async () => {
      const store = await fresh();
      const tree = await store.objects.putTree([{ name: "ghost", mode: "100644", digest: blobDigest(enc("ghost")) }]);
      await expect(
        freezeSnapshot(store, { refs: [{ name: "t", kind: "tree", digest: tree }] }),
      ).rejects.toThrowWithCode("ASP_EVIDENCE_UNRESOLVED_REF");
    });
  });

  describe("when the input is malformed", () => {
    it("rejects duplicate names and unknown kinds", async () => {
      const store = await fresh();
      const refs = await evidence(store);
      await expect(
        freezeSnapshot(store, { refs: [refs[1] as EvidenceRef, refs[1] as EvidenceRef] }),
      ).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
      await expect(
        freezeSnapshot(store, { refs: [{ ...(refs[1] as EvidenceRef), kind: "file" as "blob" }] }),
      ).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
    });

    it("refuses to read a blob that is not a snapshot", async () => {
      const store = await fresh();
      const blob = await store.objects.putBlob(enc('{"type":"other"}'));
      await expect(readSnapshot(store, blob)).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
    });
  });
});

describe("verifySnapshot (level)", () => {
  describe("when an object under a frozen tree is corrupted on disk", () => {
    it("re-hashes everything and names the failing ref", async () => {
      const dir = join(tempDir(), "store");
      const store = await openStore(dir);
      const refs = await evidence(store);
      const snap = await freezeSnapshot(store, { refs });
      await store.close();
      await withRawLevel(dir, (db) => rawSpace(db, "blob").put(blobDigest(enc("b")), enc("B")));
      const again = await openStore(dir);
      open.push(again);
      const result = await verifySnapshot(again, snap.digest);
      expect(result.ok).toBe(false);
      expect(result.failures.map((f) => [f.ref.name, f.code])).toEqual([["worktree", "ASP_EVIDENCE_INTEGRITY"]]);
    });
  });
});
