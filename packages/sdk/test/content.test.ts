import { describe, expect, it } from "vitest";
import { type ContentSource, TextCache, TreeLister, throwIfAborted } from "../src/index.js";
import { blobDigest, MemoryRepo } from "../src/testing/index.js";

const FILES = {
  "README.md": "# demo\n",
  "src/a.ts": "export const a = 1;\n",
  "src/lib/b.ts": "export const b = 2;\n",
  "node_modules/x/index.js": "module.exports = 1;\n",
  "bin/run": { content: "#!/bin/sh\n", mode: "100755" as const },
  link: { content: "src", mode: "120000" as const },
};
const skipNodeModules = (name: string) => name === "node_modules";

describe("throwIfAborted", () => {
  it("does nothing without a signal or with a live one", () => {
    expect(() => throwIfAborted(undefined)).not.toThrow();
    expect(() => throwIfAborted(new AbortController().signal)).not.toThrow();
  });
  it("throws the signal's reason once aborted", () => {
    const c = new AbortController();
    c.abort(new Error("deadline passed"));
    expect(() => throwIfAborted(c.signal)).toThrow("deadline passed");
  });
});

describe("TreeLister", () => {
  it("lists regular and executable files and every folder, leaving out links and skipped folders", async () => {
    const repo = new MemoryRepo();
    const listing = await new TreeLister().list(repo.tree(FILES), repo.source(), skipNodeModules);
    expect([...listing.files.keys()].sort()).toEqual(["README.md", "bin/run", "src/a.ts", "src/lib/b.ts"]);
    expect(listing.files.get("src/a.ts")).toBe(blobDigest(FILES["src/a.ts"]));
    expect([...listing.dirs].sort()).toEqual(["", "bin", "src", "src/lib"]);
    expect(listing.unreadable.size).toBe(0);
  });

  it("reads again only the folders on the path of a change (subtrees are kept by digest)", async () => {
    const repo = new MemoryRepo();
    const lister = new TreeLister();
    await lister.list(repo.tree(FILES), repo.source(), skipNodeModules);
    expect(lister.treeReads).toBe(4); // root, bin, src, src/lib
    repo.log.length = 0;
    const listing = await lister.list(
      repo.tree({ ...FILES, "src/lib/b.ts": "export const b = 3;\n" }),
      repo.source(),
      skipNodeModules,
    );
    expect(lister.treeReads).toBe(7);
    expect(repo.log).toHaveLength(3);
    expect(listing.files.size).toBe(4);
  });

  it("reports a folder it cannot read in unreadable (never thrown) and does not keep the incomplete parent", async () => {
    const repo = new MemoryRepo();
    const root = repo.tree(FILES);
    const src = repo.readTree(root).find((e) => e.name === "src")?.digest as string;
    const lib = repo.readTree(src).find((e) => e.name === "lib")?.digest as string;
    repo.trees.delete(lib);
    const lister = new TreeLister();
    const listing = await lister.list(root, repo.source(), skipNodeModules);
    expect([...listing.unreadable.keys()]).toEqual(["src/lib"]);
    expect(listing.unreadable.get("src/lib")).toContain("is not a tree");
    expect(listing.files.has("src/a.ts")).toBe(true);
    const reads = lister.treeReads;
    await lister.list(root, repo.source(), skipNodeModules);
    expect(lister.treeReads - reads).toBe(3); // root, src, src/lib again; bin/ was kept
  });

  it("names the root '.' when the root itself cannot be read", async () => {
    const listing = await new TreeLister().list(`sha256:${"0".repeat(64)}`, new MemoryRepo().source(), () => false);
    expect([...listing.unreadable.keys()]).toEqual(["."]);
    expect(listing.files.size).toBe(0);
  });

  it("stops with the abort reason when the request is aborted", async () => {
    const repo = new MemoryRepo();
    const c = new AbortController();
    c.abort(new Error("cancelled by the host"));
    await expect(new TreeLister().list(repo.tree(FILES), repo.source(c.signal), () => false)).rejects.toThrow(
      "cancelled by the host",
    );
  });

  it("starts over when it holds more subtrees than its bound", async () => {
    const repo = new MemoryRepo();
    const first = repo.tree({ "a/x": "1", "b/y": "2" });
    const second = repo.tree({ "a/x": "1", "b/y": "3" });
    const rereads = async (lister: TreeLister): Promise<number> => {
      await lister.list(first, repo.source(), () => false);
      const before = lister.treeReads;
      await lister.list(second, repo.source(), () => false);
      return lister.treeReads - before;
    };
    expect(await rereads(new TreeLister())).toBe(2); // the new root and b/; a/ is known
    expect(await rereads(new TreeLister(1))).toBe(3); // a/ was dropped
  });
});

describe("TextCache", () => {
  const source = (texts: Record<string, string>, log: string[] = [], signal?: AbortSignal): ContentSource => ({
    ...(signal === undefined ? {} : { signal }),
    readTree: async () => [],
    readText: async (d) => {
      log.push(d);
      const t = texts[d];
      if (t === undefined) throw new Error(`refused ${d}`);
      return t;
    },
  });

  it("fetches each missing digest once and returns failures per digest", async () => {
    const cache = new TextCache();
    const log: string[] = [];
    const failures = await cache.fetch(["a", "b", "a", "gone"], source({ a: "A", b: "B" }, log));
    expect([...failures]).toEqual([["gone", "refused gone"]]);
    expect(cache.get("a")).toBe("A");
    expect(cache.blobReads).toBe(3);
    await cache.fetch(["a", "b"], source({}, log));
    expect(log.sort()).toEqual(["a", "b", "gone"]);
  });

  it("keeps at most `concurrency` reads in flight", async () => {
    let inFlight = 0;
    let most = 0;
    const slow: ContentSource = {
      readTree: async () => [],
      readText: async (d) => {
        most = Math.max(most, ++inFlight);
        await new Promise((r) => setImmediate(r));
        inFlight--;
        return d;
      },
    };
    await new TextCache().fetch(
      Array.from({ length: 20 }, (_, i) => `d${i}`),
      slow,
      3,
    );
    expect(most).toBe(3);
  });

  it("drops the oldest texts beyond its size bound, keeping the newest", () => {
    const cache = new TextCache(5);
    cache.set("a", "aaa");
    cache.set("b", "bbb");
    expect(cache.get("a")).toBeUndefined();
    expect(cache.get("b")).toBe("bbb");
    cache.set("c", "cccccccc"); // larger than the bound alone: kept, as the only one
    expect(cache.get("b")).toBeUndefined();
    expect(cache.get("c")).toBe("cccccccc");
  });

  it("throws the abort reason instead of reporting failures", async () => {
    const c = new AbortController();
    c.abort(new Error("deadline passed"));
    await expect(new TextCache().fetch(["a"], source({ a: "A" }, [], c.signal))).rejects.toThrow("deadline passed");
  });
});
