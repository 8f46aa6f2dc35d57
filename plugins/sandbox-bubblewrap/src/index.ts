/**
 * `@asp/sandbox-bubblewrap`: a sandbox plugin that launches each provider under bubblewrap
 * (`bwrap`): new user, pid, ipc, network and uts namespaces, the system runtime, exactly the
 * files the executable loads from elsewhere and the provider's verified copy bound read-only,
 * its own bounded tmpfs, a process and memory budget, no home folder, no worktree and no store.
 * When `bwrap` is missing or cannot create namespaces, or a launch cannot be confined without
 * showing a home folder, it returns the launch unchanged as `advisory` with direct write and
 * the exact reason: never `isolated`.
 *
 * The plugin entry is `dist/main.js`; this module is the logic, for tests and reuse.
 *
 * @packageDocumentation
 */

export type { BubblewrapHost, LaunchLayout, ProbeResult } from "./bwrap.js";
export {
  bwrapArgs,
  confine,
  DEFAULT_BWRAP,
  DEFAULT_PRLIMIT,
  defaultLayout,
  findBwrap,
  findExecutable,
  isWithin,
  mechanismOf,
  NAMESPACE_FLAGS,
  probeBwrap,
  RUNTIME_FILES,
  RUNTIME_FOLDERS,
  realHost,
  wrappedArgv,
} from "./bwrap.js";
export type { ElfLinks } from "./elf.js";
export { readElfLinks } from "./elf.js";
export type { BubblewrapErrorCode } from "./errors.js";
export { BubblewrapError } from "./errors.js";
export type { BubblewrapLimits, BubblewrapOptions } from "./limits.js";
export { DEFAULT_LIMITS, limitsOf, OPTIONS_SCHEMA } from "./limits.js";
export { PLUGIN_ID, sandboxBubblewrap } from "./plugin.js";
export type { FileBind } from "./runtime.js";
export { runtimeFiles } from "./runtime.js";
export { createBubblewrapSandbox } from "./sandbox.js";
export { machineHomes, SECRET_ENTRIES, secretExposure } from "./secrets.js";
