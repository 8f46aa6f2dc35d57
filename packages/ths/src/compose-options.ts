import type { ComposeHostOptions } from "./compose.js";
import { ThsError } from "./errors.js";

/**
 * Every option {@link ComposeHostOptions} has. The type makes the compiler fail when an option
 * is added to the interface and not here (or listed here and not there).
 */
const KNOWN: Record<keyof ComposeHostOptions, true> = {
  store: true,
  policy: true,
  trustRoots: true,
  plugins: true,
  pluginOptions: true,
  providers: true,
  excludes: true,
  environment: true,
  timings: true,
  clock: true,
  env: true,
  failOpenSink: true,
  warm: true,
  register: true,
};

/** The option names {@link composeHost} accepts. */
export const COMPOSE_HOST_OPTIONS: readonly string[] = Object.freeze(Object.keys(KNOWN).sort());

/** Levenshtein distance, case-insensitive (a misspelt capital is the commonest typo). */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) {
      row[j] = Math.min(
        (prev[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        (prev[j - 1] ?? 0) + (x[i - 1] === y[j - 1] ? 0 : 1),
      );
    }
    prev = row;
  }
  return prev[y.length] ?? 0;
}

/** The known option closest to `name`, or null when none is plausibly meant. */
function closestOption(name: string): string | null {
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const known of COMPOSE_HOST_OPTIONS) {
    const d = distance(name, known);
    if (d < bestDistance) {
      best = known;
      bestDistance = d;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(name.length / 3)) ? best : null;
}

/**
 * Refuse options {@link composeHost} does not know, like the trusted host configuration file
 * refuses unknown keys: an option the host ignores would fail far from its cause (a misspelt
 * `providers` is a gate with no provider, so INDETERMINATE).
 *
 * @throws ThsError `ASP_THS_BAD_OPTIONS` when `options` is not an object, or has an unknown
 *   option (`data.option`, and `data.closest`: the known option it most likely means, or null).
 */
export function assertComposeHostOptions(options: unknown): void {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new ThsError("ASP_THS_BAD_OPTIONS", "composeHost options must be an object", {
      data: { known: COMPOSE_HOST_OPTIONS },
    });
  }
  for (const option of Object.keys(options)) {
    if (Object.hasOwn(KNOWN, option)) continue;
    const closest = closestOption(option);
    throw new ThsError(
      "ASP_THS_BAD_OPTIONS",
      `composeHost has no option ${JSON.stringify(option)}${closest === null ? "" : `; did you mean ${JSON.stringify(closest)}?`} (known: ${COMPOSE_HOST_OPTIONS.join(", ")})`,
      { data: { option, closest, known: COMPOSE_HOST_OPTIONS } },
    );
  }
}
