import { lstatSync, readlinkSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, join, parse, relative, resolve, sep } from "node:path";
import type { ProviderManifest } from "@asp/contracts";
import { ThsError } from "./errors.js";

// Threat model invariant 2 (host §2, "Provider supervision"): nothing untrusted becomes trusted
// by position. The candidate controls every byte of the repository being evaluated, symlinks
// included, so no trusted input may be read from inside it, directly or through a link.

/** The launch fields of a provider manifest that must lie outside the repository. */
export type ProviderLaunch = Pick<ProviderManifest, "id" | "executable" | "args" | "cwd" | "root">;

/**
 * The trusted inputs of a host configuration, as absolute paths. A `HostConfig` is one (plus the
 * file it was read from, as `file`).
 */
export interface TrustedLocations {
  /** The host configuration file itself. */
  readonly file?: string;
  /** The evidence store folder (a planted store could carry a forged trusted base or receipts). */
  readonly store?: string;
  /** The trusted policy file (a base-revision policy is read through git, never from the tree: not a location). */
  readonly policy?: string | { readonly git: string; readonly path: string };
  /** Trusted key files for plugin signatures. */
  readonly trustRoots?: readonly string[];
  /** Plugin folders. */
  readonly plugins?: readonly string[];
  /** Trusted provider launch manifests. */
  readonly providers?: readonly ProviderLaunch[];
}

/** One trusted input found inside the repository being evaluated. */
export interface UntrustedLocation {
  /**
   * The configuration field that names it: `config`, `store`, `policy`, `trustRoots[0]`,
   * `plugins[1]`, `providers[acme.ts].executable`, `providers[acme.ts].args[2]`,
   * `providers[acme.ts].cwd`, `providers[acme.ts].root`.
   */
  readonly field: string;
  /** The path as configured (a relative provider argument resolved against the provider's cwd). */
  readonly path: string;
  /**
   * Where it lies in the repository: the real path, or the symlink inside the repository the
   * path runs through; `null` when the path cannot be resolved (a symlink loop, no permission),
   * which is refused too, since it cannot be shown to lie outside.
   */
  readonly inside: string | null;
}

/** A path with its symlinks followed, and every symlink it ran through. */
interface Trace {
  /** The real path (a missing tail is kept as written below its nearest existing ancestor), or null. */
  readonly real: string | null;
  /** The real location of every symlink followed on the way. */
  readonly links: readonly string[];
}

const MAX_LINKS = 40;

function canonical(existing: string): string {
  try {
    // Canonical case on case-insensitive file systems; the walk below already followed links.
    return realpathSync.native(existing);
  } catch {
    return existing;
  }
}

/**
 * Follow `path` one component at a time, as the kernel would, recording every symlink. A
 * component that does not exist ends the walk: the rest is appended as written, so a path that
 * does not exist yet resolves through its nearest existing ancestor (a dangling symlink is
 * followed to where it points).
 */
function trace(path: string): Trace {
  const abs = resolve(path);
  const root = parse(abs).root;
  const links: string[] = [];
  let pending = abs.slice(root.length).split(sep);
  let current = root;
  let hops = 0;
  while (pending.length > 0) {
    const name = pending.shift() as string;
    if (name === "" || name === ".") continue;
    if (name === "..") {
      current = dirname(current);
      continue;
    }
    const next = join(current, name);
    let isLink: boolean;
    try {
      isLink = lstatSync(next).isSymbolicLink();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") return { real: null, links };
      // Missing from here on: the rest is lexical, below the nearest existing ancestor.
      let tail = canonical(current);
      for (const rest of [name, ...pending]) {
        if (rest === "" || rest === ".") continue;
        tail = rest === ".." ? dirname(tail) : join(tail, rest);
      }
      return { real: tail, links };
    }
    if (!isLink) {
      current = next;
      continue;
    }
    if (++hops > MAX_LINKS) return { real: null, links };
    links.push(next);
    let target: string;
    try {
      target = readlinkSync(next);
    } catch {
      return { real: null, links };
    }
    if (isAbsolute(target)) current = parse(target).root;
    pending = [...target.slice(isAbsolute(target) ? parse(target).root.length : 0).split(sep), ...pending];
  }
  return { real: canonical(current), links };
}

/**
 * True when `path` is `root` or lies below it. Both must be absolute and normalized; `root/..x`
 * is inside, `root/../x` and `rootx` are not.
 */
export function isInsidePath(root: string, path: string): boolean {
  const r = relative(root, path);
  return r === "" || (r !== ".." && !r.startsWith(`..${sep}`) && !isAbsolute(r));
}

/** The real path of the repository being evaluated. */
function repositoryRoot(repo: string): string {
  const t = trace(repo);
  if (t.real === null) {
    throw new ThsError("ASP_THS_BAD_REQUEST", `cannot resolve the repository folder ${repo}`, {
      data: { repository: repo },
    });
  }
  return t.real;
}

