import type { Digest, ObjectStore, Tree } from "@asp/evidence";

/**
 * What a provider may read during one evaluation (host §5): the baseline tree, the changeset's
 * base tree and every tree and blob reachable from them. Membership is checked cheaply against
 * what has been served so far, and exactly (one full walk, memoized) on a miss.
 */
export class ContentView {
  private readonly trees = new Set<Digest>();
  private readonly blobs = new Set<Digest>();
  private full: Promise<void> | undefined;

  constructor(
    private readonly objects: ObjectStore,
    private readonly roots: readonly Digest[],
    knownBlobs: readonly Digest[] = [],
  ) {
    for (const r of roots) this.trees.add(r);
    for (const b of knownBlobs) this.blobs.add(b);
  }

  private learn(tree: Tree): void {
    for (const e of tree.entries) (e.mode === "040000" ? this.trees : this.blobs).add(e.digest);
  }

  private walkAll(): Promise<void> {
    this.full ??= (async () => {
      const seen = new Set<Digest>();
      const walk = async (d: Digest): Promise<void> => {
        if (seen.has(d)) return;
        seen.add(d);
        const tree = await this.objects.readTree(d);
        this.learn(tree);
        for (const e of tree.entries) if (e.mode === "040000") await walk(e.digest);
      };
      for (const r of this.roots) await walk(r);
    })();
    return this.full;
  }

  /** True when `digest` is a tree (or blob) reachable from the roots. */
  async contains(kind: "tree" | "blob", digest: Digest): Promise<boolean> {
    const set = kind === "tree" ? this.trees : this.blobs;
    if (set.has(digest)) return true;
    await this.walkAll();
    return set.has(digest);
  }

  /** Read a reachable tree (the caller checked {@link contains}); remembers its entries. */
  async readTree(digest: Digest): Promise<Tree> {
    const tree = await this.objects.readTree(digest);
    this.learn(tree);
    return tree;
  }

  /** Read a reachable blob, verified against its digest by the store. */
  readBlob(digest: Digest): Promise<Uint8Array> {
    return this.objects.readBlob(digest);
  }
}

/** The callback ledger of one `check/assess` request: what was read, refused and counted. */
export class RequestScope {
  /** Blobs served through `host/readBlob`: the read set `validAsOf.reads` must echo exactly. */
  readonly reads = new Set<Digest>();
  /** Digests asked for outside the baseline (refused with `outOfBaseline`). */
  readonly outside: Digest[] = [];
  callbacks = 0;
  overBudget = false;

  constructor(
    readonly requestId: string,
    readonly view: ContentView,
    readonly callbackLimit: number,
  ) {}
}
