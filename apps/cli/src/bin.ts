#!/usr/bin/env node
import { interrupt } from "./interrupt.js";
import { runCli } from "./main.js";

// Ctrl-C or a CI runner's SIGTERM ends the command through process.exit, so the providers'
// process groups are killed on the way out (@asp/protocol; THREAT-MODEL invariant 12). A command
// that stops cleanly (an Auto Run: user_cancelled, committed) takes the first one (interrupt.ts).
process.on("SIGINT", () => {
  if (!interrupt()) process.exit(130);
});
process.on("SIGTERM", () => {
  if (!interrupt()) process.exit(143);
});

const code = await runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  cwd: process.env.INIT_CWD && process.env.npm_lifecycle_event === "asp" ? process.env.INIT_CWD : process.cwd(),
  env: process.env,
});
process.exitCode = code;
