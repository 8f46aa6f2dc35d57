import { AspError, type AspErrorOptions } from "@asp/contracts";

/**
 * Error codes of the plugin packer. Every one comes with a next step: `data.next` says what to
 * do about it, and the message ends with it (`…; next: <what to do>`).
 *
 * - `ASP_PACK_USAGE`: bad command line (unknown option, missing `--key` or `--policy`).
 * - `ASP_PACK_BAD_PACKAGE`: the folder has no readable `package.json`, or its `aspPlugin` is malformed.
 * - `ASP_PACK_NO_MANIFEST`: no `asp-plugin.json` at the package root, under `plugin/`, or at `aspPlugin.manifest`.
 * - `ASP_PACK_BAD_MANIFEST`: the manifest is not JSON or fails the `plugin-manifest` schema.
 * - `ASP_PACK_NO_ENTRY`: the entry to bundle does not exist (the package is not built).
 * - `ASP_PACK_BUNDLE_FAILED`: esbuild could not bundle the entry.
 * - `ASP_PACK_EXTERNAL_IMPORT`: the bundle would import something other than a `node:` builtin.
 * - `ASP_PACK_UNSTABLE_PATH`: a bundled file cannot be named independently of where the package
 *   sits on disk, so the bundle (and its digest) would depend on the checkout's location.
 * - `ASP_PACK_NO_ASSET`: a declared asset's package cannot be resolved, or its pattern matches no file.
 * - `ASP_PACK_BAD_KEY`: the signing key is missing or is not a key written by `asp plugin keygen`.
 * - `ASP_PACK_BAD_POLICY`: the policy file to pin into cannot be read or is not a policy the host accepts.
 */
export type PackErrorCode =
  | "ASP_PACK_USAGE"
  | "ASP_PACK_BAD_PACKAGE"
  | "ASP_PACK_NO_MANIFEST"
  | "ASP_PACK_BAD_MANIFEST"
  | "ASP_PACK_NO_ENTRY"
  | "ASP_PACK_BUNDLE_FAILED"
  | "ASP_PACK_EXTERNAL_IMPORT"
  | "ASP_PACK_UNSTABLE_PATH"
  | "ASP_PACK_NO_ASSET"
  | "ASP_PACK_BAD_KEY"
  | "ASP_PACK_BAD_POLICY";

/** Every {@link PackErrorCode}. */
export const PACK_ERROR_CODES: readonly PackErrorCode[] = Object.freeze([
  "ASP_PACK_USAGE",
  "ASP_PACK_BAD_PACKAGE",
  "ASP_PACK_NO_MANIFEST",
  "ASP_PACK_BAD_MANIFEST",
  "ASP_PACK_NO_ENTRY",
  "ASP_PACK_BUNDLE_FAILED",
  "ASP_PACK_EXTERNAL_IMPORT",
  "ASP_PACK_UNSTABLE_PATH",
  "ASP_PACK_NO_ASSET",
  "ASP_PACK_BAD_KEY",
  "ASP_PACK_BAD_POLICY",
]);

/** Options of a {@link PackError}: `next` is the step that fixes it. */
export interface PackErrorOptions extends AspErrorOptions {
  /** What the user should do next, e.g. `build the package first (pnpm build)`. */
  readonly next: string;
}

/**
 * A plugin package that cannot be packed, or a policy that cannot be pinned. The message names
 * what is wrong and ends with the next step (`; next: …`), which is also `data.next`.
 */
export class PackError extends AspError<PackErrorCode> {
  constructor(code: PackErrorCode, message: string, options: PackErrorOptions) {
    const { next, data, ...rest } = options;
    super(code, `${message}; next: ${next}`, { ...rest, data: { ...data, next } });
  }
}
