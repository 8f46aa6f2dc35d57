// The plugin entry: `node main.mjs` (bundled from dist/main.js) speaks the protocol on stdio.
// It reads content only through host/readBlob and host/readTree and writes nothing.
import { createSecretsProvider } from "./provider.js";

createSecretsProvider().listen();
