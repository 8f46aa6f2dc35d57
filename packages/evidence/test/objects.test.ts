import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  blobDigest,
  canonicalize,
  createMemoryStore,
  type Digest,
  decodeTree,
  diffTrees,
  encodeTree,
  listTree,
  type Store,
  type TreeEntry,
} from "../src/index.js";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const b = (s: string): Digest => blobDigest(enc(s));

/** Build nested trees in the store from a flat { path: [mode, content] } map. */
async function put(store: Store, files: Record<string, [TreeEntry["mode"], string]>): Promise<Digest> {
  interface Node {
    files: TreeEntry[];
    dirs: Map<string, Node>;
  }
  const root: Node = { files: [], dirs: new Map() };
  for (const [path, [mode, content]] of Object.entries(files)) {
    const parts = path.split("/");
    const name = parts.pop() as string;
    let n = root;
    for (const p of parts) {
      if (!n.dirs.has(p)) n.dirs.set(p, { files: [], dirs: new Map() });
      n = n.dirs.get(p) as Node;
    }
    n.files.push({ name, mode, digest: await store.objects.putBlob(enc(content)) });
  }
  const write = async (n: Node): Promise<Digest> => {
    const entries = [...n.files];
    for (const [name, sub] of n.dirs) entries.push({ name, mode: "040000", digest: await write(sub) });
    return store.objects.putTree(entries);
  };
  return write(root);
}

describe("blobDigest", () => {
  describe("when given bytes", () => {
    it("H5.4 is sha256 over exactly those bytes (no header)", () => {
      expect(blobDigest(new Uint8Array())).toBe(
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      );
    });
  });
});

describe("encodeTree", () => {
  describe("when given entries in any order", () => {
    it("H5.4 sorts them, so the id does not depend on input order", () => {
      const entries: TreeEntry[] = [
        { name: "b", mode: "100644", digest: b("1") },
        { name: "a", mode: "100755", digest: b("2") },
        { name: "c", mode: "120000", digest: b("3") },
      ];
      expect(encodeTree(entries).digest).toBe(encodeTree([...entries].reverse()).digest);
      expect(encodeTree(entries).entries.map((e) => e.name)).toEqual(["a", "b", "c"]);
    });

    it("encodes exactly the canonical JSON of the sorted entries", () => {
      fc.assert(
        fc.property(
          fc.uniqueArray(
            fc.string({ minLength: 1 }).filter((s) => !/[/\\\0]/.test(s) && s !== "." && s !== ".."),
            { maxLength: 12 },
          ),
          (names) => {
            try {
              const tree = encodeTree(names.map((name) => ({ name, mode: "100644", digest: b(name) })));
              const text = new TextDecoder().decode(tree.bytes);
              expect(text).toBe(canonicalize(JSON.parse(text)));
              expect(decodeTree(tree.bytes).digest).toBe(tree.digest);
            } catch (error) {
              // Names with lone surrogates have no UTF-8 form: the only acceptable failure.
              expect(error).toMatchObject({ code: "ASP_EVIDENCE_BAD_PATH" });
            }
          },
        ),
        { numRuns: 200 },
      );
    });

    it("gives a different id when a mode changes but the content does not", () => {
      const a = encodeTree([{ name: "x", mode: "100644", digest: b("1") }]);
      const c = encodeTree([{ name: "x", mode: "100755", digest: b("1") }]);
      expect(a.digest).not.toBe(c.digest);
    });
  });

  describe("when an entry is malformed", () => {
    it.each([
      ["a name with a slash", { name: "a/b", mode: "100644", digest: b("x") }, "ASP_EVIDENCE_BAD_PATH"],
      ["a '..' name", { name: "..", mode: "100644", digest: b("x") }, "ASP_EVIDENCE_BAD_PATH"],
      ["an unknown mode", { name: "a", mode: "100664", digest: b("x") }, "ASP_EVIDENCE_BAD_OBJECT"],
      ["a malformed digest", { name: "a", mode: "100644", digest: "sha256:zz" }, "ASP_EVIDENCE_BAD_DIGEST"],
    ])("rejects %s", (_why, entry, code) => {
      expect(() => encodeTree([entry as TreeEntry])).toThrowWithCode(code);
    });

    it("rejects duplicate names", () => {
      const e: TreeEntry = { name: "a", mode: "100644", digest: b("x") };
      expect(() => encodeTree([e, { ...e, mode: "100755" }])).toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
    });
  });
});

