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
    // most test files spend part of their time waiting on subprocesses, git, fsync and PostgreSQL
    // (the whole CI run was 1231 s with one worker). Measured with two: 1.76 of 2 cores busy; a
    // third worker fills the waits.
    maxWorkers: 3,
  },
});
