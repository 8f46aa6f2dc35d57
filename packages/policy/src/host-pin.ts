import semver from "semver";
import { type ActivePolicy, requireActive } from "./parse.js";

/** The host that is about to decide under a policy, as it knows itself. */
export interface RunningHost {
  /** Its implementation id (`asp-ths` for the Trusted Host Service). */
  readonly name: string;
  /** Its exact semver version. */
  readonly version: string;
  /**
   * `sha256:<hex>` of its own artifact when the host can measure it, else `null`. A host
   * cannot honestly measure the code it is running (it would be reporting on itself), so the
   * Trusted Host Service passes `null`, and a policy that pins a host digest is never satisfied.
   */
  readonly digest: string | null;
}

/** Why the running host does not match a policy's `host` pin. */
export interface HostPinMismatch {
  /** The pin field that failed: `implementation`, `version` or `digest`. */
  readonly field: "implementation" | "version" | "digest";
  /** One sentence naming the pin and the running host. */
  readonly detail: string;
}

/**
 * Whether the running host may decide under `policy` (host §2 gate list: an incompatible host
 * is never allow): `null` when the policy has no `host` block or the host matches it, otherwise
 * the first field that does not match. The implementation id must be equal; the running
 * version must satisfy the `version` range (pre-releases only when the range names one); a
 * `digest` pin must equal the host's measured digest, and a host that cannot measure itself
 * (`digest: null`) never satisfies one. Pure: the caller turns a mismatch into
 * `host_incompatible` degraded coverage on every required requirement.
 *
 * @throws PolicyError `ASP_POLICY_NOT_ACTIVE`.
 * @example
 * ```ts
 * hostPinMismatch(policy, { name: "asp-ths", version: "0.1.0", digest: null });
 * // null, or { field: "version", detail: "policy host pin asp-ths@^0.2.0: this host is asp-ths 0.1.0" }
 * ```
 */
export function hostPinMismatch(policy: ActivePolicy, host: RunningHost): HostPinMismatch | null {
  const pin = requireActive(policy, "policy").document.host;
  if (pin === undefined) return null;
  const named = `policy host pin ${pin.implementation}${pin.version === undefined ? "" : `@${pin.version}`}`;
  const running = `this host is ${host.name} ${host.version}`;
  if (pin.implementation !== host.name) {
    return { field: "implementation", detail: `${named}: ${running}` };
  }
  if (pin.version !== undefined) {
    const version = semver.valid(host.version);
    // validRange is checked at parse time; a hand-built policy object still fails closed here.
    if (version === null || semver.validRange(pin.version) === null || !semver.satisfies(version, pin.version)) {
      return { field: "version", detail: `${named}: ${running}, outside the range` };
    }
  }
  if (pin.digest !== undefined && pin.digest !== host.digest) {
    return {
      field: "digest",
      detail:
        host.digest === null
          ? `${named} pins host digest ${pin.digest}: ${host.name} cannot measure its own artifact, so a host digest pin is never satisfied (remove it, or pin implementation and version)`
          : `${named} pins host digest ${pin.digest}: ${running} with digest ${host.digest}`,
    };
  }
  return null;
}
