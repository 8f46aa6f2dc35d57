import { isAspError } from "@asp/contracts";
import { Command, CommanderError } from "commander";
import { COMMANDS } from "./commands/index.js";
import { type CliContext, type CliIO, cliVersion } from "./context.js";
import { EXIT, EXIT_HELP, EXIT_OF_CODE } from "./exit-codes.js";
import { inert } from "./terminal.js";

/** Build the `asp` program. Exposed so tests and embedding hosts can run it in-process. */
export function createProgram(io: CliIO): { program: Command; exitCode: () => number } {
  let exitCode: number = EXIT.ok;
  const program = new Command("asp");
  const ctx: CliContext = {
    io,
    json: () => program.opts<{ json?: boolean }>().json === true,
    print(human, machine) {
      io.stdout(ctx.json() ? `${JSON.stringify(machine, null, 2)}\n` : `${human}\n`);
    },
    setExit(code) {
      exitCode = code;
    },
  };
  program
    .description("ASP trusted host: providers assess, the host decides")
    .version(cliVersion(), "-v, --version", "print the asp version")
    .option("--json", "print machine-readable JSON on stdout")
    .helpCommand(true)
    .showHelpAfterError("(run `asp --help` for usage)")
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
    .addHelpText(
      "after",
      `\n${EXIT_HELP}\n\nTrusted host configuration: --config, else $ASP_HOST_CONFIG, else $XDG_CONFIG_HOME/asp/host.json\n(~/.config/asp/host.json), else /etc/asp/host.json; never the current directory.`,
    )
    .exitOverride();
  for (const register of COMMANDS) register(program, ctx);
  for (const command of program.commands) command.exitOverride();
  return { program, exitCode: () => exitCode };
}

/**
 * Run `asp` with `argv` (without the node and script entries) and return the exit code:
 * 0 allow/ok, 1 deny, 2 indeterminate, 3 verification failed, 64 bad usage or input, 70 internal
 * error, 74 evidence store damaged or unwritable, 75 evidence store busy (see {@link EXIT}).
 */
export async function runCli(argv: ReadonlyArray<string>, io: CliIO): Promise<number> {
  const { program, exitCode } = createProgram(io);
  const wantsJson = argv.includes("--json");
  try {
    await program.parseAsync([...argv], { from: "user" });
    return exitCode();
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through exitOverride with exit code 0.
      if (error.exitCode === 0) return EXIT.ok;
      if (wantsJson) io.stdout(`${JSON.stringify({ error: { code: "ASP_CLI_USAGE", message: error.message } })}\n`);
      return EXIT.usage;
    }
    if (isAspError(error)) {
      if (wantsJson) io.stdout(`${JSON.stringify({ error: error.toJSON() })}\n`);
      // The message may quote untrusted text (a plugin's file names, a candidate policy's keys).
      else io.stderr(`asp: ${error.code}: ${inert(error.message)}\n`);
      return EXIT_OF_CODE[error.code] ?? (error.category === "input" ? EXIT.usage : EXIT.internal);
    }
    const message = error instanceof Error ? error.message : String(error);
    if (wantsJson) io.stdout(`${JSON.stringify({ error: { code: "ASP_CLI_INTERNAL", message } })}\n`);
    else io.stderr(`asp: internal error: ${inert(message)}\n`);
    return EXIT.internal;
  }
}
