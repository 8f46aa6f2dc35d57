import { isAspError } from "@asp/contracts";
import { createTypeScriptProvider, parseProviderArgs } from "./provider.js";

// The plugin entry: `node main.js [--project tsconfig.json] [--scope affected]`. Stdout carries
// the protocol only; a bad command line is one line on stderr and exit 64.
try {
  createTypeScriptProvider(parseProviderArgs(process.argv.slice(2))).listen();
} catch (error) {
  process.stderr.write(`provider-typescript: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(isAspError(error) && error.category === "input" ? 64 : 70);
}
