import { messageOf } from "./errors.js";
import type { TreeEntryInfo } from "./provider.js";

// Content helpers for providers that keep state between requests: tree listing and blob texts
// cached by digest. Trees and blobs are content-addressed, so what one request read stays exact
// for every later request that names the same digest.

/**
 * Where a provider gets repository content: the host's `host/readTree` / `host/readBlob`
 * callbacks in the plugin (an SDK `RequestContext` is one), an in-memory repository in tests
 * and benchmarks (`MemoryRepo.source()` of `@asp/sdk/testing`). Never the disk path of a
 * worktree.
 *
 * @example
 * ```ts
 * const lister = new TreeLister();
 * defineProvider({
 *   initialize: { provider: { id: "count", version: "1.0.0" }, diagnosticSources: [] },
 *   async assess(ctx) {
 *     // The request context is a ContentSource: reads go through host callbacks.
 *     const listing = await lister.list(ctx.baseline, ctx, (dir) => dir === "node_modules");
 *     return { coverage: { sources: [], paths: listing.files.size } };
 *   },
 * }).listen();
 * ```
 */
export interface ContentSource {
  /** The direct entries of a tree. */
  readTree(digest: string): Promise<readonly TreeEntryInfo[]>;
  /** A blob decoded as UTF-8. */
  readText(digest: string): Promise<string>;
  /** Aborted when the request is cancelled or passes its deadline. */
  readonly signal?: AbortSignal;
}

/** A flat listing of a tree: every regular file with its blob digest, and every folder. */
export interface TreeListing {
  /** Path (relative, `/`-separated) to blob digest. Links are left out. */
  readonly files: ReadonlyMap<string, string>;
  /** Every folder path (the root is `""`). */
  readonly dirs: ReadonlySet<string>;
  /** Folders whose entries could not be read (the reason as text). */
  readonly unreadable: ReadonlyMap<string, string>;
}

interface SubtreeListing {
  readonly files: ReadonlyArray<readonly [string, string]>;
  readonly dirs: readonly string[];
}

/**
 * Resolve a `/`-separated relative path against a repository folder (`""` is the root),
 * applying `.` and `..` segments; `null` when the result would leave the repository. Repository
 * content is untrusted: an import specifier or a link target must never reach outside the tree.
 *
 * @example
 * ```ts
 * resolveRelative("src/lib", "../util/a.ts"); // "src/util/a.ts"
 * resolveRelative("", "../etc/passwd");        // null
 * ```
 */
export function resolveRelative(dir: string, path: string): string | null {
  const out = dir === "" ? [] : dir.split("/");
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (out.length === 0) return null;
      out.pop();
    } else out.push(part);
  }
  return out.join("/");
}

/**
 * Throws the signal's reason (or an `Error("aborted")` when it has none) when the request was
 * cancelled or passed its deadline; does nothing for an absent or live signal.
 */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw signal.reason ?? new Error("aborted");
}

/**
 * Lists trees through a {@link ContentSource}, keeping every fully read subtree by digest:
 * trees are content-addressed, so a subtree seen in an earlier request is known without a
 * callback, and a one-file change costs one `host/readTree` per folder on its path.
 */
export class TreeLister {
  readonly #subtrees = new Map<string, SubtreeListing>();
  readonly #maxSubtrees: number;
  /** Trees read through the source (callbacks), for stats. */
  treeReads = 0;

  /** @param maxSubtrees Most subtree listings kept; the cache is cleared when it is full. */
  constructor(maxSubtrees = 50_000) {
    this.#maxSubtrees = maxSubtrees;
  }

