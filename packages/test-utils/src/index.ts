export { git } from "./git.js";
export { toThrowWithCode } from "./matchers.js";
export { writeVerifierPlugin } from "./plugins.js";
export type { ThrowawayPostgres } from "./postgres.js";
export { findPostgresBin, startPostgres } from "./postgres.js";
export { passingReviewer } from "./reviewer.js";
