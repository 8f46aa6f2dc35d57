export { toThrowWithCode } from "./matchers.js";
