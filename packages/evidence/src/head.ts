import { EvidenceError } from "./errors.js";
import { type Digest, isDigest } from "./hash.js";
import type { FactLogHead } from "./store.js";

/**
 * A head as text: `SEQ:DIGEST`, e.g. `12:sha256:9f86...`. What a CI system records in its own
 * logs after each run, to check later with `verify({ expectHead })`, the way transparency logs
 * publish checkpoints.
 *
 * @example
 * ```ts
 * formatHead({ seq: 12, digest }); // "12:sha256:..."
 * ```
 */
export function formatHead(head: FactLogHead): string {
  return `${head.seq}:${head.digest}`;
}

/**
 * Parse `SEQ:DIGEST` (a positive decimal seq without leading zeros, then a digest).
 * @throws EvidenceError `ASP_EVIDENCE_BAD_HEAD` for anything else.
 */
export function parseHead(text: string): FactLogHead {
  const m = typeof text === "string" ? /^([1-9][0-9]{0,15}):(.*)$/.exec(text.trim()) : null;
  const seq = m === null ? Number.NaN : Number(m[1]);
  if (m === null || !Number.isSafeInteger(seq) || !isDigest(m[2])) {
    throw new EvidenceError(
      "ASP_EVIDENCE_BAD_HEAD",
      `a head is SEQ:DIGEST (e.g. 12:sha256:<64 hex>), got ${JSON.stringify(String(text).slice(0, 100))}`,
      { data: { text: String(text).slice(0, 200) } },
    );
  }
  return { seq, digest: m[2] as Digest };
}
