// Regenerates schemas/*.schema.json from the TypeBox definitions in src/ (run after `pnpm build`).
// The drift test (test/schemas.test.ts) fails whenever the committed files differ.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { SCHEMA_NAMES, schemaDocument } from "../dist/index.js";

const dir = new URL("../schemas/", import.meta.url);
mkdirSync(dir, { recursive: true });
for (const file of readdirSync(dir)) if (file.endsWith(".schema.json")) rmSync(new URL(file, dir));
for (const name of SCHEMA_NAMES) {
  writeFileSync(new URL(`${name}.schema.json`, dir), `${JSON.stringify(schemaDocument(name), null, 2)}\n`);
}
console.log(`wrote ${SCHEMA_NAMES.length} schemas to ${dir.pathname}`);
