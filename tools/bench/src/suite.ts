import type { Ratio } from "./measure.js";

/** Reports progress and results of a suite. */
export interface SuiteContext {
  /**
   * `full` measures the sizes the suite documents; `smoke` runs every step on a tiny input so a
   * test can prove the suite still works (its figures mean nothing).
   */
  readonly size: "full" | "smoke";
  /** Progress for people (stderr), e.g. "generating 10,000 files". */
  progress(message: string): void;
  /** Record one measured ratio. */
  report(ratio: Ratio): void;
}

/** A benchmark suite: `tools/bench/src/suites/<name>.ts` default-exports one. */
export interface Suite {
  readonly name: string;
  readonly description: string;
  run(ctx: SuiteContext): Promise<void>;
}
