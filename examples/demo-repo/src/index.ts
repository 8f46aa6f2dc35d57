export { clamp, mean } from "./math.js";
export { summarize, type Report } from "./report.js";
