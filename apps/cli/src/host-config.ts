import { existsSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import type { CliContext } from "./context.js";
import { UsageError } from "./errors.js";

/** The system-wide host configuration, the last place `asp` looks. */
export const SYSTEM_HOST_CONFIG = "/etc/asp/host.json";

/** Where a host configuration path came from. */
export type HostConfigSource = "--config" | "ASP_HOST_CONFIG" | "XDG_CONFIG_HOME" | "HOME" | "system";

/** One place `asp` looks for the trusted host configuration. */
export interface HostConfigLocation {
  readonly source: HostConfigSource;
  /** Absolute path. */
  readonly path: string;
  /** Named explicitly (`--config`, `ASP_HOST_CONFIG`): when it is missing, `asp` looks nowhere else. */
  readonly explicit: boolean;
}

/**
 * Where `asp` looks for the trusted host configuration, in order: `--config PATH`, else
 * `$ASP_HOST_CONFIG`, else `$XDG_CONFIG_HOME/asp/host.json` (`$HOME/.config/asp/host.json` when
 * `XDG_CONFIG_HOME` is unset), then `/etc/asp/host.json`. Never the current directory: the
 * candidate repository is usually the current directory, and it must not configure its own host.
 * An explicit choice is the only place looked at; a relative `XDG_CONFIG_HOME` or `HOME` is
 * ignored (XDG Base Directory rule).
 */
export function hostConfigLocations(
  flag: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): HostConfigLocation[] {
  if (flag !== undefined) return [{ source: "--config", path: resolve(cwd, flag), explicit: true }];
  const fromEnv = env.ASP_HOST_CONFIG;
  if (fromEnv !== undefined && fromEnv !== "") {
    return [{ source: "ASP_HOST_CONFIG", path: resolve(cwd, fromEnv), explicit: true }];
  }
  const found: HostConfigLocation[] = [];
  const xdg = env.XDG_CONFIG_HOME;
  const home = env.HOME;
  if (xdg !== undefined && xdg !== "") {
    if (isAbsolute(xdg))
      found.push({ source: "XDG_CONFIG_HOME", path: join(xdg, "asp", "host.json"), explicit: false });
  } else if (home !== undefined && isAbsolute(home)) {
    found.push({ source: "HOME", path: join(home, ".config", "asp", "host.json"), explicit: false });
  }
  found.push({ source: "system", path: SYSTEM_HOST_CONFIG, explicit: false });
  return found;
}

/**
 * The first host configuration that exists, or `null` when there is none at an implicit
 * location (`asp status` then runs without one).
 * @throws UsageError `ASP_CLI_NO_HOST_CONFIG` when `--config` or `ASP_HOST_CONFIG` names a
 *   missing file.
 */
export function findHostConfig(
  ctx: CliContext,
  flag: string | undefined,
  exists: (path: string) => boolean = existsSync,
): HostConfigLocation | null {
  const locations = hostConfigLocations(flag, ctx.io.env, ctx.io.cwd);
  const hit = locations.find((l) => exists(l.path));
  if (hit !== undefined) return hit;
  if (locations.some((l) => l.explicit)) throw noHostConfig(locations);
  return null;
}

/**
 * The trusted host configuration `asp gate|check|sweep|receipts` use.
 * @throws UsageError `ASP_CLI_NO_HOST_CONFIG` naming every place looked at (`data.searched`).
 */
export function requireHostConfig(
  ctx: CliContext,
  flag: string | undefined,
  exists: (path: string) => boolean = existsSync,
): HostConfigLocation {
  const hit = findHostConfig(ctx, flag, exists);
  if (hit !== null) return hit;
  throw noHostConfig(hostConfigLocations(flag, ctx.io.env, ctx.io.cwd));
}

function noHostConfig(searched: readonly HostConfigLocation[]): UsageError {
  const list = searched.map((l) => `${l.path} (${l.source})`).join(", ");
  return new UsageError(
    "ASP_CLI_NO_HOST_CONFIG",
    `no trusted host configuration: looked at ${list}; pass --config PATH or set ASP_HOST_CONFIG (docs/host-configuration.md). The current directory is never read: it is usually the repository being evaluated`,
    { data: { searched: searched.map((l) => ({ source: l.source, path: l.path })) } },
  );
}
