/** Arithmetic mean of `values`; NaN entries are skipped, an empty input gives `undefined`. */
export function mean(values: readonly number[]): number | undefined {
  const finite = values.filter((v) => !Number.isNaN(v));
  if (finite.length === 0) return undefined;
  return finite.reduce((sum, v) => sum + v, 0) / finite.length;
}

/** Clamp `value` into `[min, max]`. */
export function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
