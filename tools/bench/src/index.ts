export type { CompareOptions, Operation, Ratio } from "./measure.js";
export { compare, formatRatio } from "./measure.js";
export type { BenchResults, SuiteResult } from "./results.js";
export { headline, mergeResults, readResults, resultsTable, suiteResult } from "./results.js";
export type { Suite, SuiteContext } from "./suite.js";
