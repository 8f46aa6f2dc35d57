import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { blobDigest, type Digest, encodeTree, openStore, type Store } from "../src/index.js";
import { BACKENDS } from "./helpers/stores.js";
import { rawSpace, tempDir, withRawLevel } from "./helpers/tmp.js";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const open: Store[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

describe.each(BACKENDS)("ObjectStore (%s)", (_name, make) => {
  const fresh = async (): Promise<Store> => {
    const s = await make();
    open.push(s);
    return s;
  };

  describe("when blobs and trees are put", () => {
    it("reads them back verified, by their content id", async () => {
      const { objects } = await fresh();
      const d = await objects.putBlob(enc("hello"));
      expect(d).toBe(blobDigest(enc("hello")));
      expect(new TextDecoder().decode(await objects.readBlob(d))).toBe("hello");
      const t = await objects.putTree([{ name: "hello.txt", mode: "100644", digest: d }]);
      expect((await objects.readTree(t)).entries).toEqual([{ name: "hello.txt", mode: "100644", digest: d }]);
      expect(await objects.has("tree", t)).toBe(true);
      expect(await objects.has("blob", t)).toBe(false);
    });

    it("deduplicates: the same content is written once", async () => {
      const { objects } = await fresh();
      const bytes = enc("same");
      const d = blobDigest(bytes);
      expect(
        await objects.putMany([
          { kind: "blob", digest: d, bytes },
          { kind: "blob", digest: d, bytes },
        ]),
      ).toBe(1);
      expect(await objects.putMany([{ kind: "blob", digest: d, bytes }])).toBe(0);
      expect(await objects.putBlob(bytes)).toBe(d);
    });
  });

  describe("when asked for what is not there", () => {
    it("fails with NOT_FOUND, and with BAD_DIGEST for a malformed id", async () => {
      const { objects } = await fresh();
      await expect(objects.readBlob(blobDigest(enc("nope")))).rejects.toThrowWithCode("ASP_EVIDENCE_NOT_FOUND");
      await expect(objects.readTree(blobDigest(enc("nope")))).rejects.toThrowWithCode("ASP_EVIDENCE_NOT_FOUND");
      await expect(objects.readBlob("sha256:xyz" as Digest)).rejects.toThrowWithCode("ASP_EVIDENCE_BAD_DIGEST");
    });
  });

  describe("when an object's bytes do not match the id it is put under", () => {
    it("refuses the whole batch with an integrity error", async () => {
      const { objects } = await fresh();
      const good = enc("good");
      await expect(
        objects.putMany([
          { kind: "blob", digest: blobDigest(good), bytes: good },
          { kind: "blob", digest: blobDigest(enc("other")), bytes: enc("lie") },
        ]),
      ).rejects.toThrowWithCode("ASP_EVIDENCE_INTEGRITY");
      expect(await objects.has("blob", blobDigest(good))).toBe(false);
    });
  });
});

describe("ObjectStore (level)", () => {
  describe("when a stored object is corrupted on disk", () => {
    it("never returns it: readBlob and readTree fail with a typed integrity error", async () => {
      const dir = join(tempDir(), "store");
      const store = await openStore(dir);
      const d = await store.objects.putBlob(enc("original"));
      const tree = encodeTree([{ name: "f", mode: "100644", digest: d }]);
      const t = await store.objects.putTree(tree.entries);
      await store.log.append([{ kind: "sync", record: {} }]);
      await store.close();
      await withRawLevel(dir, async (db) => {
        await rawSpace(db, "blob").put(d, enc("tampered"));
        await rawSpace(db, "tree").put(t, enc(new TextDecoder().decode(tree.bytes).replace('"f"', '"g"')));
      });
      const again = await openStore(dir);
      open.push(again);
      const blobError = await again.objects.readBlob(d).catch((e: unknown) => e);
      expect(blobError).toMatchObject({ code: "ASP_EVIDENCE_INTEGRITY", category: "integrity" });
      await expect(again.objects.readTree(t)).rejects.toThrowWithCode("ASP_EVIDENCE_INTEGRITY");
    });
  });
});
