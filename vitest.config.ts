import { defineConfig } from "vitest/config";

// One vitest process runs every workspace project, so CI prints one summary.
export default defineConfig({
  test: {
    projects: [
      "packages/*/vitest.config.ts",
      "apps/*/vitest.config.ts",
      "tools/*/vitest.config.ts",
      "plugins/*/vitest.config.ts",
      "./vitest.repo.config.ts",
    ],
    reporters: ["default", "./tools/vitest-summary-reporter.ts"],
  },
});
