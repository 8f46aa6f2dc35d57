import { AspError } from "@asp/contracts";

/**
 * Error codes the CLI itself raises.
 *
 * - `ASP_CLI_USAGE`: bad usage (a missing or malformed option).
 * - `ASP_CLI_BAD_INPUT`: a file or folder named on the command line is unreadable or invalid.
 * - `ASP_CLI_NO_HOST_CONFIG`: no trusted host configuration at `--config`, `ASP_HOST_CONFIG`,
 *   `$XDG_CONFIG_HOME/asp/host.json` (or `~/.config/asp/host.json`), `/etc/asp/host.json`;
 *   `data.searched` lists every place looked at.
 * - `ASP_CLI_BAD_PLUGIN_NAME`: `asp plugin new NAME` with a name that is not a plugin id / package name.
 * - `ASP_CLI_UNKNOWN_KIND`: `asp plugin new --kind` outside `provider`, `verifier`, `sandbox`.
 * - `ASP_CLI_PLUGIN_THREW`: `asp plugin check`: the plugin's port threw without an `ASP_*` code.
 * - `ASP_CLI_PLUGIN_TIMEOUT`: `asp plugin check`: the plugin's port did not answer within `--timeout`.
 * - `ASP_CLI_PLUGIN_NO_PORT_METHOD`: `asp plugin check`: the plugin implements no port method its
 *   granted capabilities allow (a verifier without `verify`, a sandbox without `launch`, `stage`, `recover`).
 * - `ASP_CLI_DIR_NOT_EMPTY`: `asp plugin new` would write into a folder that exists and is not empty.
 * - `ASP_CLI_QUEUE_BAD_REPOS_FILE`: `asp sweep --queue FILE`: a line is not an absolute path of a
 *   git repository with a commit, or is there twice; `data.problems` names every bad line; nothing
 *   was enqueued.
 * - `ASP_CLI_QUEUE_NO_DATABASE`: the host configuration names no queue database (its `store` is not a
 *   `postgres://` URL and it has no `queue` field).
 * - `ASP_CLI_QUEUE_NOT_MIGRATED`: the queue's schema or the sweep queue is not installed, or needs a
 *   migration: run `asp worker --migrate` (never done silently).
 * - `ASP_CLI_QUEUE_UNAVAILABLE`: the queue's database could not be reached or answered with an error.
 * - `ASP_CLI_QUEUE_BAD_JOB`: a job's data is not what `asp sweep --queue` enqueues (its key does not
 *   match its repository and commit).
 * - `ASP_CLI_QUEUE_STALE_JOB`: the repository's HEAD is no longer the commit the job was enqueued for.
 * - `ASP_CLI_QUEUE_DUPLICATE_RECEIPT`: the fact log already holds a receipt for this job: nothing appended.
 * - `ASP_CLI_INTERNAL`: a bug in `asp`.
 */
export type CliErrorCode =
  | "ASP_CLI_USAGE"
  | "ASP_CLI_BAD_INPUT"
  | "ASP_CLI_NO_HOST_CONFIG"
  | "ASP_CLI_BAD_PLUGIN_NAME"
  | "ASP_CLI_UNKNOWN_KIND"
  | "ASP_CLI_PLUGIN_THREW"
  | "ASP_CLI_PLUGIN_TIMEOUT"
  | "ASP_CLI_PLUGIN_NO_PORT_METHOD"
  | "ASP_CLI_DIR_NOT_EMPTY"
  | "ASP_CLI_QUEUE_BAD_REPOS_FILE"
  | "ASP_CLI_QUEUE_NO_DATABASE"
  | "ASP_CLI_QUEUE_NOT_MIGRATED"
  | "ASP_CLI_QUEUE_UNAVAILABLE"
  | "ASP_CLI_QUEUE_BAD_JOB"
  | "ASP_CLI_QUEUE_STALE_JOB"
  | "ASP_CLI_QUEUE_DUPLICATE_RECEIPT"
  | "ASP_CLI_INTERNAL";

/** Bad usage or unreadable input given on the command line (exit 64). */
export class UsageError extends AspError<CliErrorCode> {}
