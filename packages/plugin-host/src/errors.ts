import { AspError, type AspErrorOptions } from "@asp/contracts";

/**
 * Every code `@asp/plugin-host` raises. A refused plugin carries one of these in its
 * {@link RefusedPlugin} record; tests and hosts switch on them, never on message text.
 *
 * - `ASP_PLUGIN_NOT_FOUND`: the plugin folder does not exist or has no `asp-plugin.json`.
 * - `ASP_PLUGIN_BAD_MANIFEST`: `asp-plugin.json` is not JSON, fails the contracts schema, names a
 *   missing entry, disagrees with the signed id/version, or pairs the capability `engine` with
 *   another kind or capability (an engine declares exactly `["engine"]`).
 * - `ASP_PLUGIN_UNSIGNED`: there is no `asp-plugin.sig`.
 * - `ASP_PLUGIN_BAD_SIGNATURE`: the signature file is malformed or the ed25519 signature does not verify.
 * - `ASP_PLUGIN_UNTRUSTED_KEY`: the signing key is not among the host's trust roots.
 * - `ASP_PLUGIN_KEY_EXPIRED`: the signing key's trust root has expired.
 * - `ASP_PLUGIN_REVOKED`: the signing key or the plugin digest is on a revocation list.
 * - `ASP_PLUGIN_DIGEST_MISMATCH`: the folder's tree digest differs from the signed one (a file
 *   changed, was added or removed after signing).
 * - `ASP_PLUGIN_SYMLINK_ESCAPE`: a symbolic link in the plugin points outside its folder.
 * - `ASP_PLUGIN_SYMLINK`: the plugin folder holds a symbolic link (the loader accepts regular
 *   files and folders only: a link would be followed when the plugin runs).
 * - `ASP_PLUGIN_SPECIAL_FILE`: the plugin folder holds a fifo, socket or device.
 * - `ASP_PLUGIN_CACHE_MISMATCH`: the host's cached copy of a verified plugin does not hash to
 *   the verified digest after it was written (the cache was written to by someone else).
 * - `ASP_PLUGIN_ENTRY_ESCAPE`: the manifest's `entry` resolves outside the plugin folder.
 * - `ASP_PLUGIN_NOT_GRANTED`: trusted policy has no `plugins[]` grant for this id and digest.
 * - `ASP_PLUGIN_CAPABILITY_NOT_GRANTED`: the grant does not cover every declared capability.
 * - `ASP_PLUGIN_INCOMPATIBLE`: protocol version or `engines.node` excludes this host.
 * - `ASP_PLUGIN_DUPLICATE`: two loaded folders declare the same plugin id.
 * - `ASP_PLUGIN_LOAD_FAILED`: an in-process plugin's entry did not import, or did not export
 *   the branded declaration of its kind, or its `register` / `init` failed.
 * - `ASP_PLUGIN_BAD_OPTIONS`: the options from trusted configuration fail the plugin's `optionsSchema`.
 * - `ASP_PLUGIN_BAD_KEY`: a key file is malformed (wrong type, length or encoding).
 * - `ASP_PLUGIN_BAD_TRUST_ROOT`: a trust-root file is unreadable or malformed.
 * - `ASP_PLUGIN_IO`: a file could not be read or written (category `internal`).
 * - `ASP_PLUGIN_FORBIDDEN_PORT`: an in-process plugin depends on something that is not a port
 *   of its kind (see `PLUGIN_PORT_KEYS`): host internals are never resolvable by a plugin.
 * - `ASP_PLUGIN_PORT_UNAVAILABLE`: a verifier depends on an optional port of its kind
 *   (`asp.plugin.HostChecks`) that the composing host does not supply; raised at init, nothing ran.
 * - `ASP_PLUGIN_BAD_OUTPUT`: a verifier's or sandbox's answer fails its contracts schema, a
 *   sandbox reports a guarantee its grant cannot back, or an engine's `run` yields a step that is
 *   not an `EnginePortStep` (or returns no iterator).
 * - `ASP_PLUGIN_UNKNOWN_REQUIREMENT`: pinning a plugin in a policy names a requirement the policy
 *   does not define (`data.requirement`); pinning never creates requirements.
 * - `ASP_PLUGIN_BAD_POLICY`: the policy given to the loader is neither a policy document nor the
 *   `ActivePolicy` that `parsePolicy` returns.
 * - `ASP_PLUGIN_NOT_A_PROVIDER`: a provider pin or gate-authority grant was asked for a verifier or sandbox.
 * - `ASP_PLUGIN_OUT_OF_PROCESS`: a verifier loaded to run out of process (`verifierIsolation:
 *   "subprocess"`) was asked to run in this one (`registerPlugins`); launch it with `launchVerifier`.
 * - `ASP_PLUGIN_VERIFIER_UNSANDBOXED`: `launchVerifier` was given no sandbox that implements
 *   `launch`, or the sandbox refused or could not confine the child (it would write the worktree):
 *   the verifier is never run unconfined.
 * - `ASP_PLUGIN_VERIFIER_FAILED`: an out-of-process verifier could not start, died, timed out, broke
 *   its stream, or its own `init` / `verify` threw (`data.kind` says which); the attempt is recorded.
 */
