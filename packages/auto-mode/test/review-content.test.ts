import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Verifier, VerifyRequest } from "@asp/contracts";
import { createMemoryStore, type Digest, type Store, snapshotWorktree } from "@asp/evidence";
import { afterEach, describe, expect, it } from "vitest";
import { scopeReviewContent } from "../src/index.js";

const utf8 = new TextEncoder();
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));
const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f();
});

async function store(): Promise<Store> {
  const s = await createMemoryStore();
  cleanup.push(() => s.close());
  return s;
}

/** A review request as the review module builds it: `{ candidate_id, payload, snapshot }`. */
const request = (refs: Array<{ name: string; kind: "blob" | "tree" | "record"; digest: Digest }>): VerifyRequest =>
  ({ kind: "review", subject: { candidate_id: "c1", payload: "p", snapshot: { refs } } }) as unknown as VerifyRequest;

describe("scopeReviewContent: a Reviewer reads only the evidence it is asked to judge", () => {
  it("attack: a Reviewer probing the store for another run's blob and a guessed password gets null, as for a missing one", async () => {
    const s = await store();
    const payload = await s.objects.putBlob(utf8.encode("the candidate's answer"));
    const otherRun = await s.objects.putBlob(utf8.encode("another run's private artifact"));
    const guessed = await s.objects.putBlob(utf8.encode("hunter2"));
    const dir = mkdtempSync(join(tmpdir(), "asp-review-scope-"));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    mkdirSync(join(dir, "src"));
    writeFileSync(join(dir, "src", "a.ts"), "export const a = 1;\n");
    const { tree } = await snapshotWorktree(dir, { store: s });
    const inTree = await s.objects.putBlob(utf8.encode("export const a = 1;\n"));

    const scope = scopeReviewContent(s.objects);
    const seen: Record<string, string | null> = {};
    // FAKE (fault injection): a hostile Reviewer that reads every digest it can name.
    const hostile: Verifier = {
      verify: async () => {
        for (const [name, d] of Object.entries({ payload, otherRun, guessed, inTree, tree }))
          seen[name] = text(await scope.content.read(d as Digest));
        return { kind: "review", verdict: "pass", findings: [] } as never;
      },
    };
    const bound = scope.bind(hostile);
    await bound.verify(
      request([
        { name: "payload", kind: "blob", digest: payload },
        { name: "worktree", kind: "tree", digest: tree },
      ]),
    );
    expect(seen).toEqual({
      payload: "the candidate's answer",
      inTree: "export const a = 1;\n",
      otherRun: null,
      guessed: null,
      tree: null, // a tree is not a blob: walking the store is not the Reviewer's
    });
    // Outside a review nothing reads, not even the last request's evidence.
    expect(await scope.content.read(payload)).toBeNull();
  });

  it("closes the scope when the verify throws, and a request without a snapshot opens nothing", async () => {
    const s = await store();
    const payload = await s.objects.putBlob(utf8.encode("x"));
    const scope = scopeReviewContent(s.objects);
    let during: Uint8Array | null | undefined;
    const throwing = scope.bind({
      verify: async () => {
        during = await scope.content.read(payload);
        throw new Error("the Reviewer failed");
      },
    });
    await expect(throwing.verify(request([{ name: "payload", kind: "blob", digest: payload }]))).rejects.toThrow(
      "the Reviewer failed",
    );
    expect(text(during ?? null)).toBe("x");
    expect(await scope.content.read(payload)).toBeNull();

    const bare = scope.bind({
      verify: async () => {
        during = await scope.content.read(payload);
        return { kind: "review", verdict: "pass", findings: [] } as never;
      },
    });
    await bare.verify({ kind: "review", subject: { candidate_id: "c1" } } as unknown as VerifyRequest);
    expect(during).toBeNull();
  });
});
