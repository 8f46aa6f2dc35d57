import { isAspError } from "@asp/contracts";
import { createImportGraphProvider, parseProviderArgs } from "./provider.js";

// The plugin entry: `node main.js [--check]`. Stdout carries the protocol only; a bad command
// line is one line on stderr and exit 64.
try {
  createImportGraphProvider(parseProviderArgs(process.argv.slice(2))).listen();
} catch (error) {
  process.stderr.write(`provider-import-graph: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(isAspError(error) && error.category === "input" ? 64 : 70);
}
