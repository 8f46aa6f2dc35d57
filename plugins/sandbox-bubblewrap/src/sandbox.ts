import type { LaunchRequest, LaunchResult, Sandbox } from "@asp/contracts";
import { type BubblewrapHost, confine, type ProbeResult, realHost } from "./bwrap.js";

/**
 * The `launch` half of the sandbox port under bubblewrap. The probe runs once per `bwrap` path
 * for the life of this sandbox (one host), on the first launch.
 *
 * @example
 * ```ts
 * const sandbox = createBubblewrapSandbox();
 * const launch = await sandbox.launch({ executable: process.execPath, args: ["main.mjs"], cwd, env, readOnly: [cwd], deny: [repo] });
 * ```
 */
export function createBubblewrapSandbox(host: BubblewrapHost = realHost()): Required<Pick<Sandbox, "launch">> {
  const probes = new Map<string, ProbeResult>();
  return {
    launch: async (request: LaunchRequest): Promise<LaunchResult> => confine(request, host, probes),
  };
}
