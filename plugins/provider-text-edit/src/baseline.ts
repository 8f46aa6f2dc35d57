/** One entry of a tree, as `host/readTree` returns it. */
export interface BaselineTreeEntry {
  readonly name: string;
  readonly mode: "100644" | "100755" | "120000" | "040000";
  readonly digest: string;
}

/** What a path is in the baseline. */
export type PathState =
  | { readonly kind: "absent" }
  | { readonly kind: "file"; readonly mode: "100644" | "100755"; readonly digest: string }
  | { readonly kind: "symlink"; readonly digest: string }
  | { readonly kind: "directory"; readonly digest: string }
  /** An ancestor of the path is a file or a symbolic link, not a directory. */
  | { readonly kind: "blocked"; readonly at: string; readonly by: "file" | "symlink" };

/** Read access to the baseline tree, as the plan needs it. */
export interface BaselineReader {
  /** The baseline tree id every answer is bound to. */
  readonly root: string;
  /** What `path` is in the baseline. */
  stat(path: string): Promise<PathState>;
  /** The bytes of a blob of the baseline. */
  readBlob(digest: string): Promise<Uint8Array>;
}

/** The host callbacks a {@link BaselineReader} is built on (an SDK request context has both). */
export interface BaselineCallbacks {
  readTree(digest: string): Promise<readonly BaselineTreeEntry[]>;
  readBlob(digest: string): Promise<Uint8Array>;
}

/**
 * A reader of the baseline tree `root` through host callbacks: it walks only the directories on
 * the paths it is asked about (one `host/readTree` per directory, memoized), and reads a blob
 * only when a text edit needs its content — so `validAsOf.reads` names exactly the files whose
 * content the plan depends on.
 */
export function createBaselineReader(root: string, callbacks: BaselineCallbacks): BaselineReader {
  const trees = new Map<string, Promise<readonly BaselineTreeEntry[]>>();
  const tree = (digest: string): Promise<readonly BaselineTreeEntry[]> => {
    let t = trees.get(digest);
    if (t === undefined) {
      t = callbacks.readTree(digest);
      trees.set(digest, t);
    }
    return t;
  };
  return {
    root,
    async stat(path) {
      const segments = path.split("/");
      let dir = root;
      for (const [i, name] of segments.entries()) {
        const entry = (await tree(dir)).find((e) => e.name === name);
        if (entry === undefined) return { kind: "absent" };
        const last = i === segments.length - 1;
        if (entry.mode === "040000") {
          if (last) return { kind: "directory", digest: entry.digest };
          dir = entry.digest;
          continue;
        }
        if (!last) {
          return {
            kind: "blocked",
            at: segments.slice(0, i + 1).join("/"),
            by: entry.mode === "120000" ? "symlink" : "file",
          };
        }
        return entry.mode === "120000"
          ? { kind: "symlink", digest: entry.digest }
          : { kind: "file", mode: entry.mode, digest: entry.digest };
      }
      return { kind: "absent" };
    },
    readBlob: (digest) => callbacks.readBlob(digest),
  };
}
