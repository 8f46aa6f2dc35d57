import {
  blobDigest,
  type Changeset,
  type Digest,
  diffTrees,
  encodeTree,
  type Tree,
  type TreeEntry,
} from "@asp/evidence";

/** One object the kit can serve: a blob's bytes or a tree's entries. */
export type FixtureObject =
  | { readonly kind: "blob"; readonly bytes: Uint8Array }
  | { readonly kind: "tree"; readonly entries: readonly TreeEntry[] };

/** The synthetic repository the kit serves through `host/readBlob` / `host/readTree`. */
export interface FixtureTree {
  readonly base: Digest;
  readonly after: Digest;
  readonly changeset: Changeset;
  /** Every object reachable from `base` or `after`. */
  readonly objects: ReadonlyMap<string, FixtureObject>;
  /** Blob digests of the changed paths on the after side. */
  readonly changedBlobs: ReadonlySet<string>;
}

const BASE_FILES: Record<string, string> = {
  "README.md": "# conformance fixture\n",
  "src/a.ts": "export const a = 1;\n",
  "src/util/b.ts": "export const b = 2;\n",
};

const AFTER_FILES: Record<string, string> = {
  ...BASE_FILES,
  "src/a.ts": "export const a = 1;\n// TODO conformance marker\nexport const c = 3;\n",
  "src/new.ts": "export const n = 0; // TODO another marker\n",
};

function build(files: Record<string, string>, objects: Map<string, FixtureObject>): Digest {
  interface Dir {
    files: Map<string, Uint8Array>;
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
    dir.files.set(parts[parts.length - 1] as string, new TextEncoder().encode(text));
  }
  const encode = (dir: Dir): Digest => {
    const entries: TreeEntry[] = [];
    for (const [name, bytes] of dir.files) {
      const d = blobDigest(bytes);
      objects.set(d, { kind: "blob", bytes });
      entries.push({ name, mode: "100644", digest: d });
    }
    for (const [name, sub] of dir.dirs) entries.push({ name, mode: "040000", digest: encode(sub) });
    const tree = encodeTree(entries);
    objects.set(tree.digest, { kind: "tree", entries: tree.entries });
    return tree.digest;
  };
  return encode(root);
}

/** Build the kit's synthetic base and after trees and the changeset between them. */
export async function buildFixtureTree(): Promise<FixtureTree> {
  const objects = new Map<string, FixtureObject>();
  const base = build(BASE_FILES, objects);
  const after = build(AFTER_FILES, objects);
  const reader = {
    readTree: async (digest: Digest): Promise<Tree> => {
      const o = objects.get(digest);
      if (o?.kind !== "tree") throw new Error(`no tree ${digest}`);
      return { digest, entries: o.entries };
    },
  };
  const changeset = await diffTrees(reader, base, after);
  const changedBlobs = new Set<string>();
  for (const c of changeset.changes) if (c.after !== null) changedBlobs.add(c.after.digest);
  return { base, after, changeset, objects, changedBlobs };
}
