import { createHash } from "node:crypto";
import type { ContentSource } from "../content.js";
import type { ChangedPath, TreeEntryInfo } from "../provider.js";

/** What a file holds: text (stored as UTF-8) or raw bytes. */
export type FileContent = string | Uint8Array;

/** The mode of a tree entry that is not a folder: a regular file, an executable, a link. */
export type FileMode = Exclude<TreeEntryInfo["mode"], "040000">;

/** A file of a {@link Files} map: its content (mode `100644`), or content with a mode. */
export type FileSpec = FileContent | { readonly content: FileContent; readonly mode: FileMode };

/** A repository state: relative `/`-separated paths to file contents (folders are implied). */
export type Files = Readonly<Record<string, FileSpec>>;

/** A changeset between two trees, in the shape `check/assess` and `inspect/query` carry it. */
export interface MemoryChangeset {
  /** A stand-in id of the changeset (the SHA-256 of its JSON); providers only echo it. */
  readonly digest: string;
  /** The tree before the change. */
  readonly base: string;
  /** The tree after the change. */
  readonly after: string;
  /** Every changed path, sorted by path. */
  readonly changes: ChangedPath[];
}

const sha256 = (bytes: string | Uint8Array): string => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
const bytesOf = (content: FileContent): Uint8Array =>
  typeof content === "string" ? new TextEncoder().encode(content) : content;
const specOf = (file: FileSpec): { bytes: Uint8Array; mode: FileMode } =>
  typeof file === "string" || file instanceof Uint8Array
    ? { bytes: bytesOf(file), mode: "100644" }
    : { bytes: bytesOf(file.content), mode: file.mode };
const byName = (a: TreeEntryInfo, b: TreeEntryInfo): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** The `sha256:` digest of a blob, as the host and `@asp/evidence` compute it (text as UTF-8). */
export function blobDigest(content: FileContent): string {
  return sha256(bytesOf(content));
}

/**
 * The `sha256:` digest of a tree with these entries: the `@asp/evidence` encoding, the SHA-256 of
 * `{"entries":[[name,mode,digest],...],"type":"tree"}` with the entries sorted by name.
 */
export function treeDigest(entries: readonly TreeEntryInfo[]): string {
  const parts = [...entries]
    .sort(byName)
    .map((e) => `[${JSON.stringify(e.name)},${JSON.stringify(e.mode)},${JSON.stringify(e.digest)}]`);
  return sha256(`{"entries":[${parts.join(",")}],"type":"tree"}`);
}

/**
 * A content-addressed store of blobs and trees, as a host would serve them: build trees from
 * path maps, derive changesets, and read them back through a {@link ContentSource} or a
 * `TestHost`. Digests are real (`sha256:` of the bytes; trees in the `@asp/evidence` encoding),
 * so a provider checking blob digests accepts what it serves.
 *
 * @example
 * ```ts
 * const repo = new MemoryRepo();
 * const cs = repo.changeset({ "a.ts": "1" }, { "a.ts": "2", "bin/run": { content: "#!/bin/sh\n", mode: "100755" } });
 * cs.changes; // [{ path: "a.ts", kind: "modified", ... }, { path: "bin/run", kind: "added", ... }]
 * ```
 */
export class MemoryRepo {
  /** Blob bytes by digest. */
  readonly blobs = new Map<string, Uint8Array>();
  /** Tree entries (sorted by name) by digest. */
  readonly trees = new Map<string, TreeEntryInfo[]>();
  /** Blob digests that are refused when read (a host refusal, unreadable content). */
  readonly refuse = new Set<string>();
  /** Every read through {@link MemoryRepo.source}, in order: `tree <digest>` or `blob <digest>`. */
  readonly log: string[] = [];

  /** Store one blob; returns its digest. */
  blob(content: FileContent): string {
    const bytes = bytesOf(content);
    const digest = sha256(bytes);
    this.blobs.set(digest, bytes);
    return digest;
  }

