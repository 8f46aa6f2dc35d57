import { AspError } from "@asp/contracts";

/**
 * Every code `@asp/sandbox-bubblewrap` raises. Stable public API.
 *
 * - `ASP_BWRAP_BAD_REQUEST`: the launch request is not confinable as asked: a path that is not
 *   absolute, or a read-only folder that lies inside a folder the provider must never see.
 * - `ASP_BWRAP_SECRET_FOLDER`: a folder the launch would bind is, or holds, a home folder
 *   (`$HOME`, `/root`, `/home/*`) or a credential folder inside one (`~/.ssh`, `~/.aws`...).
 *   The launch is then reported `advisory` with this code as its reason, never `isolated`.
 * - `ASP_BWRAP_RUNTIME_UNKNOWN`: the sandbox cannot tell which files the executable loads
 *   (an ELF file it cannot read, a `$LIB`-style search path, too many libraries): reported
 *   `advisory` with this code as its reason, never `isolated`.
 * - `ASP_BWRAP_BAD_OPTIONS`: the sandbox's options (its resource budget) are out of range.
 */
export type BubblewrapErrorCode =
  | "ASP_BWRAP_BAD_REQUEST"
  | "ASP_BWRAP_SECRET_FOLDER"
  | "ASP_BWRAP_RUNTIME_UNKNOWN"
  | "ASP_BWRAP_BAD_OPTIONS";

/** Thrown by `@asp/sandbox-bubblewrap` when it refuses a launch request. */
export class BubblewrapError extends AspError<BubblewrapErrorCode> {}
