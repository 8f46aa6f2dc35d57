import { isAspError, type Policy } from "@asp/contracts";
import { matchingGrants, pinInPolicy, pinPolicyFile, policySnippet } from "@asp/plugin-host";
import { PackError } from "./errors.js";
import type { PackResult } from "./pack.js";

/** What {@link pinPlugins} changed. */
export interface PinResult {
  readonly policy: Policy;
  readonly changed: boolean;
}

/**
 * Pin packed plugins in a trusted policy: a `plugins[]` grant (id + digest + capabilities) for
 * each; for providers also the `providers[]` pin (id + version + digest) and a gate-authority
 * grant for every requirement whose capability the provider declares and whose sources it
 * declares (call-sites as the requirement lists them). Pure: returns the new policy. The same
 * code as `asp plugin pin` (`pinInPolicy` / `policySnippet` from `@asp/plugin-host`).
 */
export function pinPolicy(policy: Policy, packs: ReadonlyArray<PackResult>): Policy {
  const sorted = [...packs].sort((a, b) => a.id.localeCompare(b.id));
  return pinInPolicy(
    policy,
    sorted.map((p) => policySnippet(p.manifest, p.digest, matchingGrants(policy, p.manifest))),
  );
}

/**
 * Read the policy at `path`, pin `packs` into it, and write it back (atomically) unless `check`
 * is set. The file and the result are validated exactly as the host validates policy.
 *
 * @throws PackError `ASP_PACK_BAD_POLICY` when the file cannot be read or is not a policy the
 *   host accepts (before or after pinning); the cause carries the host's `ASP_POLICY_*` code.
 */
export function pinPlugins(
  path: string,
  packs: ReadonlyArray<PackResult>,
  options: { check?: boolean } = {},
): PinResult {
  try {
    const r = pinPolicyFile(path, (policy) => pinPolicy(policy, packs), { write: options.check !== true });
    return { policy: r.policy, changed: r.changed };
  } catch (error) {
    const code = isAspError(error) ? error.code : "error";
    throw new PackError("ASP_PACK_BAD_POLICY", `${path} cannot be pinned: ${code}: ${(error as Error).message}`, {
      cause: error,
      data: { path, cause: code },
      next: `fix ${path} until \`asp policy validate ${path}\` accepts it, then pin again`,
    });
  }
}
