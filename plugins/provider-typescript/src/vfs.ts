import type { ContentSource, TextCache, TreeEntryInfo, TreeListing } from "@asp/sdk";
import { resolveRelative, throwIfAborted } from "@asp/sdk";

/** Where the repository lives in the compiler's virtual file system. */
export const ROOT = "/repo";
/** The absolute virtual path of a repository-relative path. */
export const abs = (rel: string): string => (rel === "" ? ROOT : `${ROOT}/${rel}`);
/** The repository-relative path of an absolute virtual path, or null outside the repository. */
export const relOf = (path: string): string | null =>
  path === ROOT ? "" : path.startsWith(`${ROOT}/`) ? path.slice(ROOT.length + 1) : null;

/** A request's dependency environment (contracts `EnvironmentRef`). */
export interface EnvironmentTree {
  readonly tree: string;
  readonly roots: readonly string[];
}

interface Entry {
  readonly mode: TreeEntryInfo["mode"];
  /** Blob or tree digest; null for a folder that only exists to hold an environment root. */
  readonly digest: string | null;
}

/** The outcome of walking one path. */
type Walk =
  | { readonly kind: "file"; readonly real: string; readonly digest: string }
  | { readonly kind: "dir"; readonly real: string }
  | { readonly kind: "none" }
  | { readonly kind: "need"; readonly what: "tree" | "link"; readonly digest: string; readonly at: string };

type Need = Extract<Walk, { kind: "need" }>;

const MAX_LINK_HOPS = 40;
/** Files the compiler reads right after finding them exist. */
const READ_AHEAD = /(?:\.d\.[cm]?ts|\.[cm]?tsx?|\.json)$/;

/** Environment tree entries by digest, shared between checks (content-addressed, so always exact). */
export class TreeEntryCache {
  readonly #trees = new Map<string, ReadonlyMap<string, Entry>>();
  readonly #max: number;
  /** Trees read through the source, for stats. */
  treeReads = 0;

  /** @param max Most trees kept; the cache is cleared when it is full. */
  constructor(max = 200_000) {
    this.#max = max;
  }

  get(digest: string): ReadonlyMap<string, Entry> | undefined {
    return this.#trees.get(digest);
  }

