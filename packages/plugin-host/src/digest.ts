import { type Dirent, lstatSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, resolve, sep } from "node:path";
import { blobDigest, type Digest, encodeTree, type TreeEntry } from "@asp/evidence";
import { errnoOf, PluginError } from "./errors.js";
import { readRegularFile } from "./read.js";

/** No file of a plugin is anywhere near this; a larger one is refused before it is read. */
const MAX_PLUGIN_FILE_BYTES = 256 * 1024 * 1024;

/** The manifest every plugin folder has at its root. */
export const MANIFEST_FILE = "asp-plugin.json";
/** The detached signature next to it; the only file the digest leaves out. */
export const SIGNATURE_FILE = "asp-plugin.sig";

/** A plugin folder's identity. */
export interface PluginDigest {
  /** Real absolute path of the folder. */
  readonly dir: string;
  /** The evidence tree digest of every file in the folder except `asp-plugin.sig`. */
  readonly digest: Digest;
  /** Files and links covered. */
  readonly files: number;
}

/** One regular file of a plugin snapshot: exactly the bytes that were hashed. */
export interface PluginFile {
  /** Path inside the plugin folder, `/`-separated. */
  readonly path: string;
  readonly executable: boolean;
  readonly bytes: Uint8Array;
}

/** A plugin folder read once: its digest and the very bytes it was computed from. */
export interface PluginSnapshot extends PluginDigest {
  readonly entries: readonly PluginFile[];
}

/** True when `target` is `root` or inside it. */
export function isInside(root: string, target: string): boolean {
  return target === root || target.startsWith(root.endsWith(sep) ? root : `${root}${sep}`);
}

function io(path: string, what: string, error: unknown): PluginError {
  return new PluginError("ASP_PLUGIN_IO", `${what} ${path}: ${errnoOf(error)}`, {
    cause: error,
    data: { path, errno: errnoOf(error) },
  });
}

/**
 * `measure`: links recorded as links, special files left out (a configured provider's root).
 * `strict`: what the plugin loader accepts: regular files and folders only, each file's bytes kept.
 */
type WalkMode = "measure" | "strict";

/** The one walk behind {@link digestPlugin} and {@link snapshotPlugin}, so both hash alike. */
function walkPlugin(dir: string, mode: WalkMode): PluginSnapshot {
  let root: string;
  try {
    root = realpathSync(resolve(dir));
    if (!lstatSync(root).isDirectory()) throw Object.assign(new Error("not a directory"), { code: "ENOTDIR" });
  } catch (error) {
    throw new PluginError("ASP_PLUGIN_NOT_FOUND", `no plugin folder at ${dir}`, { cause: error, data: { dir } });
  }
  let files = 0;
  const kept: PluginFile[] = [];
  const walk = (abs: string, rel: string): TreeEntry[] => {
    let dirents: Dirent[];
    try {
      dirents = readdirSync(abs, { withFileTypes: true });
    } catch (error) {
      throw io(abs, "cannot read directory", error);
    }
    const entries: TreeEntry[] = [];
    for (const d of dirents) {
      if (rel === "" && d.name === SIGNATURE_FILE) continue;
      const childAbs = `${abs}${sep}${d.name}`;
      const childRel = rel === "" ? d.name : `${rel}/${d.name}`;
      if (d.isDirectory()) {
        const sub = walk(childAbs, childRel);
        if (sub.length === 0) continue;
        entries.push({ name: d.name, mode: "040000", digest: encodeTree(sub).digest });
      } else if (d.isSymbolicLink()) {
        let target: string;
        try {
          target = readlinkSync(childAbs);
        } catch (error) {
          throw io(childAbs, "cannot read link", error);
        }
        const resolved = resolve(dirname(childAbs), target);
        let real = resolved;
        try {
          real = realpathSync(resolved);
        } catch {
          // A dangling link is judged by where it points.
        }
        if (isAbsolute(target) || !isInside(root, resolved) || !isInside(root, real)) {
          throw new PluginError(
            "ASP_PLUGIN_SYMLINK_ESCAPE",
            `link ${childRel} points outside the plugin folder (${target})`,
            { data: { path: childRel, target } },
          );
        }
        if (mode === "strict") {
          // What is copied and run must be exactly what was hashed: a link would be followed at
          // run time, so a plugin folder holds regular files only.
          throw new PluginError(
            "ASP_PLUGIN_SYMLINK",
            `${childRel} is a symbolic link; a plugin holds regular files only`,
            {
              data: { path: childRel, target },
            },
          );
        }
        entries.push({ name: d.name, mode: "120000", digest: blobDigest(new TextEncoder().encode(target)) });
        files++;
      } else if (d.isFile()) {
        let bytes: Buffer;
        let fileMode: number;
        try {
          fileMode = lstatSync(childAbs).mode;
          // It was a regular file when listed; a pipe, device or link swapped in since is refused.
          bytes = readRegularFile(childAbs, { maxBytes: MAX_PLUGIN_FILE_BYTES, noFollow: true });
        } catch (error) {
          if (mode === "strict") swappedIn(childRel, error);
          throw io(childAbs, "cannot read", error);
        }
        const data = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        const executable = (fileMode & 0o100) !== 0;
        entries.push({ name: d.name, mode: executable ? "100755" : "100644", digest: blobDigest(data) });
        if (mode === "strict") kept.push({ path: childRel, executable, bytes: data });
        files++;
      } else if (mode === "strict") {
        throw special(childRel);
      }
      // measure: sockets, fifos and devices carry no content and cannot be imported: left out, as in evidence.
    }
    return entries;
  };
  const tree = encodeTree(walk(root, ""));
  return { dir: root, digest: tree.digest, files, entries: kept };
}

