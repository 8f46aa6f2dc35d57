import type { ChangeKind } from "@asp/contracts";
import { digest as digestValue, parseCanonical } from "./canonical.js";
import { EvidenceError } from "./errors.js";
import { type Digest, digestBytes, type Hasher, isDigest } from "./hash.js";
import { assertEntryName } from "./paths.js";

/**
 * Entry modes, as git spells them: regular file, executable file, symbolic link (the blob is
 * the link target's bytes) and subdirectory (the digest is a tree).
 */
export type FileMode = "100644" | "100755" | "120000" | "040000";

/** Every {@link FileMode}. */
export const FILE_MODES: readonly FileMode[] = ["100644", "100755", "120000", "040000"];

/** One name in a tree. `digest` is a blob for files and links, a tree for `040000`. */
export interface TreeEntry {
  readonly name: string;
  readonly mode: FileMode;
  readonly digest: Digest;
}

/** A decoded tree: its id and its entries sorted by name (UTF-16 code unit order). */
export interface Tree {
  readonly digest: Digest;
  readonly entries: readonly TreeEntry[];
}

/** A tree with the exact bytes its digest covers, ready to store. */
export interface EncodedTree extends Tree {
  readonly bytes: Uint8Array;
}

/** Anything that can read trees by id (the {@link ObjectStore} is one). */
export interface TreeReader {
  readTree(digest: Digest): Promise<Tree>;
}

/** Mode and content of one path on one side of a change. */
export interface PathState {
  readonly mode: FileMode;
  readonly digest: Digest;
}

/** One changed path (files and links only; directories are implied by their paths). */
export interface Change {
  readonly path: string;
  /** `added`, `modified` (content changed, mode may too), `deleted`, or `mode_changed` (content equal). */
  readonly kind: ChangeKind;
  readonly before: PathState | null;
  readonly after: PathState | null;
}

/** The change from one tree to another: its id covers (base, after), the diff follows from them. */
export interface Changeset {
  readonly digest: Digest;
  readonly base: Digest;
  readonly after: Digest;
  /** Sorted by path. */
  readonly changes: readonly Change[];
}

/** One file or link of a flattened tree. */
export interface TreeFile extends PathState {
  readonly path: string;
}

const MODES: ReadonlySet<string> = new Set(FILE_MODES);

function badObject(message: string, data: Record<string, unknown> = {}): never {
  throw new EvidenceError("ASP_EVIDENCE_BAD_OBJECT", message, { data });
}

/** `sha256:<hex>` over the raw bytes of a file (or a link target). */
export function blobDigest(bytes: Uint8Array, hasher?: Hasher): Digest {
  return digestBytes(bytes, hasher);
}

const byName = (a: TreeEntry, b: TreeEntry): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/**
 * Encode a tree: validate and sort the entries, and return its canonical bytes and id.
 * The encoding is the RFC 8785 canonical JSON of `{"entries":[[name,mode,digest],...],"type":"tree"}`.
 *
 * @throws EvidenceError `ASP_EVIDENCE_BAD_PATH` for a name that is not one path segment,
 *   `ASP_EVIDENCE_BAD_OBJECT` for an unknown mode or a duplicate name,
 *   `ASP_EVIDENCE_BAD_DIGEST` for a malformed digest.
 */
export function encodeTree(entries: readonly TreeEntry[], hasher?: Hasher): EncodedTree {
  const sorted = entries.map((e) => {
    assertEntryName(e.name);
    if (!MODES.has(e.mode))
      badObject(`tree entry ${JSON.stringify(e.name)} has unknown mode ${String(e.mode)}`, { name: e.name });
    if (!isDigest(e.digest)) {
      throw new EvidenceError(
        "ASP_EVIDENCE_BAD_DIGEST",
        `tree entry ${JSON.stringify(e.name)} has a malformed digest`,
        {
          data: { name: e.name },
        },
      );
    }
    return { name: e.name, mode: e.mode, digest: e.digest };
  });
  sorted.sort(byName);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    const e = sorted[i] as TreeEntry;
    if (i > 0 && (sorted[i - 1] as TreeEntry).name === e.name)
      badObject(`tree has two entries named ${JSON.stringify(e.name)}`, { name: e.name });
    // Names passed assertEntryName; JSON.stringify is the canonical string form (lone surrogates
    // are caught by the canonical check in tests and decodeTree).
    parts.push(`[${JSON.stringify(e.name)},"${e.mode}","${e.digest}"]`);
  }
  const text = `{"entries":[${parts.join(",")}],"type":"tree"}`;
  const buf = Buffer.from(text, "utf8");
  const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  return { digest: digestBytes(bytes, hasher), entries: sorted, bytes };
}

/**
 * Decode tree bytes (as stored) and check they are exactly the canonical encoding.
 *
 * @throws EvidenceError `ASP_EVIDENCE_BAD_OBJECT` when the bytes are not a canonical tree.
 */
