/**
 * `@asp/verifier-host-checks`: a verifier plugin (a Reviewer for Auto Mode) that reviews a
 * candidate's file artifacts by running the host's own granted check providers over them (the
 * `asp.plugin.HostChecks` port: a gate evaluation over the committed base, receipted) and turns
 * the gating findings into review findings. Deterministic: the same candidate gets the same verdict.
 *
 * The plugin entry is `dist/main.js`; this module is the logic, for tests and reuse.
 *
 * @packageDocumentation
 */

export type { HostChecksReviewErrorCode } from "./errors.js";
export { HostChecksReviewError } from "./errors.js";
export { createHostChecksVerifier, hostChecksPlugin, PLUGIN_ID } from "./plugin.js";
export type { ReviewSubject } from "./review.js";
export { ARTIFACT_PREFIX, categoryOf, claimOf, filesOf, reviewWithHostChecks, SEVERITY_OF } from "./review.js";
