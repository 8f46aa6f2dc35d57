import type { Ratio } from "./measure.js";

/** Reports progress and results of a suite. */
export interface SuiteContext {
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
