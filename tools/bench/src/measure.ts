import { performance } from "node:perf_hooks";

/** One timed operation; may be async. */
export type Operation = () => unknown;

/** Options of {@link compare}. */
export interface CompareOptions {
  /** What is measured, e.g. "ajv validate 10 KB Assessment". */
  readonly name: string;
  /** What the ratio is against, e.g. "JSON.parse of the same bytes". */
  readonly baselineName: string;
  readonly baseline: Operation;
  readonly subject: Operation;
  /** Invocations of each operation per round (amortizes timer resolution). Default 1. */
  readonly iterations?: number;
  /** Rounds; baseline and subject alternate each round so machine noise hits both. Default 15. */
  readonly rounds?: number;
  /** Untimed rounds first (JIT, caches). Default 2. */
  readonly warmup?: number;
  /** The ratio the issue sets as a target (subject / baseline), when there is one. */
  readonly target?: number;
  /** Runs before each timed call of either side, untimed (e.g. resetting state). */
  readonly before?: () => unknown;
  /** Mark the result as the suite's headline figure (see {@link Ratio.headline}). */
  readonly headline?: boolean;
  /** Passed through to {@link Ratio.details}. */
  readonly details?: Readonly<Record<string, number | string>>;
}

/** A measured ratio. `ratio` = median(subject) / median(baseline); lower is better. */
export interface Ratio {
  readonly name: string;
  readonly baselineName: string;
  readonly subjectMedianMs: number;
  readonly baselineMedianMs: number;
  readonly ratio: number;
  readonly target: number | null;
  readonly withinTarget: boolean | null;
  readonly rounds: number;
  readonly iterations: number;
  /** The suite's headline figure (the README's benchmark table); without one, its first ratio is. */
  readonly headline?: boolean;
  /** More figures of the same measurement (sizes, memory, throughput), written to bench/results.json. */
  readonly details?: Readonly<Record<string, number | string>>;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

async function timeOnce(op: Operation, iterations: number, before?: () => unknown): Promise<number> {
  if (before) await before();
  const start = performance.now();
  for (let i = 0; i < iterations; i++) await op();
  return (performance.now() - start) / iterations;
}

/**
 * Measure `subject` against `baseline` in the same process, alternating them round by round,
 * and report the ratio of medians. Never asserts: benchmarks report, tests decide correctness.
 */
export async function compare(options: CompareOptions): Promise<Ratio> {
  const iterations = options.iterations ?? 1;
  const rounds = options.rounds ?? 15;
  const warmup = options.warmup ?? 2;
  for (let i = 0; i < warmup; i++) {
    await timeOnce(options.baseline, iterations, options.before);
    await timeOnce(options.subject, iterations, options.before);
  }
  const base: number[] = [];
  const subj: number[] = [];
  for (let i = 0; i < rounds; i++) {
    // Alternate the order too, so neither side always runs on a warmer cache.
    if (i % 2 === 0) {
      base.push(await timeOnce(options.baseline, iterations, options.before));
      subj.push(await timeOnce(options.subject, iterations, options.before));
    } else {
      subj.push(await timeOnce(options.subject, iterations, options.before));
      base.push(await timeOnce(options.baseline, iterations, options.before));
    }
  }
  const baselineMedianMs = median(base);
  const subjectMedianMs = median(subj);
  const ratio = subjectMedianMs / baselineMedianMs;
  const target = options.target ?? null;
  return {
    name: options.name,
    baselineName: options.baselineName,
    subjectMedianMs,
    baselineMedianMs,
    ratio,
    target,
    withinTarget: target === null ? null : ratio <= target,
    rounds,
    iterations,
    ...(options.headline === true ? { headline: true } : {}),
    ...(options.details === undefined ? {} : { details: options.details }),
  };
}

/** One line per ratio, for people. */
export function formatRatio(r: Ratio): string {
  const target = r.target === null ? "" : `  target <= ${r.target} ${r.withinTarget ? "ok" : "MISSED"}`;
  return `${r.name} / ${r.baselineName}: ratio ${r.ratio.toFixed(3)} (${r.subjectMedianMs.toFixed(4)} ms vs ${r.baselineMedianMs.toFixed(4)} ms, median of ${r.rounds}x${r.iterations})${target}`;
}
