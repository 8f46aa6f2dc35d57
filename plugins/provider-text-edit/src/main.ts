// The plugin entry: `node main.mjs` (bundled from dist/main.js) speaks the protocol on stdio.
// It reads the baseline only through host/readTree and host/readBlob, and writes nothing.
import { createTextEditProvider } from "./provider.js";

createTextEditProvider().listen();