function locate(root: string, field: string, path: string): UntrustedLocation | null {
  const t = trace(path);
  if (t.real === null) return { field, path, inside: null };
  const via = t.links.find((l) => isInsidePath(root, l));
  if (via !== undefined) return { field, path, inside: via };
  return isInsidePath(root, t.real) ? { field, path, inside: t.real } : null;
}

function launchLocations(root: string, m: ProviderLaunch, field: string): UntrustedLocation[] {
  const found: Array<UntrustedLocation | null> = [
    locate(root, `${field}.executable`, m.executable),
    locate(root, `${field}.cwd`, m.cwd),
    // The measured folder: inside the repository, the candidate would choose what is measured.
    m.root === undefined ? null : locate(root, `${field}.root`, m.root),
  ];
  m.args.forEach((arg, i) => {
    // An argument is a path when the provider opens it: relative ones from its cwd. Check the
    // whole argument and the value of an `--option=value` form; a plain word resolves below
    // the cwd, which is checked above, so it is never a false alarm.
    const eq = arg.indexOf("=");
    const values = eq > 0 && arg.startsWith("-") ? [arg, arg.slice(eq + 1)] : [arg];
    for (const v of values) {
      const hit = locate(root, `${field}.args[${i}]`, resolve(m.cwd, v));
      if (hit !== null) {
        found.push(hit);
        break;
      }
    }
  });
  return found.filter((l): l is UntrustedLocation => l !== null);
}

/**
 * The launch locations of one provider manifest (executable, every argument, cwd) that lie
 * inside the repository `repo`, after resolving symlinks; empty when it may be launched.
 * `Host.evaluate` calls this for every provider before assessing.
 * @throws ThsError `ASP_THS_BAD_REQUEST` when `repo` itself cannot be resolved.
 * @example
 * ```ts
 * if (manifestLocationsInside(repo, manifest).length > 0) {
 *   // refuse the launch: degraded coverage, never allow
 * }
 * ```
 */
export function manifestLocationsInside(
  repo: string,
  manifest: ProviderLaunch,
  field = `providers[${manifest.id}]`,
): UntrustedLocation[] {
  return launchLocations(repositoryRoot(repo), manifest, field);
}

/**
 * Every trusted input of `trusted` that lies inside the repository `repo`, after resolving
 * symlinks on both sides (a path that does not exist yet resolves through its nearest existing
 * ancestor; a path that runs through a symlink inside the repository counts as inside).
 * @throws ThsError `ASP_THS_BAD_REQUEST` when `repo` itself cannot be resolved.
 */
export function untrustedLocations(repo: string, trusted: TrustedLocations): UntrustedLocation[] {
  const root = repositoryRoot(repo);
  const found: Array<UntrustedLocation | null> = [];
  if (trusted.file !== undefined) found.push(locate(root, "config", trusted.file));
  // A database store (`postgres://…`) is not a path: nothing of it can lie inside the repository.
  if (trusted.store !== undefined && trusted.store !== "memory:" && !/^postgres(?:ql)?:\/\//i.test(trusted.store))
    found.push(locate(root, "store", trusted.store));
  if (typeof trusted.policy === "string") found.push(locate(root, "policy", trusted.policy));
  (trusted.trustRoots ?? []).forEach((p, i) => {
    found.push(locate(root, `trustRoots[${i}]`, p));
  });
  (trusted.plugins ?? []).forEach((p, i) => {
    found.push(locate(root, `plugins[${i}]`, p));
  });
  const hits = found.filter((l): l is UntrustedLocation => l !== null);
  for (const m of trusted.providers ?? []) hits.push(...launchLocations(root, m, `providers[${m.id}]`));
  return hits;
}

/**
 * Refuse trusted configuration that lies inside the repository being evaluated (threat model
 * invariant 2): call before composing a host for `repo`.
 * @throws ThsError `ASP_THS_UNTRUSTED_LOCATION` naming every offending field and path (in
 *   `data.locations`); `ASP_THS_BAD_REQUEST` when `repo` cannot be resolved.
 * @example
 * ```ts
 * assertTrustedLocations(repo, { file: configPath, ...loadHostConfig(configPath) });
 * ```
 */
export function assertTrustedLocations(repo: string, trusted: TrustedLocations): void {
  const hits = untrustedLocations(repo, trusted);
  if (hits.length === 0) return;
  const list = hits
    .map(
      (h) =>
        `${h.field} ${h.path}${h.inside === null ? " (cannot be resolved)" : h.inside === h.path ? "" : ` (-> ${h.inside})`}`,
    )
    .join("; ");
  throw new ThsError(
    "ASP_THS_UNTRUSTED_LOCATION",
    `trusted configuration must not come from the repository being evaluated (${repo}): ${list}`,
    { data: { repository: repo, locations: hits } },
  );
}
