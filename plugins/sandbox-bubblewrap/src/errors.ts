import { AspError } from "@asp/contracts";

/**
 * Every code `@asp/sandbox-bubblewrap` raises. Stable public API.
 *
 * - `ASP_BWRAP_BAD_REQUEST`: the launch request is not confinable as asked: a path that is not
 *   absolute, or a read-only folder that lies inside a folder the provider must never see.
 */
export type BubblewrapErrorCode = "ASP_BWRAP_BAD_REQUEST";

/** Thrown by `@asp/sandbox-bubblewrap` when it refuses a launch request. */
export class BubblewrapError extends AspError<BubblewrapErrorCode> {}