export type PluginErrorCode =
  | "ASP_PLUGIN_NOT_FOUND"
  | "ASP_PLUGIN_BAD_MANIFEST"
  | "ASP_PLUGIN_UNSIGNED"
  | "ASP_PLUGIN_BAD_SIGNATURE"
  | "ASP_PLUGIN_UNTRUSTED_KEY"
  | "ASP_PLUGIN_KEY_EXPIRED"
  | "ASP_PLUGIN_REVOKED"
  | "ASP_PLUGIN_DIGEST_MISMATCH"
  | "ASP_PLUGIN_SYMLINK_ESCAPE"
  | "ASP_PLUGIN_SYMLINK"
  | "ASP_PLUGIN_SPECIAL_FILE"
  | "ASP_PLUGIN_CACHE_MISMATCH"
  | "ASP_PLUGIN_ENTRY_ESCAPE"
  | "ASP_PLUGIN_NOT_GRANTED"
  | "ASP_PLUGIN_CAPABILITY_NOT_GRANTED"
  | "ASP_PLUGIN_INCOMPATIBLE"
  | "ASP_PLUGIN_DUPLICATE"
  | "ASP_PLUGIN_LOAD_FAILED"
  | "ASP_PLUGIN_BAD_OPTIONS"
  | "ASP_PLUGIN_BAD_KEY"
  | "ASP_PLUGIN_BAD_TRUST_ROOT"
  | "ASP_PLUGIN_IO"
  | "ASP_PLUGIN_FORBIDDEN_PORT"
  | "ASP_PLUGIN_PORT_UNAVAILABLE"
  | "ASP_PLUGIN_BAD_OUTPUT"
  | "ASP_PLUGIN_UNKNOWN_REQUIREMENT"
  | "ASP_PLUGIN_BAD_POLICY"
  | "ASP_PLUGIN_NOT_A_PROVIDER"
  | "ASP_PLUGIN_OUT_OF_PROCESS"
  | "ASP_PLUGIN_VERIFIER_UNSANDBOXED"
  | "ASP_PLUGIN_VERIFIER_FAILED";

/** Every {@link PluginErrorCode}. */
export const PLUGIN_ERROR_CODES: readonly PluginErrorCode[] = Object.freeze([
  "ASP_PLUGIN_NOT_FOUND",
  "ASP_PLUGIN_BAD_MANIFEST",
  "ASP_PLUGIN_UNSIGNED",
  "ASP_PLUGIN_BAD_SIGNATURE",
  "ASP_PLUGIN_UNTRUSTED_KEY",
  "ASP_PLUGIN_KEY_EXPIRED",
  "ASP_PLUGIN_REVOKED",
  "ASP_PLUGIN_DIGEST_MISMATCH",
  "ASP_PLUGIN_SYMLINK_ESCAPE",
  "ASP_PLUGIN_SYMLINK",
  "ASP_PLUGIN_SPECIAL_FILE",
  "ASP_PLUGIN_CACHE_MISMATCH",
  "ASP_PLUGIN_ENTRY_ESCAPE",
  "ASP_PLUGIN_NOT_GRANTED",
  "ASP_PLUGIN_CAPABILITY_NOT_GRANTED",
  "ASP_PLUGIN_INCOMPATIBLE",
  "ASP_PLUGIN_DUPLICATE",
  "ASP_PLUGIN_LOAD_FAILED",
  "ASP_PLUGIN_BAD_OPTIONS",
  "ASP_PLUGIN_BAD_KEY",
  "ASP_PLUGIN_BAD_TRUST_ROOT",
  "ASP_PLUGIN_IO",
  "ASP_PLUGIN_FORBIDDEN_PORT",
  "ASP_PLUGIN_PORT_UNAVAILABLE",
  "ASP_PLUGIN_BAD_OUTPUT",
  "ASP_PLUGIN_UNKNOWN_REQUIREMENT",
  "ASP_PLUGIN_BAD_POLICY",
  "ASP_PLUGIN_NOT_A_PROVIDER",
  "ASP_PLUGIN_OUT_OF_PROCESS",
  "ASP_PLUGIN_VERIFIER_UNSANDBOXED",
  "ASP_PLUGIN_VERIFIER_FAILED",
]);

/** Thrown by `@asp/plugin-host`; a refusal's code says exactly which check failed. */
export class PluginError extends AspError<PluginErrorCode> {
  constructor(code: PluginErrorCode, message: string, options: AspErrorOptions = {}) {
    super(code, message, { category: code === "ASP_PLUGIN_IO" ? "internal" : "input", ...options });
  }
}

/** The error's code when it is a filesystem error. */
export function errnoOf(error: unknown): string {
  return (error as NodeJS.ErrnoException)?.code ?? "error";
}

/**
 * The codes that mean "this plugin is refused" (a verdict on the plugin: signature, digest,
 * trust, grant, compatibility), as opposed to bad input or an I/O failure of the caller.
 */
export const PLUGIN_REFUSAL_CODES: ReadonlySet<PluginErrorCode> = new Set<PluginErrorCode>([
  "ASP_PLUGIN_BAD_MANIFEST",
  "ASP_PLUGIN_UNSIGNED",
  "ASP_PLUGIN_BAD_SIGNATURE",
  "ASP_PLUGIN_UNTRUSTED_KEY",
  "ASP_PLUGIN_KEY_EXPIRED",
  "ASP_PLUGIN_REVOKED",
  "ASP_PLUGIN_DIGEST_MISMATCH",
  "ASP_PLUGIN_SYMLINK_ESCAPE",
  "ASP_PLUGIN_SYMLINK",
  "ASP_PLUGIN_SPECIAL_FILE",
  "ASP_PLUGIN_ENTRY_ESCAPE",
  "ASP_PLUGIN_NOT_GRANTED",
  "ASP_PLUGIN_CAPABILITY_NOT_GRANTED",
  "ASP_PLUGIN_INCOMPATIBLE",
  "ASP_PLUGIN_FORBIDDEN_PORT",
]);
