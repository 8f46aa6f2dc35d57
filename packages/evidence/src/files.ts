import { copyFile, link, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { ANCHOR_FILE, type AnchorRead, parseAnchor } from "./anchor.js";
import { fsyncPath } from "./durable.js";
import { EvidenceError } from "./errors.js";
import { LEVEL_DATA, MARKER_FILE } from "./layout.js";
import { alive } from "./lock.js";

/**
 * A point-in-time copy of a store's files, taken without its lock while a writer may run.
 *
 * Level's table files are immutable once written, so they are hard-linked (cheap; a link keeps a
 * table alive even when the writer's compaction deletes it); the write-ahead logs, manifests,
 * CURRENT, the marker and the anchor are copied, the logs last. The copy is consistent when the
 * set of level files, CURRENT and the manifests' sizes are the same before and after it (then
 * no flush or compaction ran meanwhile, and each log copy is a prefix of what was written, which
 * level replays like a log cut by a crash); otherwise it is taken again. The anchor is read
 * first, so every entry it names was durable before the copy began: the caller proves the copy
 * reaches it.
 */

const WAL = /^\d{6}\.log$/;
const TABLE = /^\d{6}\.(ldb|sst)$/;
const MAX_ATTEMPTS = 50;

interface DirState {
  readonly names: string;
  readonly current: string;
  readonly manifests: string;
}

async function dirState(dir: string): Promise<DirState> {
  const names = (await readdir(dir)).filter((n) => LEVEL_DATA.test(n)).sort();
  let current = "";
  try {
    current = await readFile(join(dir, "CURRENT"), "utf8");
  } catch {
    current = "<none>";
  }
  const manifests: string[] = [];
  for (const n of names.filter((x) => x.startsWith("MANIFEST-"))) {
    try {
      manifests.push(`${n}:${(await stat(join(dir, n))).size}`);
    } catch {
      manifests.push(`${n}:gone`);
    }
  }
  return { names: names.join(","), current, manifests: manifests.join(",") };
}

const same = (a: DirState, b: DirState): boolean =>
  a.names === b.names && a.current === b.current && a.manifests === b.manifests;

/** How the files reach the copy: hard links for tables (falling back to copies), or copies only. */
export type CopyMode = "link" | "copy";

/** What {@link copyStoreFiles} took. */
export interface FileCopy {
  /** The anchor as read before anything else was copied (its bytes are in the copy too). */
  readonly anchor: AnchorRead;
  /** Attempts it took to get a copy no flush or compaction ran through. */
  readonly attempts: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Copy the files of the store in `src` into the empty directory `dst` (see the module comment).
 * With `durable`, every copied file and `dst` are fsynced (backups).
 *
 * @throws EvidenceError `ASP_EVIDENCE_IO` when a file cannot be read or written, or when the
 *   store kept changing through every attempt.
 */
export async function copyStoreFiles(
  src: string,
  dst: string,
  options: { readonly mode: CopyMode; readonly durable?: boolean },
): Promise<FileCopy> {
  let linking = options.mode === "link";
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    for (const n of await readdir(dst)) await rm(join(dst, n), { recursive: true, force: true });
    let anchorBytes: Buffer | undefined;
    try {
      anchorBytes = await readFile(join(src, ANCHOR_FILE));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw ioError(src, "read the anchor", error);
    }
    const before = await dirState(src);
    const names = before.names.split(",").filter((n) => n !== "");
    let vanished = false;
    const put = async (name: string, how: "copy" | "link", optional = false): Promise<void> => {
      const from = join(src, name);
      const to = join(dst, name);
      try {
        if (how === "link" && linking) {
          try {
            await link(from, to);
            return;
          } catch (error) {
            const code = (error as NodeJS.ErrnoException).code;
            if (code === "ENOENT") throw error;
            linking = false; // another filesystem, or links not allowed: copy from now on
          }
        }
        await copyFile(from, to);
        if (options.durable) await fsyncPath(to);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") {
          vanished ||= !optional;
          return;
        }
        throw ioError(src, `copy ${name}`, error);
      }
    };
    if (anchorBytes !== undefined) {
      await writeFile(join(dst, ANCHOR_FILE), anchorBytes);
      if (options.durable) await fsyncPath(join(dst, ANCHOR_FILE));
    }
    await put(MARKER_FILE, "copy", true);
    for (const n of names.filter((x) => x === "CURRENT" || x.startsWith("MANIFEST-"))) await put(n, "copy");
    for (const n of names.filter((x) => TABLE.test(x))) await put(n, "link");
    for (const n of names.filter((x) => WAL.test(x))) await put(n, "copy");
    const after = await dirState(src);
    if (!vanished && same(before, after)) {
      if (options.durable) await fsyncPath(dst);
      return { anchor: anchorBytes === undefined ? { state: "missing" } : parseAnchor(anchorBytes), attempts: attempt };
    }
    await sleep(Math.min(10 * attempt, 200));
  }
  throw new EvidenceError(
    "ASP_EVIDENCE_IO",
    `the evidence store at ${src} kept changing while it was being copied (${MAX_ATTEMPTS} attempts)`,
    { data: { path: src } },
  );
}

function ioError(path: string, what: string, cause: unknown): EvidenceError {
  const code = (cause as NodeJS.ErrnoException).code ?? "error";
  return new EvidenceError("ASP_EVIDENCE_IO", `cannot ${what} of the evidence store at ${path}: ${code}`, {
    cause,
    data: { path, errno: code },
  });
}

const SNAPSHOT = ".snapshot-";

/**
 * A private directory for a snapshot of the store at `location`: beside it (same filesystem, so
 * tables can be hard-linked), or under the system temp dir when the parent is not writable.
 * Snapshot directories left by readers that died are removed on the way.
 */
export async function makeSnapshotDir(location: string): Promise<string> {
  const parent = dirname(location);
  const prefix = `${basename(location)}${SNAPSHOT}`;
  try {
    for (const n of await readdir(parent)) {
      const m = n.startsWith(prefix) ? /^(\d+)-/.exec(n.slice(prefix.length)) : null;
      if (m !== null && !alive(Number(m[1]))) await rm(join(parent, n), { recursive: true, force: true });
    }
  } catch {
    // Cleaning up is best effort.
  }
  try {
    return await mkdtemp(join(parent, `${prefix}${process.pid}-`));
  } catch {
    const dir = join(tmpdir(), "asp-evidence-snapshots");
    await mkdir(dir, { recursive: true });
    return mkdtemp(join(dir, `${process.pid}-`));
  }
}
