import { describe, expect, it } from "vitest";
import { blobDigest, MemoryRepo, treeDigest } from "../src/testing/index.js";

const FILES = {
  "src/a.ts": "export const a = 1;\n",
  run: { content: "#!/bin/sh\n", mode: "100755" as const },
  link: { content: "src", mode: "120000" as const },
};

describe("MemoryRepo", () => {
  it("builds trees with the digests @asp/evidence gives them (values computed with encodeTree)", () => {
    const repo = new MemoryRepo();
    const root = repo.tree(FILES);
    expect(root).toBe("sha256:dffb697e3482b8db0d42d73443d183cd84c487c48dff63298bb1a130ee860ca2");
    expect(repo.readTree(root)).toEqual([
      { name: "link", mode: "120000", digest: blobDigest("src") },
      { name: "run", mode: "100755", digest: blobDigest("#!/bin/sh\n") },
      {
        name: "src",
        mode: "040000",
        digest: "sha256:08ac474051a8fb0f52c073f886beb9003ff20847aa736eb7760305b644f6d9ed",
      },
    ]);
    expect(treeDigest([...repo.readTree(root)].reverse())).toBe(root);
    expect(blobDigest("abc")).toBe("sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(blobDigest(new TextEncoder().encode("abc"))).toBe(blobDigest("abc"));
  });

  it("stores bytes as given and text as UTF-8", () => {
    const repo = new MemoryRepo();
    const bytes = new Uint8Array([0, 0xff, 1]);
    const root = repo.tree({ "bin.dat": bytes, "é.txt": "é" });
    const [bin, text] = repo.readTree(root);
    expect(repo.readBlob(bin?.digest as string)).toEqual(bytes);
    expect(repo.readBlob(text?.digest as string)).toEqual(new Uint8Array([0xc3, 0xa9]));
  });

  it("lists the changes between two states, sorted by path", () => {
    const before = { "a.ts": "1", "b.ts": "2", "c.sh": "x", "d.ts": "4" };
    const after = { "a.ts": "1", "b.ts": "3", "c.sh": { content: "x", mode: "100755" as const }, "e.ts": "5" };
    expect(MemoryRepo.changes(before, after)).toEqual([
      { path: "b.ts", kind: "modified", before: blobDigest("2"), after: blobDigest("3") },
      { path: "c.sh", kind: "mode_changed", before: blobDigest("x"), after: blobDigest("x") },
      { path: "d.ts", kind: "deleted", before: blobDigest("4"), after: null },
      { path: "e.ts", kind: "added", before: null, after: blobDigest("5") },
    ]);
  });

  it("stores both trees of a changeset, with a digest that depends on its content", () => {
    const repo = new MemoryRepo();
    const cs = repo.changeset({ "a.ts": "1" }, { "a.ts": "2" });
    expect(cs.base).toBe(repo.tree({ "a.ts": "1" }));
    expect(cs.after).toBe(repo.tree({ "a.ts": "2" }));
    expect(cs.changes).toHaveLength(1);
    expect(cs.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(repo.changeset({ "a.ts": "1" }, { "a.ts": "3" }).digest).not.toBe(cs.digest);
  });

  it("serves a content source, logging every read and refusing what it is told to refuse", async () => {
    const repo = new MemoryRepo();
    const root = repo.tree(FILES);
    const source = repo.source();
    const src = (await source.readTree(root)).find((e) => e.name === "src")?.digest as string;
    const a = blobDigest(FILES["src/a.ts"]);
    expect(await source.readText(a)).toBe(FILES["src/a.ts"]);
    repo.refuse.add(a);
    await expect(source.readText(a)).rejects.toThrow("refused");
    await expect(source.readTree(a)).rejects.toThrow("is not a tree");
    expect(repo.log).toEqual([`tree ${root}`, `blob ${a}`, `blob ${a}`, `tree ${a}`]);
    expect(src).toMatch(/^sha256:/);
    const c = new AbortController();
    expect(repo.source(c.signal).signal).toBe(c.signal);
    expect("signal" in repo.source()).toBe(false);
  });
});
