import { clamp, mean } from "./math.js";

export interface Report {
  readonly label: string;
  readonly average: number | undefined;
  readonly score: number;
}

/** Summarize a series of measurements into a report with a score in [0, 100]. */
export function summarize(label: string, values: readonly number[]): Report {
  const average = mean(values);
  return { label, average, score: clamp(Math.round(average ?? 0), 0, 100) };
}
