import { writeFileSync } from "node:fs";
import type { Reporter, TestModule } from "vitest/node";

/**
 * Prints one closing line, `N passed, N failed, N skipped`, after vitest's own summary, so CI
 * and people read the same plain count whatever the reporter above it prints. With
 * `ASP_SUMMARY_FILE` set, the three counts are also written there (`.ci/run` reads them).
 */
export default class SummaryLineReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      // A module that failed to load has no tests but is a failure all the same.
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) failed += 1;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed += 1;
        else if (state === "failed") failed += 1;
        else skipped += 1;
      }
    }
    failed += unhandledErrors.length;
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
    // .ci/run adds the self-gate to these counts and prints the closing line after it.
    const file = process.env.ASP_SUMMARY_FILE;
    if (file) writeFileSync(file, `${passed} ${failed} ${skipped}\n`);
  }
}