  /** Read one tree through the source; throws what the source throws. */
  async load(digest: string, source: ContentSource): Promise<void> {
    if (this.#trees.has(digest)) return;
    this.treeReads++;
    const entries = await source.readTree(digest);
    if (this.#trees.size >= this.#max) this.#trees.clear();
    this.#trees.set(digest, new Map(entries.map((e) => [e.name, { mode: e.mode, digest: e.digest }])));
  }
}

/**
 * The compiler's view of the repository: the checked tree (fully listed) overlaid with the
 * environment tree at the same paths (inside an environment root the environment answers),
 * symbolic links (mode 120000) resolved like a file system would: a relative target from the
 * link's folder; an absolute target, one escaping the repository, or a loop does not resolve.
 *
 * The compiler is synchronous, so environment folders and link targets are loaded lazily: a
 * lookup that needs something not loaded yet answers "absent" and queues the path; {@link fetch}
 * then loads what those paths need, and the caller rebuilds (the checker's rounds).
 */
export class OverlayFs {
  readonly #listing: TreeListing;
  readonly #children: ReadonlyMap<string, { files: readonly string[]; directories: readonly string[] }>;
  readonly #env: EnvironmentTree | null;
  readonly #trees: TreeEntryCache;
  readonly #texts: TextCache;
  /** Paths asked for but not answerable yet, with whether their text is wanted. */
  readonly pending = new Map<string, boolean>();
  /** Paths (repository-relative) that could not be read, with the reason. */
  readonly missing: Map<string, string>;
  readonly #failedTrees = new Map<string, string>();
  readonly #failedBlobs = new Map<string, string>();
  #walks = new Map<string, Walk>();
  #dirs = new Map<string, ReadonlyMap<string, Entry> | Walk>();

  constructor(
    listing: TreeListing,
    env: EnvironmentTree | null,
    trees: TreeEntryCache,
    texts: TextCache,
    missing: Map<string, string>,
  ) {
    this.#env = env !== null && env.roots.length > 0 ? env : null;
    this.#listing = this.#env === null ? listing : withoutRoots(listing, this.#env.roots);
    this.#children = childrenOf(this.#listing);
    this.#trees = trees;
    this.#texts = texts;
    this.missing = missing;
  }

  /** The checked tree's listing, without anything inside an environment root. */
  get listing(): TreeListing {
    return this.#listing;
  }

  /** Whether a repository-relative path lies inside an environment root. */
  inEnvironment(rel: string): boolean {
    return this.#rootOf(rel) !== null;
  }

  #rootOf(rel: string): string | null {
    if (this.#env === null) return null;
    for (const r of this.#env.roots) if (rel === r || rel.startsWith(`${r}/`)) return r;
    return null;
  }

  /** The entries of a real (link-free) folder, or what is needed to know them. */
  #entriesOf(dir: string): ReadonlyMap<string, Entry> | Walk {
    const memo = this.#dirs.get(dir);
    if (memo !== undefined) return memo;
    let out: ReadonlyMap<string, Entry> | Walk;
    const env = this.#env;
    if (env !== null && this.#rootOf(dir) !== null) {
      let digest = env.tree;
      let at = "";
      out = new Map();
      for (const part of ["", ...dir.split("/")]) {
        if (part !== "") {
          const next = (out as ReadonlyMap<string, Entry>).get(part);
          at = at === "" ? part : `${at}/${part}`;
          if (next === undefined || next.mode !== "040000" || next.digest === null) {
            out = new Map();
            break;
          }
          digest = next.digest;
        }
        if (this.#failedTrees.has(digest)) {
          out = new Map();
          break;
        }
        const entries = this.#trees.get(digest);
        if (entries === undefined) {
          out = { kind: "need", what: "tree", digest, at: at === "" ? "." : at };
          break;
        }
        out = entries;
      }
    } else {
      const own = this.#children.get(dir);
      const m = new Map<string, Entry>();
      if (own !== undefined) {
        const prefix = dir === "" ? "" : `${dir}/`;
        for (const f of own.files) m.set(f, { mode: "100644", digest: this.#listing.files.get(prefix + f) ?? null });
        for (const d of own.directories) m.set(d, { mode: "040000", digest: null });
      }
      if (env !== null) {
        const prefix = dir === "" ? "" : `${dir}/`;
        for (const r of env.roots) {
          if (!r.startsWith(prefix)) continue;
          const name = r.slice(prefix.length).split("/")[0] as string;
          m.set(name, { mode: "040000", digest: null });
        }
      }
      out = own === undefined && m.size === 0 ? { kind: "none" } : m;
    }
    if (out instanceof Map || (out as Walk).kind !== "need") this.#dirs.set(dir, out);
    return out;
  }

  /** Resolve a repository-relative path through the overlay, following links. */
  walk(rel: string, hops = 0): Walk {
    if (hops === 0) {
      const memo = this.#walks.get(rel);
      if (memo !== undefined) return memo;
    }
    const result = this.#walk(rel, hops);
    if (hops === 0 && result.kind !== "need") this.#walks.set(rel, result);
    return result;
  }

  #walk(rel: string, hops: number): Walk {
    if (rel === "") return { kind: "dir", real: "" };
    const parts = rel.split("/");
    let real = "";
    for (let i = 0; i < parts.length; i++) {
      const name = parts[i] as string;
      const last = i === parts.length - 1;
      // `.`, `..` and empty segments as the kernel reads them (the compiler asks whether `src/` is
      // a folder when a module imports its own folder, `import x from "."`): `..` steps up from the
      // real path reached so far (after links, as a real directory's parent), never above the
      // repository; `src/` is the folder `src` (a file followed by `/` is no folder).
      if (name === "." || name === ".." || name === "") {
        if (name === "..") {
          if (real === "") return { kind: "none" };
          real = real.includes("/") ? real.slice(0, real.lastIndexOf("/")) : "";
        }
        if (last) return { kind: "dir", real };
        continue;
      }
      const entries = this.#entriesOf(real);
      if (!(entries instanceof Map)) return (entries as Walk).kind === "need" ? (entries as Walk) : { kind: "none" };
      const e = entries.get(name);
      if (e === undefined) return { kind: "none" };
      const here = real === "" ? name : `${real}/${name}`;
      if (e.mode === "040000") {
        real = here;
        if (last) return { kind: "dir", real };
        continue;
      }
      if (e.mode === "120000") {
        if (e.digest === null || hops >= MAX_LINK_HOPS || this.#failedBlobs.has(e.digest)) return { kind: "none" };
        const target = this.#texts.get(e.digest);
        if (target === undefined) return { kind: "need", what: "link", digest: e.digest, at: here };
        const joined = resolveLink(real, target);
        if (joined === null) return { kind: "none" };
        const rest = parts.slice(i + 1).join("/");
        return this.walk(rest === "" ? joined : joined === "" ? rest : `${joined}/${rest}`, hops + 1);
      }
      if (e.mode === "160000" || e.digest === null) return { kind: "none" };
      return last ? { kind: "file", real: here, digest: e.digest } : { kind: "none" };
    }
    return { kind: "dir", real };
  }

  #ask(path: string, wantText: boolean): Walk | null {
    const rel = relOf(path);
    if (rel === null) return null;
    const w = this.walk(rel);
    if (w.kind === "need") this.pending.set(path, wantText || (this.pending.get(path) ?? false));
    return w;
  }

  fileExists = (path: string): boolean => this.#ask(path, false)?.kind === "file";

  directoryExists = (path: string): boolean => this.#ask(path, false)?.kind === "dir";

  /** The digest of a file (links followed), or undefined (queued when not known yet). */
  digestOf(path: string): string | undefined {
    const w = this.#ask(path, true);
    return w?.kind === "file" ? w.digest : undefined;
  }

  readFile = (path: string): string | undefined => {
    const w = this.#ask(path, true);
    if (w?.kind !== "file") return undefined;
    if (this.#failedBlobs.has(w.digest)) return undefined;
    const text = this.#texts.get(w.digest);
    if (text === undefined) this.pending.set(path, true);
    return text;
  };

  realpath = (path: string): string => {
    const w = this.#ask(path, false);
    return w !== null && (w.kind === "file" || w.kind === "dir") ? abs(w.real) : path;
  };

  /** Files and folders of a folder, links followed (for include patterns and `@types` discovery). */
  entries = (path: string): { files: string[]; directories: string[] } => {
    const out = { files: [] as string[], directories: [] as string[] };
    const w = this.#ask(path, false);
    if (w?.kind !== "dir") return out;
    const entries = this.#entriesOf(w.real);
    if (!(entries instanceof Map)) {
      if ((entries as Walk).kind === "need") this.pending.set(path, false);
      return out;
    }
    for (const [name, e] of entries as ReadonlyMap<string, Entry>) {
      if (e.mode === "040000") out.directories.push(name);
      else if (e.mode === "120000") {
        const t = this.#ask(`${path}/${name}`, false);
        if (t?.kind === "dir") out.directories.push(name);
        else if (t?.kind === "file") out.files.push(name);
      } else out.files.push(name);
    }
    out.files.sort();
    out.directories.sort();
    return out;
  };

  getDirectories = (path: string): string[] => this.entries(path).directories;

  /** Read one environment folder; a failure is recorded (the folder then reads as empty), never thrown. */
  async #loadTree(need: Need, source: ContentSource): Promise<void> {
    try {
      await this.#trees.load(need.digest, source);
    } catch (error) {
      throwIfAborted(source.signal);
      this.#failedTrees.set(need.digest, messageOf(error));
      this.missing.set(need.at, messageOf(error));
    }
  }

  /**
   * Load what the queued paths need (environment trees, link targets, file texts), walking each
   * to its end so one round answers a whole path. Failures land in `missing`, never thrown.
   *
   * @throws the signal's reason when `source.signal` is aborted.
   */
  async fetch(source: ContentSource): Promise<void> {
    const queue = [...this.pending];
    this.pending.clear();
    const texts: string[] = [];
    const textPaths = new Map<string, string[]>();
    const one = async ([path, wantText]: [string, boolean]): Promise<void> => {
      const rel = relOf(path) as string;
      for (let guard = 0; guard < 10_000; guard++) {
        throwIfAborted(source.signal);
        this.#walks.delete(rel);
        const w = this.walk(rel);
        if (w.kind === "need") {
          if (w.what === "tree") await this.#loadTree(w, source);
          else {
            const failures = await this.#texts.fetch([w.digest], source);
            for (const [, why] of failures) {
              this.#failedBlobs.set(w.digest, why);
              this.missing.set(w.at, why);
            }
          }
          this.#dirs = new Map();
          this.#walks = new Map();
          continue;
        }
        // Read ahead what the compiler reads next, saving it a round: an existing file it probed
        // (it reads it next), and for a folder its entries and its package.json.
        const wantFile = (digest: string, real: string): void => {
          if (this.#texts.get(digest) !== undefined || this.#failedBlobs.has(digest)) return;
          texts.push(digest);
          textPaths.set(digest, [...(textPaths.get(digest) ?? []), real]);
        };
        if (w.kind === "file" && (wantText || READ_AHEAD.test(w.real))) wantFile(w.digest, w.real);
        else if (w.kind === "dir") {
          const entries = this.#entriesOf(w.real);
          if (!(entries instanceof Map) && (entries as Walk).kind === "need") {
            await this.#loadTree(entries as Need, source);
            this.#dirs = new Map();
            continue;
          }
          const pj = entries instanceof Map ? entries.get("package.json") : undefined;
          if (pj?.mode === "100644" && pj.digest !== null)
            wantFile(pj.digest, w.real === "" ? "package.json" : `${w.real}/package.json`);
        }
        return;
      }
    };
    // A few walks at a time: each is a chain of reads, so they overlap well.
    const workers = Array.from({ length: Math.min(8, queue.length) }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await one(item);
    });
    await Promise.all(workers);
    const failures = await this.#texts.fetch(texts, source);
    for (const [d, why] of failures) {
      this.#failedBlobs.set(d, why);
      for (const p of textPaths.get(d) ?? []) this.missing.set(p, why);
    }
    this.#dirs = new Map();
    this.#walks = new Map();
  }
}

/** Join a link's folder and its (relative) target; null for an absolute or escaping target. */
function resolveLink(dir: string, target: string): string | null {
  if (target === "" || target.startsWith("/") || target.includes("\0") || /^[A-Za-z]:/.test(target)) return null;
  return resolveRelative(dir, target);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function withoutRoots(listing: TreeListing, roots: readonly string[]): TreeListing {
  const inside = (p: string): boolean => roots.some((r) => p === r || p.startsWith(`${r}/`));
  if (![...listing.dirs].some(inside)) return listing;
  return {
    files: new Map([...listing.files].filter(([p]) => !inside(p))),
    dirs: new Set([...listing.dirs].filter((d) => !inside(d))),
    unreadable: new Map([...listing.unreadable].filter(([p]) => !inside(p))),
  };
}

/** The folder holding a repository-relative path (`""` for the root's entries), or null for the root itself. */
export function parentOf(rel: string): string | null {
  if (rel === "") return null;
  const i = rel.lastIndexOf("/");
  return i < 0 ? "" : rel.slice(0, i);
}

/** Each folder's direct files and folders. */
export function childrenOf(listing: TreeListing): Map<string, { files: string[]; directories: string[] }> {
  const out = new Map<string, { files: string[]; directories: string[] }>();
  const at = (dir: string) => {
    let e = out.get(dir);
    if (e === undefined) {
      e = { files: [], directories: [] };
      out.set(dir, e);
    }
    return e;
  };
  for (const dir of listing.dirs) {
    at(dir);
    const parent = parentOf(dir);
    if (parent !== null) at(parent).directories.push(dir.slice(dir.lastIndexOf("/") + 1));
  }
  for (const file of listing.files.keys()) at(parentOf(file) ?? "").files.push(file.slice(file.lastIndexOf("/") + 1));
  return out;
}
