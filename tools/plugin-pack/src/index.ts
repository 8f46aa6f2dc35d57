/**
 * `@asp/plugin-pack`: turn a provider plugin package into a self-contained, signed plugin
 * folder (`dist/plugin/`), and pin it in a trusted policy.
 *
 * @packageDocumentation
 */
export type { PackErrorCode, PackErrorOptions } from "./errors.js";
export { PACK_ERROR_CODES, PackError } from "./errors.js";
export type { PackConfig, PackResult } from "./pack.js";
export { PACKED_DIR, packPlugin } from "./pack.js";
export type { PinResult } from "./pin.js";
export { pinPlugins, pinPolicy } from "./pin.js";
