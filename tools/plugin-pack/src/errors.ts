import { AspError } from "@asp/contracts";

/** Error codes of the plugin packer. */
export type PackErrorCode =
  | "ASP_PACK_BAD_PACKAGE"
  | "ASP_PACK_BUNDLE_FAILED"
  | "ASP_PACK_EXTERNAL_IMPORT"
  | "ASP_PACK_BAD_POLICY";

/** A plugin package that cannot be packed, or a policy that cannot be pinned. */
export class PackError extends AspError<PackErrorCode> {}
