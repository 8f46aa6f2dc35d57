// The plugin entry: `node main.mjs` (bundled from dist/main.js) speaks the protocol on stdio.
// It reads content only through host/readBlob and host/readTree and writes nothing. The same
// module, started as a worker thread, is the bounded scan worker: the signed bundle is one file,
// loaded again from the host's verified, read-only copy.
import { isMainThread } from "node:worker_threads";
import { createBoundedScanner, runScanWorker } from "./bounded.js";
import { createSecretsProvider } from "./provider.js";

if (isMainThread) {
  createSecretsProvider({
    scanner: (rules) => createBoundedScanner({ workerUrl: new URL(import.meta.url), rules }),
  }).listen();
} else {
  runScanWorker();
}
