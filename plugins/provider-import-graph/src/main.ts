import { createImportGraphProvider } from "./provider.js";

// The plugin entry: `node main.js`. Stdout carries the protocol only; it takes no options.
if (process.argv.length > 2) {
  process.stderr.write(`provider-import-graph: unknown option ${process.argv[2]} (it takes none)\n`);
  process.exit(64);
}
createImportGraphProvider().listen();
