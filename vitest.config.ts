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
    // Vitest's default is one worker fewer than the cores: a single worker on CI's 2 cores, where
    // most test files spend their time waiting on subprocesses (providers, git, npm, tsc). Two
    // workers keep both cores busy (the whole CI run was 1231 s with one).
    maxWorkers: 2,
  },
});
