/**
 * `@asp/sandbox-bubblewrap`: a sandbox plugin that launches each provider under bubblewrap
 * (`bwrap`): new user, pid, ipc, network and uts namespaces, the runtime and the provider's
 * verified copy bound read-only, its own tmpfs, no worktree and no store path at all. When
 * `bwrap` is missing or cannot create namespaces it returns the launch unchanged as `advisory`
 * with direct write and the exact reason: never `isolated`.
 *
 * The plugin entry is `dist/main.js`; this module is the logic, for tests and reuse.
 *
 * @packageDocumentation
 */

export type { BubblewrapHost, ProbeResult } from "./bwrap.js";
export {
  bwrapArgs,
  confine,
  DEFAULT_BWRAP,
  findBwrap,
  installPrefix,
  isWithin,
  mechanismOf,
  NAMESPACE_FLAGS,
  probeBwrap,
  RUNTIME_FILES,
  RUNTIME_FOLDERS,
  realHost,
} from "./bwrap.js";
export type { BubblewrapErrorCode } from "./errors.js";
export { BubblewrapError } from "./errors.js";
export { PLUGIN_ID, sandboxBubblewrap } from "./plugin.js";
export { createBubblewrapSandbox } from "./sandbox.js";
