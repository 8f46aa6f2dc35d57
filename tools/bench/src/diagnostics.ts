import type { Diagnostic } from "@asp/contracts";

/** A 32-hex-digit content-style fingerprint of finding `n` of provider `p`: well spread, not in generation order. */
export function fingerprint(n: number, p: number): string {
  let x = (n * 2654435761 + p * 40503 + 1) >>> 0;
  let out = "";
  for (let i = 0; i < 4; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out += (x >>> 0).toString(16).padStart(8, "0");
  }
  return out;
}

/** Order diagnostics by fingerprint: the sort a raw client does, the baseline of two suites. */
export const byFingerprint = (a: Diagnostic, b: Diagnostic): number =>
  a.fingerprint < b.fingerprint ? -1 : a.fingerprint > b.fingerprint ? 1 : 0;
