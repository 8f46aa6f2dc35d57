export { git } from "./git.js";
export { toThrowWithCode } from "./matchers.js";
