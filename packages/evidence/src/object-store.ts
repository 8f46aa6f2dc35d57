import { EvidenceError } from "./errors.js";
import { assertDigest, type Digest, digestBytes, type Hasher } from "./hash.js";
import type { Kv } from "./kv.js";
import { decodeTree, encodeTree, type Tree, type TreeEntry } from "./objects.js";
import type { ObjectKind, ObjectStore, StoredObject } from "./store.js";

function integrity(kind: ObjectKind, digest: Digest, actual: Digest): EvidenceError {
  return new EvidenceError(
    "ASP_EVIDENCE_INTEGRITY",
    `stored ${kind} ${digest} is corrupted: its bytes hash to ${actual}`,
    {
      data: { kind, digest, actual },
    },
  );
}

/** The {@link ObjectStore} over a Kv (level, memory or a shared database); `readOnly` refuses every put. */
export function createKvObjectStore(
  kv: Kv,
  hasher: Hasher,
  options: { readonly readOnly?: boolean } = {},
): ObjectStore {
  const read = async (kind: ObjectKind, id: Digest): Promise<Uint8Array> => {
    assertDigest(id, `${kind} id`);
    const bytes = await kv.get(kind, id);
    if (bytes === undefined) {
      throw new EvidenceError("ASP_EVIDENCE_NOT_FOUND", `no ${kind} ${id} in the store at ${kv.location}`, {
        data: { kind, digest: id },
      });
    }
    const actual = digestBytes(bytes, hasher);
    if (actual !== id) throw integrity(kind, id, actual);
    return bytes;
  };
  const putMany = async (objects: readonly StoredObject[]): Promise<number> => {
    if (options.readOnly) {
      throw new EvidenceError(
        "ASP_EVIDENCE_READ_ONLY",
        `cannot store objects: the evidence store at ${kv.location} was opened read-only`,
        { data: { path: kv.location } },
      );
    }
    for (const o of objects) {
      assertDigest(o.digest, `${o.kind} id`);
      const actual = digestBytes(o.bytes, hasher);
      if (actual !== o.digest) throw integrity(o.kind, o.digest, actual);
    }
    const written = new Set<string>();
    const todo: StoredObject[] = [];
    for (const kind of ["blob", "tree"] as const) {
      const ofKind = objects.filter(
        (o) => o.kind === kind && !written.has(`${kind}:${o.digest}`) && written.add(`${kind}:${o.digest}`),
      );
      if (ofKind.length === 0) continue;
      const present = await kv.hasMany(
        kind,
        ofKind.map((o) => o.digest),
      );
      ofKind.forEach((o, i) => {
        if (!present[i]) todo.push(o);
      });
    }
    if (todo.length > 0) {
      await kv.batch(
        todo.map((o) => ({ type: "put", space: o.kind, key: o.digest, value: o.bytes })),
        false,
      );
    }
    return todo.length;
  };
  return {
    async putBlob(bytes) {
      const digest = digestBytes(bytes, hasher);
      await putMany([{ kind: "blob", digest, bytes }]);
      return digest;
    },
    async putTree(entries: readonly TreeEntry[]) {
      const tree = encodeTree(entries, hasher);
      await putMany([{ kind: "tree", digest: tree.digest, bytes: tree.bytes }]);
      return tree.digest;
    },
    putMany,
    async has(kind, digest) {
      assertDigest(digest, `${kind} id`);
      const [present] = await kv.hasMany(kind, [digest]);
      return present === true;
    },
    readBlob: (digest) => read("blob", digest),
    async readTree(digest): Promise<Tree> {
      const bytes = await read("tree", digest);
      const tree = decodeTree(bytes, hasher);
      return { digest: tree.digest, entries: tree.entries };
    },
  };
}
