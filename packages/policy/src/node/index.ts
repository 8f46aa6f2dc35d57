/**
 * `@asp/policy/node`: the Node implementations of {@link PolicySource}: a trusted policy file
 * named by the composing host, and a base-branch revision read through the real `git` binary.
 * Kept apart from the main entry, which builds without Node globals.
 *
 * @packageDocumentation
 */

export type { FilePolicySourceOptions, GitPolicySourceOptions } from "./sources.js";
export { createFilePolicySource, createGitPolicySource } from "./sources.js";
