import type { Digest, FileMode, ObjectStore, TreeEntry } from "@asp/evidence";

/** What a path is in a stored tree. */
export type TreeLookup =
  | { readonly kind: "absent" }
  | { readonly kind: "directory"; readonly digest: Digest }
  | { readonly kind: "file"; readonly digest: Digest; readonly mode: "100644" | "100755" }
  | { readonly kind: "link"; readonly digest: Digest }
  /** A parent component is a symbolic link: the path leaves the tree through it. */
  | { readonly kind: "through-link"; readonly at: string }
  /** A parent component is a file: nothing can be there. */
  | { readonly kind: "under-file"; readonly at: string };

/** Look `path` up in the stored tree `root`, component by component, never following a link. */
export async function lookupPath(objects: ObjectStore, root: Digest, path: string): Promise<TreeLookup> {
  const segments = path.split("/");
  let tree = root;
  for (let i = 0; i < segments.length; i++) {
    const entry = (await objects.readTree(tree)).entries.find((e) => e.name === segments[i]);
    if (entry === undefined) return { kind: "absent" };
    const at = segments.slice(0, i + 1).join("/");
    const last = i === segments.length - 1;
    if (entry.mode === "040000") {
      if (last) return { kind: "directory", digest: entry.digest };
      tree = entry.digest;
      continue;
    }
    if (entry.mode === "120000") return last ? { kind: "link", digest: entry.digest } : { kind: "through-link", at };
    if (!last) return { kind: "under-file", at };
    return { kind: "file", digest: entry.digest, mode: entry.mode };
  }
  return { kind: "absent" };
}

/** One whole-path outcome of a plan: the blob and mode the path holds after, or null (absent). */
export type PathAfter = { readonly digest: Digest; readonly mode: FileMode } | null;

/**
 * A new tree: `root` with every path in `writes` set to its blob (or removed, null), in the
 * object store only. Directories left empty disappear, as in a snapshot.
 * @throws Error when a write goes below a file or a link (the plan validation rules this out).
 */
export async function treeWith(
  objects: ObjectStore,
  root: Digest | null,
  writes: ReadonlyMap<string, PathAfter>,
): Promise<Digest> {
  const entries = new Map<string, TreeEntry>();
  if (root !== null) for (const e of (await objects.readTree(root)).entries) entries.set(e.name, e);
  const here = new Map<string, PathAfter>();
  const below = new Map<string, Map<string, PathAfter>>();
  for (const [path, after] of writes) {
    const slash = path.indexOf("/");
    if (slash < 0) {
      here.set(path, after);
      continue;
    }
    const head = path.slice(0, slash);
    const sub = below.get(head) ?? new Map<string, PathAfter>();
    sub.set(path.slice(slash + 1), after);
    below.set(head, sub);
  }
  for (const [name, after] of here) {
    if (after === null) entries.delete(name);
    else entries.set(name, { name, mode: after.mode, digest: after.digest });
  }
  for (const [name, sub] of below) {
    const existing = entries.get(name);
    if (existing !== undefined && existing.mode !== "040000") {
      throw new Error(`${name} is not a directory`);
    }
    const tree = await treeWith(objects, existing?.digest ?? null, sub);
    if ((await objects.readTree(tree)).entries.length === 0) entries.delete(name);
    else entries.set(name, { name, mode: "040000", digest: tree });
  }
  return objects.putTree([...entries.values()]);
}
