import { createHash } from "node:crypto";
import type { TreeEntryInfo } from "@asp/sdk";
import type { ContentSource, GraphChange } from "../src/index.js";

type Change = GraphChange & { before: string | null; after: string | null };

const sha = (bytes: string | Uint8Array): string => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/** A content-addressed store of blobs and trees, as the host would serve them. */
export class MemoryRepo {
  readonly blobs = new Map<string, string>();
  readonly trees = new Map<string, TreeEntryInfo[]>();
  /** Blob digests the source refuses to serve (a host refusal / unreadable content). */
  readonly refuse = new Set<string>();
  readonly log: string[] = [];

  /** Store `files` (path -> text) as a tree; returns the root tree digest. */
  tree(files: Record<string, string>): string {
    interface Dir {
      files: Map<string, string>;
      dirs: Map<string, Dir>;
    }
    const root: Dir = { files: new Map(), dirs: new Map() };
    for (const [path, text] of Object.entries(files)) {
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
      dir.files.set(parts[parts.length - 1] as string, text);
    }
    const encode = (dir: Dir): string => {
      const entries: TreeEntryInfo[] = [];
      for (const [name, text] of dir.files) {
        const d = sha(text);
        this.blobs.set(d, text);
        entries.push({ name, mode: "100644", digest: d });
      }
      for (const [name, sub] of dir.dirs) entries.push({ name, mode: "040000", digest: encode(sub) });
      entries.sort((a, b) => (a.name < b.name ? -1 : 1));
      const d = sha(JSON.stringify(entries));
      this.trees.set(d, entries);
      return d;
    };
    return encode(root);
  }

  /** The changes from `before` to `after` (path -> text maps), as a changeset lists them. */
  static changes(before: Record<string, string>, after: Record<string, string>): Change[] {
    const out: Change[] = [];
    for (const [path, text] of Object.entries(after)) {
      const old = before[path];
      if (old === undefined) out.push({ path, kind: "added", before: null, after: sha(text) });
      else if (old !== text) out.push({ path, kind: "modified", before: sha(old), after: sha(text) });
    }
    for (const [path, text] of Object.entries(before)) {
      if (!(path in after)) out.push({ path, kind: "deleted", before: sha(text), after: null });
    }
    return out.sort((a, b) => (a.path < b.path ? -1 : 1));
  }

  /** A content source over this store, counting what it serves. */
  source(signal?: AbortSignal): ContentSource {
    return {
      ...(signal === undefined ? {} : { signal }),
      readTree: async (digest) => {
        this.log.push(`tree ${digest}`);
        const entries = this.trees.get(digest);
        if (entries === undefined) throw new Error(`no tree ${digest}`);
        return entries;
      },
      readText: async (digest) => {
        this.log.push(`blob ${digest}`);
        const text = this.blobs.get(digest);
        if (text === undefined || this.refuse.has(digest)) throw new Error(`host refused ${digest}`);
        return text;
      },
    };
  }
}

export const digestOf = sha;