  /** Store one tree with these entries (its blobs and subtrees are not checked); returns its digest. */
  putTree(entries: readonly TreeEntryInfo[]): string {
    const sorted = [...entries].sort(byName);
    const digest = treeDigest(sorted);
    this.trees.set(digest, sorted);
    return digest;
  }

  /** Store `files` as blobs and trees; returns the root tree digest. */
  tree(files: Files): string {
    interface Dir {
      readonly files: Map<string, FileSpec>;
      readonly dirs: Map<string, Dir>;
    }
    const root: Dir = { files: new Map(), dirs: new Map() };
    for (const [path, file] of Object.entries(files)) {
      const parts = path.split("/");
      let dir = root;
      for (const name of parts.slice(0, -1)) {
        let next = dir.dirs.get(name);
        if (next === undefined) {
          next = { files: new Map(), dirs: new Map() };
          dir.dirs.set(name, next);
        }
        dir = next;
      }
      dir.files.set(parts[parts.length - 1] as string, file);
    }
    const encode = (dir: Dir): string => {
      const entries: TreeEntryInfo[] = [];
      for (const [name, file] of dir.files) {
        const { bytes, mode } = specOf(file);
        entries.push({ name, mode, digest: this.blob(bytes) });
      }
      for (const [name, sub] of dir.dirs) entries.push({ name, mode: "040000", digest: encode(sub) });
      return this.putTree(entries);
    };
    return encode(root);
  }

  /** Store both states as trees; returns the changeset from `before` to `after`. */
  changeset(before: Files, after: Files): MemoryChangeset {
    const base = this.tree(before);
    const afterTree = this.tree(after);
    const changes = MemoryRepo.changes(before, after);
    return { digest: sha256(JSON.stringify({ base, after: afterTree, changes })), base, after: afterTree, changes };
  }

  /**
   * The changes from `before` to `after`, sorted by path, as a changeset lists them: `added`,
   * `deleted`, `modified` (other content) or `mode_changed` (same content, other mode).
   */
  static changes(before: Files, after: Files): ChangedPath[] {
    const out: ChangedPath[] = [];
    for (const path of [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()) {
      const b = before[path];
      const a = after[path];
      const old = b === undefined ? null : specOf(b);
      const now = a === undefined ? null : specOf(a);
      const oldDigest = old === null ? null : sha256(old.bytes);
      const newDigest = now === null ? null : sha256(now.bytes);
      if (oldDigest === newDigest && old?.mode === now?.mode) continue;
      const kind =
        old === null ? "added" : now === null ? "deleted" : oldDigest === newDigest ? "mode_changed" : "modified";
      out.push({ path, kind, before: oldDigest, after: newDigest });
    }
    return out;
  }

  /**
   * The bytes of a stored blob.
   * @throws Error when the digest is not a stored blob or is in {@link MemoryRepo.refuse}.
   */
  readBlob(digest: string): Uint8Array {
    const bytes = this.blobs.get(digest);
    if (bytes === undefined) throw new Error(`${digest} is not a blob of this repository`);
    if (this.refuse.has(digest)) throw new Error(`${digest} refused`);
    return bytes;
  }

  /**
   * The entries of a stored tree.
   * @throws Error when the digest is not a stored tree.
   */
  readTree(digest: string): TreeEntryInfo[] {
    const entries = this.trees.get(digest);
    if (entries === undefined) throw new Error(`${digest} is not a tree of this repository`);
    return entries;
  }

  /** A {@link ContentSource} over this store (texts as UTF-8), logging every read in {@link MemoryRepo.log}. */
  source(signal?: AbortSignal): ContentSource {
    return {
      ...(signal === undefined ? {} : { signal }),
      readTree: async (digest) => {
        this.log.push(`tree ${digest}`);
        return this.readTree(digest);
      },
      readText: async (digest) => {
        this.log.push(`blob ${digest}`);
        return new TextDecoder().decode(this.readBlob(digest));
      },
    };
  }
}
