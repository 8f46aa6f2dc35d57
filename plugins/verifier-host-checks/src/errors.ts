import { AspError } from "@asp/contracts";

/**
 * Codes the host-checks Reviewer throws; a throw is recorded by the Auto Run core as the attempt's
 * `provider_failed`, never as a pass.
 *
 * - `ASP_HOST_CHECKS_NOT_A_SUBJECT`: the review subject has no evidence snapshot refs.
 * - `ASP_HOST_CHECKS_NO_FILES`: the candidate has no file artifact (`artifact:<path>` blob ref).
 * - `ASP_HOST_CHECKS_INDETERMINATE`: the host's checks decided indeterminate, or denied without a
 *   gating finding to report.
 */
export type HostChecksReviewErrorCode =
  | "ASP_HOST_CHECKS_NOT_A_SUBJECT"
  | "ASP_HOST_CHECKS_NO_FILES"
  | "ASP_HOST_CHECKS_INDETERMINATE";

/** An error of the host-checks Reviewer, with a stable code. */
export class HostChecksReviewError extends AspError<HostChecksReviewErrorCode> {}
