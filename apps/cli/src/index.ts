export type { PolicyProblemReport, StatusReport } from "./commands/status.js";
export type { CliContext, CliIO } from "./context.js";
export type { ExitCode } from "./exit-codes.js";
export { EXIT } from "./exit-codes.js";
export { createProgram, runCli } from "./main.js";