const special = (path: string): PluginError =>
  new PluginError("ASP_PLUGIN_SPECIAL_FILE", `${path} is a fifo, socket or device; a plugin holds regular files only`, {
    data: { path },
  });

/** A file listed as regular that is a link (`ELOOP`) or a special file (`EINVAL`) by the time it is opened. */
function swappedIn(path: string, error: unknown): void {
  const errno = errnoOf(error);
  if (errno === "ELOOP") {
    throw new PluginError("ASP_PLUGIN_SYMLINK", `${path} became a symbolic link while it was read`, {
      cause: error,
      data: { path },
    });
  }
  if (errno === "EINVAL") throw Object.assign(special(path), { cause: error });
}

/**
 * Compute a plugin's digest: the `@asp/evidence` tree digest of its folder (git-like blobs and
 * trees; links recorded as links, never followed; executable bit kept; empty folders left out),
 * covering every file — the manifest, `node_modules`, dotfiles, `.gitignore`d files — except the
 * root `asp-plugin.sig`. Nothing is ignored, so nothing can be slipped in after signing. This is
 * the measurement of a folder (the host also measures configured providers' roots with it); the
 * loader accepts only folders `snapshotPlugin` takes, which hash the same.
 *
 * @throws PluginError `ASP_PLUGIN_SYMLINK_ESCAPE` for a link whose target is absolute or leaves
 *   the folder, `ASP_PLUGIN_NOT_FOUND` when the folder does not exist, `ASP_PLUGIN_IO` otherwise.
 */
export function digestPlugin(dir: string): PluginDigest {
  const { dir: root, digest, files } = walkPlugin(dir, "measure");
  return { dir: root, digest, files };
}

/**
 * Read a plugin folder once, as the loader accepts it: regular files and folders only, every
 * file's bytes kept with the digest computed from them (the same digest {@link digestPlugin}
 * gives), so what is checked, parsed and copied afterwards is exactly what was hashed.
 *
 * @throws PluginError `ASP_PLUGIN_SYMLINK_ESCAPE` for a link leaving the folder,
 *   `ASP_PLUGIN_SYMLINK` for any other link, `ASP_PLUGIN_SPECIAL_FILE` for a fifo, socket or
 *   device, `ASP_PLUGIN_NOT_FOUND` when the folder does not exist, `ASP_PLUGIN_IO` otherwise.
 */
export function snapshotPlugin(dir: string): PluginSnapshot {
  return walkPlugin(dir, "strict");
}
