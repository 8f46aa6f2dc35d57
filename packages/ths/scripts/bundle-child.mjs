// Bundle the verifier child entry (src/verifier-child/verifier-child.ts) with its connection into
// dist/verifier-child-bundle/main.mjs: one self-contained file, the only thing of this package a
// sandboxed verifier process needs to see (ADR 0011).
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outfile = join(root, "dist", "verifier-child-bundle", "main.mjs");
mkdirSync(dirname(outfile), { recursive: true });
await build({
  entryPoints: [join(root, "src", "verifier-child", "verifier-child.ts")],
  outfile,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  legalComments: "none",
  logLevel: "warning",
  // vscode-jsonrpc is CommonJS: give the ESM bundle a require for its node builtins.
  banner: {
    js: 'import { createRequire as __aspCreateRequire } from "node:module"; const require = __aspCreateRequire(import.meta.url);',
  },
});