  /**
   * List `root`; folders that cannot be read are reported in `unreadable`, never thrown.
   *
   * @param skipDir Folder names (at any depth) not to descend into, e.g. `node_modules`.
   * @throws the signal's reason when `source.signal` is aborted.
   */
  async list(root: string, source: ContentSource, skipDir: (name: string) => boolean): Promise<TreeListing> {
    const unreadable = new Map<string, string>();
    const join = (a: string, b: string): string => (a === "" ? b : `${a}/${b}`);
    // Returns the subtree's listing relative to itself, and whether it was read completely.
    const walk = async (digest: string, prefix: string): Promise<[SubtreeListing, boolean]> => {
      const cached = this.#subtrees.get(digest);
      if (cached !== undefined) return [cached, true];
      let entries: readonly TreeEntryInfo[];
      try {
        throwIfAborted(source.signal);
        this.treeReads++;
        entries = await source.readTree(digest);
      } catch (error) {
        throwIfAborted(source.signal);
        unreadable.set(prefix === "" ? "." : prefix, messageOf(error));
        return [{ files: [], dirs: [] }, false];
      }
      const files: Array<readonly [string, string]> = [];
      const dirs: string[] = [];
      const children: Array<Promise<[string, [SubtreeListing, boolean]]>> = [];
      for (const e of entries) {
        if (e.mode === "040000") {
          if (skipDir(e.name)) continue;
          dirs.push(e.name);
          children.push(walk(e.digest, join(prefix, e.name)).then((r) => [e.name, r]));
        } else if (e.mode === "100644" || e.mode === "100755") {
          files.push([e.name, e.digest]);
        }
      }
      let complete = true;
      for (const [name, [sub, ok]] of await Promise.all(children)) {
        if (!ok) complete = false;
        for (const [p, d] of sub.files) files.push([`${name}/${p}`, d]);
        for (const p of sub.dirs) dirs.push(`${name}/${p}`);
      }
      const listing: SubtreeListing = { files, dirs };
      if (complete) {
        // Only a fully listed subtree is kept: its listing is then exact for its digest.
        if (this.#subtrees.size >= this.#maxSubtrees) this.#subtrees.clear();
        this.#subtrees.set(digest, listing);
      }
      return [listing, complete];
    };
    const [listing] = await walk(root, "");
    return { files: new Map(listing.files), dirs: new Set(["", ...listing.dirs]), unreadable };
  }
}

/**
 * Blob texts by digest, bounded by total size (oldest first out). Content-addressed, so a text
 * read in one request is valid in every later one.
 */
export class TextCache {
  readonly #texts = new Map<string, string>();
  readonly #maxChars: number;
  #chars = 0;
  /** Blobs read through the source (callbacks), for stats. */
  blobReads = 0;

  /** @param maxChars Most characters kept in total (default 128 Mi); the oldest texts go first. */
  constructor(maxChars = 128 * 1024 * 1024) {
    this.#maxChars = maxChars;
  }

  /** The cached text of a blob, if any. */
  get(digest: string): string | undefined {
    return this.#texts.get(digest);
  }

  /** Keep the text of a blob (a digest already kept is left as it is). */
  set(digest: string, text: string): void {
    if (this.#texts.has(digest)) return;
    this.#texts.set(digest, text);
    this.#chars += text.length;
    while (this.#chars > this.#maxChars && this.#texts.size > 1) {
      const [oldest, t] = this.#texts.entries().next().value as [string, string];
      this.#texts.delete(oldest);
      this.#chars -= t.length;
    }
  }

  /**
   * Read the given blobs (at most `concurrency` callbacks in flight); failures are returned
   * per digest, never thrown, unless the request was aborted. Read texts are kept in the cache.
   *
   * @returns the digests that could not be read, with the reason as text.
   * @throws the signal's reason when `source.signal` is aborted.
   */
  async fetch(digests: Iterable<string>, source: ContentSource, concurrency = 16): Promise<Map<string, string>> {
    const failures = new Map<string, string>();
    const queue = [...new Set(digests)].filter((d) => !this.#texts.has(d));
    const worker = async (): Promise<void> => {
      for (let d = queue.shift(); d !== undefined; d = queue.shift()) {
        throwIfAborted(source.signal);
        try {
          this.blobReads++;
          this.set(d, await source.readText(d));
        } catch (error) {
          throwIfAborted(source.signal);
          failures.set(d, messageOf(error));
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, queue.length) }, worker));
    return failures;
  }
}