export function decodeTree(bytes: Uint8Array, hasher?: Hasher): EncodedTree {
  const value = parseCanonical(bytes, "tree");
  if (
    typeof value !== "object" ||
    value === null ||
    Array.isArray(value) ||
    value.type !== "tree" ||
    !Array.isArray(value.entries)
  ) {
    badObject("bytes are not a tree object");
  }
  if (Object.keys(value).length !== 2) badObject("tree object has unknown fields");
  const entries: TreeEntry[] = value.entries.map((row) => {
    if (!Array.isArray(row) || row.length !== 3 || !row.every((x) => typeof x === "string"))
      badObject("tree entry is not [name, mode, digest]");
    return { name: row[0] as string, mode: row[1] as FileMode, digest: row[2] as Digest };
  });
  const tree = encodeTree(entries, hasher);
  if (Buffer.compare(tree.bytes, bytes) !== 0) badObject("tree entries are not in canonical order");
  return tree;
}

/**
 * Every file and link under a tree, depth first, with full paths.
 *
 * @throws EvidenceError whatever `reader.readTree` throws (`ASP_EVIDENCE_NOT_FOUND`, `ASP_EVIDENCE_INTEGRITY`).
 */
export async function listTree(reader: TreeReader, root: Digest): Promise<TreeFile[]> {
  const out: TreeFile[] = [];
  const walk = async (digest: Digest, prefix: string): Promise<void> => {
    const tree = await reader.readTree(digest);
    for (const e of tree.entries) {
      const path = prefix === "" ? e.name : `${prefix}/${e.name}`;
      if (e.mode === "040000") await walk(e.digest, path);
      else out.push({ path, mode: e.mode, digest: e.digest });
    }
  };
  await walk(root, "");
  return out;
}

/** The id of the changeset from `base` to `after`: canonical JSON `{"after":..,"base":..,"type":"changeset"}`. */
export function changesetDigest(base: Digest, after: Digest, hasher?: Hasher): Digest {
  return digestValue({ type: "changeset", base, after }, hasher);
}

/**
 * Diff two trees into a {@link Changeset}: per path `added`, `modified`, `deleted` or
 * `mode_changed`. Unchanged subtrees (same id) are skipped without being read.
 *
 * @throws EvidenceError whatever `reader.readTree` throws (`ASP_EVIDENCE_NOT_FOUND`, `ASP_EVIDENCE_INTEGRITY`).
 */
export async function diffTrees(reader: TreeReader, base: Digest, after: Digest, hasher?: Hasher): Promise<Changeset> {
  const changes: Change[] = [];
  const all = async (digest: Digest, prefix: string, side: "before" | "after"): Promise<void> => {
    for (const f of await listTree(reader, digest)) {
      const state = { mode: f.mode, digest: f.digest };
      const path = `${prefix}/${f.path}`;
      changes.push(
        side === "before"
          ? { path, kind: "deleted", before: state, after: null }
          : { path, kind: "added", before: null, after: state },
      );
    }
  };
  const walk = async (a: Digest | null, b: Digest | null, prefix: string): Promise<void> => {
    const ta = a === null ? [] : (await reader.readTree(a)).entries;
    const tb = b === null ? [] : (await reader.readTree(b)).entries;
    const mb = new Map(tb.map((e) => [e.name, e]));
    const names = new Set([...ta.map((e) => e.name), ...tb.map((e) => e.name)]);
    const ma = new Map(ta.map((e) => [e.name, e]));
    for (const name of names) {
      const ea = ma.get(name);
      const eb = mb.get(name);
      const path = prefix === "" ? name : `${prefix}/${name}`;
      if (ea && eb && ea.mode === eb.mode && ea.digest === eb.digest) continue;
      const aDir = ea?.mode === "040000";
      const bDir = eb?.mode === "040000";
      if (aDir && bDir) {
        await walk(ea.digest, eb.digest, path);
        continue;
      }
      if (aDir) await all(ea.digest, path, "before");
      else if (ea) changes.push({ path, kind: "deleted", before: { mode: ea.mode, digest: ea.digest }, after: null });
      if (bDir) await all(eb.digest, path, "after");
      else if (eb) changes.push({ path, kind: "added", before: null, after: { mode: eb.mode, digest: eb.digest } });
      if (ea && eb && !aDir && !bDir) {
        // Both files: one change, not a delete + add.
        changes.pop();
        changes.pop();
        changes.push({
          path,
          kind: ea.digest === eb.digest ? "mode_changed" : "modified",
          before: { mode: ea.mode, digest: ea.digest },
          after: { mode: eb.mode, digest: eb.digest },
        });
      }
    }
  };
  await walk(base, after, "");
  changes.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : x.kind === "deleted" ? -1 : 1));
  return { digest: changesetDigest(base, after, hasher), base, after, changes };
}
