import { type Digest, isNormalizedPath, type ObjectStore } from "@asp/evidence";
import { ThsError } from "./errors.js";

/**
 * The dependency environment the host snapshots next to every baseline (host §5, §9): trusted
 * configuration only, like every host configuration field. `roots` are the repository-relative
 * dependency folders (`"auto"`: each `node_modules` next to a `package.json` of the baseline);
 * `excludes` are gitignore patterns inside each root (default: `@asp/evidence`'s `[".cache/"]`).
 */
export interface EnvironmentConfig {
  readonly roots: readonly string[] | "auto";
  readonly excludes?: readonly string[];
}

/** The host's environment setting: a configuration, or `false` (requests carry no environment). */
export type EnvironmentSetting = EnvironmentConfig | false;

/** The default: `node_modules` next to every `package.json` of the baseline. */
export const DEFAULT_ENVIRONMENT: EnvironmentConfig = Object.freeze({ roots: "auto" });

/** The folder name `"auto"` looks for next to each `package.json`. */
const AUTO_FOLDER = "node_modules";

/** Characters that mean something in gitignore syntax: a root holding one could not be excluded exactly. */
const GLOB = /[*?[\]!#\\]|^\s|\s$/;

function badEnvironment(where: string, message: string, data: Record<string, unknown> = {}): never {
  throw new ThsError("ASP_THS_BAD_CONFIG", `${where}: /environment ${message}`, {
    data: { pointer: "/environment", ...data },
  });
}

/**
 * Validate an environment setting from trusted configuration (the host configuration file or
 * `composeHost`'s `environment` option); `undefined` is the default (`roots: "auto"`).
 *
 * @throws ThsError `ASP_THS_BAD_CONFIG` when it is not `false` or an object of `roots` (`"auto"` or
 *   a non-empty array of distinct normalized relative paths without gitignore metacharacters, none
 *   inside another) and `excludes` (non-empty strings).
 */
export function checkEnvironmentSetting(value: unknown, where = "host configuration"): EnvironmentSetting {
  if (value === undefined) return DEFAULT_ENVIRONMENT;
  if (value === false) return false;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    badEnvironment(where, "must be false or an object");
  for (const key of Object.keys(value))
    if (key !== "roots" && key !== "excludes") badEnvironment(where, `has no key ${JSON.stringify(key)}`, { key });
  const { roots = "auto", excludes } = value as { roots?: unknown; excludes?: unknown };
  if (excludes !== undefined) {
    if (!Array.isArray(excludes) || excludes.some((e) => typeof e !== "string" || e.length === 0))
      badEnvironment(where, "excludes must be an array of non-empty gitignore patterns");
  }
  const out = (r: readonly string[] | "auto"): EnvironmentConfig =>
    excludes === undefined ? { roots: r } : { roots: r, excludes: [...(excludes as string[])] };
  if (roots === "auto") return out("auto");
  if (!Array.isArray(roots) || roots.length === 0) badEnvironment(where, 'roots must be "auto" or a non-empty array');
  const list = roots as unknown[];
  for (const r of list) {
    if (typeof r !== "string" || !isNormalizedPath(r))
      badEnvironment(where, `root ${JSON.stringify(r)} is not a normalized relative path`, { root: r });
    if (GLOB.test(r)) badEnvironment(where, `root ${JSON.stringify(r)} holds a gitignore metacharacter`, { root: r });
  }
  const names = list as string[];
  if (new Set(names).size !== names.length) badEnvironment(where, "roots repeat a path");
  for (const a of names)
    for (const b of names) if (b.startsWith(`${a}/`)) badEnvironment(where, `roots nest: ${a} holds ${b}`, { a, b });
  return out([...names].sort());
}

/**
 * The excludes that keep the environment out of every baseline and base snapshot: a declared root
 * is never part of the change, even when the repository does not ignore it. `"auto"` excludes
 * every `node_modules` folder.
 */
export function environmentExcludes(setting: EnvironmentSetting): string[] {
  if (setting === false) return [];
  if (setting.roots === "auto") return [`${AUTO_FOLDER}/`];
  return setting.roots.map((r) => `/${r}/`);
}

/**
 * The roots `"auto"` finds in a baseline tree: `node_modules` beside each regular `package.json`
 * (the repository root's and each workspace package's). Baselines never hold a `node_modules`
 * folder (see {@link environmentExcludes}), so none is ever inside another.
 *
 * @throws EvidenceError `ASP_EVIDENCE_NOT_FOUND` when the tree is not in the store.
 */
export async function packageRoots(objects: ObjectStore, tree: Digest): Promise<string[]> {
  const roots: string[] = [];
  const walk = async (digest: Digest, prefix: string): Promise<void> => {
    const t = await objects.readTree(digest);
    for (const e of t.entries) {
      if (e.mode === "040000") {
        if (e.name !== AUTO_FOLDER) await walk(e.digest, prefix === "" ? e.name : `${prefix}/${e.name}`);
      } else if (e.name === "package.json" && (e.mode === "100644" || e.mode === "100755")) {
        roots.push(prefix === "" ? AUTO_FOLDER : `${prefix}/${AUTO_FOLDER}`);
      }
    }
  };
  await walk(tree, "");
  return roots.sort();
}

/**
 * True when an edit to `path` would write into the dependency environment (host §9: it is
 * read-only evidence, never part of a change): under a declared root, or with `"auto"` under any
 * `node_modules` folder.
 */
export function insideEnvironment(setting: EnvironmentSetting, path: string): boolean {
  if (setting === false) return false;
  if (setting.roots === "auto") return path.split("/").slice(0, -1).includes(AUTO_FOLDER);
  return setting.roots.some((r) => path === r || path.startsWith(`${r}/`));
}
