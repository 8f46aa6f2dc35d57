import { PROTOCOL_VERSION } from "@asp/contracts";
import semver from "semver";

/**
 * True when `version` (e.g. `process.version`) satisfies the npm-style `range` of a manifest's
 * `engines.node`, with the `semver` package's grammar and ordering: `^0.0.3` is `>=0.0.3 <0.0.4`,
 * and a prerelease sorts before its release (`20.0.0-rc.1` does not satisfy `>=20.0.0`). As npm
 * does for `engines`, a prerelease Node (a nightly `23.0.0-nightly…`) may satisfy a range above
 * an earlier release. A version or range that does not parse is not satisfied: a plugin that
 * cannot prove compatibility is refused.
 */
export function satisfiesNodeRange(version: string, range: string): boolean {
  const v = semver.valid(version.trim(), { loose: false });
  if (v === null || semver.validRange(range) === null) return false;
  return semver.satisfies(v, range, { includePrerelease: true });
}

/** True when a provider's protocol version has the host's major version. */
export function protocolCompatible(version: string): boolean {
  return version.split(".")[0] === PROTOCOL_VERSION.split(".")[0];
}
