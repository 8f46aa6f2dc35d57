import { randomBytes } from "node:crypto";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { type PluginSnapshot, snapshotPlugin } from "./digest.js";
import { errnoOf, PluginError } from "./errors.js";

// THREAT-MODEL invariant 4: what runs is exactly what was verified, at every launch and restart.
// The plugin folder is untrusted bytes at every instant (before verification, between
// verification and launch, after a crash). So the loader hashes the folder once, keeps those
// bytes, writes exactly them into a folder only the host writes, named by their digest, makes it
// read-only, hashes the copy again, and launches and imports only from the copy. The original
// folder is never read again.

/** A verified plugin's host-owned copy. */
export interface CachedPlugin {
  /** Real absolute path of the read-only copy: `<cacheDir>/<digest>`. */
  readonly dir: string;
  /** Absolute path of the entry inside the copy. */
  readonly entryPath: string;
}

const ENTRY_NAME = /^[a-z0-9]+-[0-9a-f]{16,128}$/;

/** The folder name of a digest in the cache (`sha256:ab…` → `sha256-ab…`). */
function entryName(digest: string): string {
  const name = digest.replace(":", "-");
  if (!ENTRY_NAME.test(name)) {
    throw new PluginError("ASP_PLUGIN_IO", `digest ${JSON.stringify(digest)} cannot name a cache entry`, {
      data: { digest },
    });
  }
  return name;
}

function cacheIo(path: string, what: string, error: unknown): PluginError {
  return new PluginError("ASP_PLUGIN_IO", `plugin cache: ${what} ${path}: ${errnoOf(error)}`, {
    cause: error,
    data: { path, errno: errnoOf(error) },
  });
}

/** The digest of `dir` read as the loader reads a plugin, or null when it is not such a folder. */
function digestOrNull(dir: string): string | null {
  try {
    return snapshotPlugin(dir).digest;
  } catch {
    return null;
  }
}

/** True when `path` itself is a folder, not a link to one. */
function isRealFolder(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Make a read-only tree writable again (to replace or remove it); never follows a link. */
function makeWritable(path: string): void {
  const stat = lstatSync(path);
  if (stat.isSymbolicLink()) return;
  if (stat.isDirectory()) {
    chmodSync(path, 0o700);
    for (const name of readdirSync(path)) makeWritable(join(path, name));
  } else {
    chmodSync(path, 0o600);
  }
}

/** Remove a cache entry or a whole cache folder, read-only files included. Missing is fine. */
function removeTree(path: string): void {
  if (!existsSync(path)) return;
  try {
    makeWritable(path);
  } catch {
    // Removal below reports what really blocks it.
  }
  rmSync(path, { recursive: true, force: true });
}

/** Write the snapshot's bytes under `dir` (a fresh folder), then make every file and folder read-only. */
function writeSnapshot(snapshot: PluginSnapshot, dir: string): void {
  const folders = new Set<string>([dir]);
  for (const file of snapshot.entries) {
    const path = join(dir, ...file.path.split("/"));
    for (let d = dirname(path); d !== dir && !folders.has(d); d = dirname(d)) folders.add(d);
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    // `wx`: never through something that appeared at this path, never over an existing file.
    writeFileSync(path, file.bytes, { flag: "wx", mode: 0o600 });
    chmodSync(path, file.executable ? 0o555 : 0o444);
  }
  // Deepest first, so every folder is still writable while its children are sealed.
  for (const d of [...folders].sort((a, b) => b.length - a.length)) chmodSync(d, 0o555);
}

/**
 * Copy a verified plugin into the host-owned, content-addressed cache and return the copy to
 * run: `<cacheDir>/<digest>/`, holding exactly the snapshot's bytes (never re-read from the
 * plugin's folder), read-only, and hashed again after it is written. An entry already in the
 * cache is reused only when it hashes to the digest now (never trusted by its name); otherwise
 * it is replaced. Two hosts sharing a cache may race: the loser keeps the winner's entry after
 * hashing it.
 *
 * @param snapshot The verified plugin, read by `snapshotPlugin`.
 * @param entry The manifest's entry, `/`-separated, inside the plugin.
 * @param cacheDir A folder only the host writes (created when missing).
 * @throws PluginError `ASP_PLUGIN_CACHE_MISMATCH` when the copy does not hash to the verified
 *   digest, `ASP_PLUGIN_IO` when the cache cannot be written.
 */
export function cachePlugin(snapshot: PluginSnapshot, entry: string, cacheDir: string): CachedPlugin {
  let root: string;
  try {
    mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
    root = realpathSync(resolve(cacheDir));
  } catch (error) {
    throw cacheIo(cacheDir, "cannot create", error);
  }
  const target = join(root, entryName(snapshot.digest));
  if (existsSync(target) && (!isRealFolder(target) || digestOrNull(target) !== snapshot.digest)) {
    // Not what its name says (a crash mid-write, someone else wrote it, a link to a folder that
    // can change after it is hashed): replaced, never used.
    try {
      removeTree(target);
    } catch (error) {
      throw cacheIo(target, "cannot replace the stale entry", error);
    }
  }
  if (!existsSync(target)) {
    const incoming = join(root, `.incoming-${randomBytes(8).toString("hex")}`);
    try {
      mkdirSync(incoming, { mode: 0o700 });
      writeSnapshot(snapshot, incoming);
      renameSync(incoming, target);
    } catch (error) {
      removeTree(incoming);
      // Another host wrote the same digest first: its entry is hashed below like any other.
      if (!existsSync(target)) throw cacheIo(target, "cannot write", error);
    }
  }
  const copied = isRealFolder(target) ? digestOrNull(target) : null;
  if (copied !== snapshot.digest) {
    throw new PluginError(
      "ASP_PLUGIN_CACHE_MISMATCH",
      `the cached copy ${target} hashes to ${copied ?? "nothing a plugin can be"}, not the verified ${snapshot.digest}`,
      { data: { dir: target, verified: snapshot.digest, actual: copied } },
    );
  }
  return { dir: target, entryPath: join(target, ...entry.split("/")) };
}

/**
 * A fresh, private plugin cache folder under the system temp folder, for a host whose store has
 * no folder to put the cache beside (an in-memory store). The caller owns it and removes it with
 * {@link removePluginCache} when it closes.
 *
 * @throws Error from `mkdtemp` when the temp folder is not writable.
 */
export function createTempPluginCache(): string {
  return realpathSync(mkdtempSync(join(tmpdir(), "asp-plugin-cache-")));
}

/**
 * Remove a plugin cache folder the caller owns (its entries are read-only). Missing is fine.
 *
 * @throws Error from the filesystem when it cannot be removed.
 */
export function removePluginCache(dir: string): void {
  removeTree(resolve(dir));
}
