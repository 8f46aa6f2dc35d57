export type { CompareOptions, Operation, Ratio } from "./measure.js";
export { compare, formatRatio } from "./measure.js";
export type { Suite, SuiteContext } from "./suite.js";
