import { AspError } from "@asp/contracts";

/** Error codes the CLI itself raises. */
export type CliErrorCode = "ASP_CLI_USAGE" | "ASP_CLI_BAD_INPUT" | "ASP_CLI_INTERNAL";

/** Bad usage or unreadable input given on the command line (exit 64). */
export class UsageError extends AspError<CliErrorCode> {}
