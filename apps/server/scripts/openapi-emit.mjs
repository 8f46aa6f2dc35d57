// Write apps/server/openapi.json from the built package: the OpenAPI document the server serves
// at GET /api/v1/openapi.json, generated from the schemas it validates with. Run after a build:
//   pnpm --filter @asp/server run openapi:emit
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { openApiDocument } from "../dist/index.js";

const out = fileURLToPath(new URL("../openapi.json", import.meta.url));
writeFileSync(out, `${JSON.stringify(openApiDocument(), null, 2)}\n`);
console.log(`wrote ${out}`);
