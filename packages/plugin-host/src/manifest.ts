import { existsSync, realpathSync, statSync } from "node:fs";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { type PluginManifest, validate } from "@asp/contracts";
import { isInside, MANIFEST_FILE, type PluginSnapshot } from "./digest.js";
import { errnoOf, PluginError } from "./errors.js";
import { readRegularFile } from "./read.js";

/** A manifest is a few kilobytes; anything near this is not one. */
const MAX_MANIFEST_BYTES = 1024 * 1024;

/**
 * Read the raw manifest, only to name the plugin in a refusal: nothing in it is trusted until
 * the signature and digest are verified.
 */
export function peekPluginId(dir: string): string | null {
  try {
    const v = JSON.parse(
      readRegularFile(join(dir, MANIFEST_FILE), { maxBytes: MAX_MANIFEST_BYTES }).toString("utf8"),
    ) as {
      id?: unknown;
    };
    return typeof v.id === "string" && v.id.length > 0 && v.id.length <= 214 ? v.id : null;
  } catch {
    return null;
  }
}

/** A validated manifest with the absolute path of its entry. */
export interface ReadManifest {
  readonly manifest: PluginManifest;
  /** Absolute, real path of the entry inside the plugin folder. */
  readonly entryPath: string;
}

/**
 * Read and validate `asp-plugin.json` of the plugin folder `root` (a real absolute path): the
 * contracts `plugin-manifest` schema, and an `entry` that is a file inside the folder.
 *
 * @throws PluginError `ASP_PLUGIN_NOT_FOUND` without a manifest, `ASP_PLUGIN_BAD_MANIFEST` when
 *   it is not valid, `ASP_PLUGIN_ENTRY_ESCAPE` when the entry resolves outside the folder.
 */
export function readPluginManifest(root: string): ReadManifest {
  const file = join(root, MANIFEST_FILE);
  let text: string;
  try {
    text = readRegularFile(file, { maxBytes: MAX_MANIFEST_BYTES }).toString("utf8");
  } catch (error) {
    throw new PluginError("ASP_PLUGIN_NOT_FOUND", `no ${MANIFEST_FILE} in ${root} (${errnoOf(error)})`, {
      cause: error,
      data: { dir: root },
    });
  }
  const manifest = parseManifest(root, text);
  const abs = resolve(root, manifest.entry);
  if (!existsSync(abs)) {
    throw new PluginError("ASP_PLUGIN_BAD_MANIFEST", `entry ${manifest.entry} does not exist`, {
      data: { entry: manifest.entry },
    });
  }
  const real = realpathSync(abs);
  if (!isInside(root, real)) {
    throw new PluginError("ASP_PLUGIN_ENTRY_ESCAPE", `entry ${manifest.entry} resolves outside the plugin folder`, {
      data: { entry: manifest.entry },
    });
  }
  if (!statSync(real).isFile()) {
    throw new PluginError("ASP_PLUGIN_BAD_MANIFEST", `entry ${manifest.entry} is not a file`, {
      data: { entry: manifest.entry },
    });
  }
  return { manifest, entryPath: real };
}

/** A manifest read from a {@link PluginSnapshot}, with its entry as a path inside the folder. */
export interface SnapshotManifest {
  readonly manifest: PluginManifest;
  /** The entry's `/`-separated path inside the plugin folder (a file of the snapshot). */
  readonly entry: string;
}

/**
 * The manifest in force for a verified plugin: parsed from the very bytes that were hashed (a
 * snapshot), never read from disk again, with an entry that is a regular file of the snapshot.
 *
 * @throws PluginError `ASP_PLUGIN_NOT_FOUND` without a manifest, `ASP_PLUGIN_BAD_MANIFEST` when
 *   it is not valid or its entry is not a file of the folder, `ASP_PLUGIN_ENTRY_ESCAPE` when the
 *   entry leaves the folder.
 */
export function manifestOfSnapshot(snapshot: PluginSnapshot): SnapshotManifest {
  const file = snapshot.entries.find((f) => f.path === MANIFEST_FILE);
  if (file === undefined || file.bytes.byteLength > MAX_MANIFEST_BYTES) {
    throw new PluginError("ASP_PLUGIN_NOT_FOUND", `no ${MANIFEST_FILE} in ${snapshot.dir}`, {
      data: { dir: snapshot.dir },
    });
  }
  const manifest = parseManifest(snapshot.dir, new TextDecoder().decode(file.bytes));
  const entry = relative(snapshot.dir, resolve(snapshot.dir, manifest.entry)).split(sep).join("/");
  if (!snapshot.entries.some((f) => f.path === entry)) {
    throw new PluginError("ASP_PLUGIN_BAD_MANIFEST", `entry ${manifest.entry} is not a file of the plugin`, {
      data: { entry: manifest.entry },
    });
  }
  return { manifest, entry };
}

/** Parse and validate a manifest's text; the entry must stay inside `root` lexically. */
function parseManifest(root: string, text: string): PluginManifest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new PluginError("ASP_PLUGIN_BAD_MANIFEST", `${MANIFEST_FILE} in ${root} is not JSON`, { cause: error });
  }
  // The entry is checked before the schema so an escaping path gets its own, precise code.
  const entry = (value as { entry?: unknown } | null)?.entry;
  if (typeof entry === "string") {
    const abs = resolve(root, entry);
    if (isAbsolute(entry) || entry.includes("\\") || !isInside(root, abs)) {
      throw new PluginError("ASP_PLUGIN_ENTRY_ESCAPE", `entry ${JSON.stringify(entry)} leaves the plugin folder`, {
        data: { entry },
      });
    }
  }
  const r = validate("plugin-manifest", value);
  if (!r.ok) {
    const first = r.errors[0];
    throw new PluginError(
      "ASP_PLUGIN_BAD_MANIFEST",
      `${MANIFEST_FILE} is not a valid plugin manifest: ${first?.pointer || "/"} ${first?.message ?? ""}`,
      { data: { errors: r.errors } },
    );
  }
  return r.value;
}
