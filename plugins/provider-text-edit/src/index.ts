/**
 * `@asp/provider-text-edit`: an edit provider that answers `edit/propose` with structured
 * EditPlans — exact replace, multi-replace, regex search-replace, create, rename, delete — each
 * bound to the baseline with per-file preconditions. It never writes: the host applies (host §6).
 *
 * The plugin entry is `dist/main.js`; this module is the pure logic, for tests and reuse.
 *
 * @packageDocumentation
 */

export type { BaselineCallbacks, BaselineReader, BaselineTreeEntry, PathState } from "./baseline.js";
export { createBaselineReader } from "./baseline.js";
export type { TextEditErrorCode } from "./errors.js";
export { TextEditError } from "./errors.js";
export type { EditIntent, EditOperation, IntentKind } from "./intent.js";
export { INTENT_KINDS, MAX_CONTENT, MAX_OPERATIONS, parseIntent, parseOperation } from "./intent.js";
export { checkPath } from "./paths.js";
export type { PlannedEdit, PlanOptions, Precondition } from "./plan.js";
export { planEdit } from "./plan.js";
export type { TextEditProviderOptions } from "./provider.js";
export { createTextEditProvider, PROVIDER, proposeEdit } from "./provider.js";
export type { RegexBudget, RegexOutcome } from "./regex.js";
export { compileRegex, runSearchReplace } from "./regex.js";
