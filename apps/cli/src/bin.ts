#!/usr/bin/env node
import { runCli } from "./main.js";

const code = await runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  cwd: process.env.INIT_CWD && process.env.npm_lifecycle_event === "asp" ? process.env.INIT_CWD : process.cwd(),
  env: process.env,
});
process.exitCode = code;
