import { fileURLToPath } from "node:url";
import { mergeConfig } from "vitest/config";
import { defineAspProject } from "../../vitest.shared.js";

// The store conformance suite is test code of @asp/evidence, never shipped: reach it by alias
// (and by `paths` in tsconfig.test.json), so the published package exports nothing for it.
export default mergeConfig(defineAspProject(import.meta.url), {
  resolve: {
    alias: {
      "@asp/evidence/conformance": fileURLToPath(new URL("../evidence/test/conformance/index.ts", import.meta.url)),
    },
  },
});