describe("decodeTree", () => {
  describe("when the bytes are not a canonical tree", () => {
    it.each([
      ["unsorted entries", `{"entries":[["b","100644","${b("1")}"],["a","100644","${b("2")}"]],"type":"tree"}`],
      ["whitespace", `{"entries": [],"type":"tree"}`],
      ["an extra field", `{"entries":[],"extra":1,"type":"tree"}`],
      ["another type", `{"entries":[],"type":"blob"}`],
      ["not JSON", "tree"],
    ])("rejects %s", (_why, text) => {
      expect(() => decodeTree(enc(text))).toThrowWithCode("ASP_EVIDENCE_BAD_OBJECT");
    });
  });
});

describe("diffTrees", () => {
  describe("when two trees differ in every way a path can", () => {
    it("reports added, modified, deleted and mode_changed per path, sorted by path", async () => {
      const store = await createMemoryStore();
      const base = await put(store, {
        "keep.txt": ["100644", "same"],
        "edit.txt": ["100644", "v1"],
        "gone.txt": ["100644", "bye"],
        "run.sh": ["100644", "#!/bin/sh"],
        "dir/a.txt": ["100644", "a"],
        "dir/deep/b.txt": ["100644", "b"],
        "became-dir": ["100644", "file"],
        link: ["120000", "target-a"],
      });
      const after = await put(store, {
        "keep.txt": ["100644", "same"],
        "edit.txt": ["100644", "v2"],
        "new.txt": ["100644", "hi"],
        "run.sh": ["100755", "#!/bin/sh"],
        "dir/a.txt": ["100644", "a"],
        "became-dir/inner.txt": ["100644", "inner"],
        link: ["120000", "target-b"],
      });
      const cs = await diffTrees(store.objects, base, after);
      expect(cs.base).toBe(base);
      expect(cs.after).toBe(after);
      expect(cs.changes.map((c) => [c.path, c.kind])).toEqual([
        ["became-dir", "deleted"],
        ["became-dir/inner.txt", "added"],
        ["dir/deep/b.txt", "deleted"],
        ["edit.txt", "modified"],
        ["gone.txt", "deleted"],
        ["link", "modified"],
        ["new.txt", "added"],
        ["run.sh", "mode_changed"],
      ]);
      const mode = cs.changes.find((c) => c.path === "run.sh");
      expect(mode?.before).toEqual({ mode: "100644", digest: b("#!/bin/sh") });
      expect(mode?.after).toEqual({ mode: "100755", digest: b("#!/bin/sh") });
    });
  });

  describe("when the trees are equal", () => {
    it("has no changes and a digest that covers (base, after)", async () => {
      const store = await createMemoryStore();
      const t = await put(store, { "a/b": ["100644", "x"] });
      const u = await put(store, { "a/b": ["100644", "y"] });
      const same = await diffTrees(store.objects, t, t);
      expect(same.changes).toEqual([]);
      expect(same.digest).not.toBe((await diffTrees(store.objects, t, u)).digest);
      expect((await diffTrees(store.objects, t, u)).digest).not.toBe((await diffTrees(store.objects, u, t)).digest);
    });
  });

  describe("when a tree is missing from the store", () => {
    it("fails with a typed error", async () => {
      const store = await createMemoryStore();
      const t = await put(store, { a: ["100644", "x"] });
      await expect(diffTrees(store.objects, t, b("not a tree"))).rejects.toThrowWithCode("ASP_EVIDENCE_NOT_FOUND");
    });
  });
});

describe("listTree", () => {
  describe("when given nested trees", () => {
    it("lists files depth first with full paths", async () => {
      const store = await createMemoryStore();
      const t = await put(store, { "z.txt": ["100644", "z"], "a/b/c.txt": ["100644", "c"], "a/x": ["120000", "t"] });
      expect((await listTree(store.objects, t)).map((f) => f.path)).toEqual(["a/b/c.txt", "a/x", "z.txt"]);
    });
  });
});
