import { randomUUID } from "node:crypto";
import { canonicalize, parseCanonical } from "./canonical.js";
import { EvidenceError } from "./errors.js";
import { createKvFactLog } from "./fact-log.js";
import { defaultHasher } from "./hash.js";
import { createMemoryKv, type Kv, openLevelKv, STORE_FORMAT, STORE_VERSION, toBytes } from "./kv.js";
import { createKvObjectStore } from "./object-store.js";
import type { Clock, Store, StoreOptions } from "./store.js";

const systemClock: Clock = { now: () => new Date() };

async function storeId(kv: Kv, clock: Clock): Promise<string> {
  const raw = await kv.get("meta", "format");
  if (raw !== undefined) {
    let v: { format?: unknown; version?: unknown; id?: unknown };
    try {
      v = parseCanonical(raw, "store format record") as typeof v;
    } catch (cause) {
      throw new EvidenceError("ASP_EVIDENCE_STORE_CORRUPT", `the format record of ${kv.location} is unreadable`, {
        cause,
        data: { path: kv.location },
      });
    }
    if (v?.format !== STORE_FORMAT || typeof v.id !== "string" || typeof v.version !== "number") {
      throw new EvidenceError("ASP_EVIDENCE_NOT_A_STORE", `${kv.location} is a database but not an evidence store`, {
        data: { path: kv.location },
      });
    }
    if (v.version > STORE_VERSION) {
      throw new EvidenceError(
        "ASP_EVIDENCE_UNSUPPORTED_FORMAT",
        `${kv.location} has store format ${v.version}; upgrade @asp/evidence`,
        {
          data: { path: kv.location, version: v.version },
        },
      );
    }
    return v.id;
  }
  // No format record: only a fresh (or interrupted-at-creation) database may get one now.
  if (await kv.hasAnyKey()) {
    throw new EvidenceError(
      "ASP_EVIDENCE_NOT_A_STORE",
      `${kv.location} holds data but no evidence store format record`,
      {
        data: { path: kv.location },
      },
    );
  }
  const id = randomUUID();
  const record = { format: STORE_FORMAT, version: STORE_VERSION, id, createdAt: clock.now().toISOString() };
  await kv.batch([{ type: "put", space: "meta", key: "format", value: toBytes(canonicalize(record)) }], true);
  return id;
}

async function assemble(kv: Kv, options: StoreOptions): Promise<Store> {
  const hasher = options.hasher ?? defaultHasher();
  const clock = options.clock ?? systemClock;
  try {
    const id = await storeId(kv, clock);
    let closing: Promise<void> | undefined;
    const close = (): Promise<void> => {
      closing ??= kv.close();
      return closing;
    };
    const log = await createKvFactLog(kv, hasher, clock, close);
    return { location: kv.location, id, log, objects: createKvObjectStore(kv, hasher), hasher, close };
  } catch (error) {
    await kv.close();
    throw error;
  }
}

/**
 * Open the evidence store in `dir` (level / classic-level), creating it when the directory is
 * missing or empty. A non-empty directory that is not a store is refused, never re-created or
 * truncated. One process at a time: the database lock is exclusive.
 *
 * @throws EvidenceError `ASP_EVIDENCE_NOT_A_STORE` (non-empty foreign directory, or a file),
 *   `ASP_EVIDENCE_STORE_LOCKED` (held by another process or handle), `ASP_EVIDENCE_STORE_CORRUPT`
 *   (the database does not open), `ASP_EVIDENCE_UNSUPPORTED_FORMAT` (newer format). Each names the path.
 * @example
 * ```ts
 * const store = await openStore("./.asp/evidence");
 * await store.log.append([{ kind: "note", record: { hello: "world" } }]);
 * await store.close();
 * ```
 */
export async function openStore(dir: string, options: StoreOptions = {}): Promise<Store> {
  return assemble(await openLevelKv(dir), options);
}

/** An in-memory store with the same behaviour as {@link openStore}, for tests and demos. Nothing is persisted. */
export async function createMemoryStore(options: StoreOptions = {}): Promise<Store> {
  return assemble(createMemoryKv(), options);
}
