import type { LaunchRequest, LaunchResult, Sandbox } from "@asp/contracts";
import { type BubblewrapHost, confine, type ProbeResult, realHost } from "./bwrap.js";
import { limitsOf } from "./limits.js";

/**
 * The `launch` half of the sandbox port under bubblewrap. The probe runs once per `bwrap` path
 * for the life of this sandbox (one host), on the first launch. `options` are the plugin's
 * options from trusted configuration (`{ limits }`, see `OPTIONS_SCHEMA`): the resource budget
 * of every launch.
 *
 * @throws BubblewrapError `ASP_BWRAP_BAD_OPTIONS` when `options` are out of range.
 * @example
 * ```ts
 * const sandbox = createBubblewrapSandbox(realHost(), { limits: { tmpBytes: 16 * 1024 * 1024 } });
 * const launch = await sandbox.launch({ executable: process.execPath, args: ["main.mjs"], cwd, env, readOnly: [cwd], deny: [repo] });
 * ```
 */
export function createBubblewrapSandbox(
  host: BubblewrapHost = realHost(),
  options: unknown = {},
): Required<Pick<Sandbox, "launch">> {
  const limits = limitsOf(options);
  const probes = new Map<string, ProbeResult>();
  return {
    launch: async (request: LaunchRequest): Promise<LaunchResult> => confine(request, host, probes, limits),
  };
}
