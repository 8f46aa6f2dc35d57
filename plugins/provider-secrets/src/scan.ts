import { createHash } from "node:crypto";
import type { Diagnostic } from "@asp/contracts";
import { type Allowlist, effectiveAllowlist } from "./allowlist.js";
import { type CompiledRule, DEFAULT_RULES, type EntropyGate, type RuleSet } from "./rules.js";

/** The diagnostic source this provider declares and reports under. */
export const SOURCE = "secrets";

const DEFAULT_HELP =
  "Treat the credential as leaked: rotate (revoke and re-issue) it, remove it from the change and from git history (git filter-repo), and load it from a secret store or the environment instead.";

/** Shannon entropy of a string, in bits per character (0 for the empty string). */
export function shannonEntropy(value: string): number {
  if (value.length === 0) return 0;
  const counts = new Map<string, number>();
  for (const ch of value) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  const n = [...value].length;
  let bits = 0;
  for (const c of counts.values()) {
    const p = c / n;
    bits -= p * Math.log2(p);
  }
  return bits;
}

/** Which alphabet a candidate value is drawn from (selects the entropy threshold). */
export function alphabetOf(value: string): "hex" | "base64" | "other" {
  if (/^[0-9a-fA-F]+$/.test(value)) return "hex";
  if (/^[A-Za-z0-9+/=_-]+$/.test(value)) return "base64";
  return "other";
}

/** True when `value` passes an entropy gate (long enough, random enough for its alphabet). */
export function passesEntropy(value: string, gate: EntropyGate): boolean {
  if (value.length < gate.minLength) return false;
  if (gate.requireDigit === true && !/[0-9]/.test(value)) return false;
  const threshold = alphabetOf(value) === "hex" ? gate.hex : gate.base64;
  return shannonEntropy(value) >= threshold;
}

/**
 * True for content that is not text: a NUL byte in the first 8 KiB (git's heuristic) or bytes
 * that are not UTF-8. Binary blobs are skipped, never decoded into findings.
 */
export function isBinary(bytes: Uint8Array): boolean {
  const head = bytes.subarray(0, 8192);
  if (head.includes(0)) return true;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return false;
  } catch {
    return true;
  }
}

const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");

/**
 * Fingerprint of a secret under a rule: `sha256(ruleId + "\0" + secret)`, hex. Equal wherever
 * the value occurs, so allowlisting it covers every copy; it never contains the value.
 */
export function secretFingerprint(ruleId: string, secret: string): string {
  return sha256(`${ruleId}\u0000${secret}`);
}

/**
 * Fingerprint of one finding: `sha256(ruleId + "\0" + path + "\0" + secret)`, hex. Content-based
 * (survives line shifts) and distinct per path, so the host's per-source dedup never folds two
 * files that leak the same value into one finding.
 */
export function findingFingerprint(ruleId: string, path: string, secret: string): string {
  return sha256(`${ruleId}\u0000${path}\u0000${secret}`);
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  return starts;
}

function position(starts: readonly number[], offset: number): { line: number; character: number } {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((starts[mid] as number) <= offset) lo = mid;
    else hi = mid - 1;
  }
  return { line: lo, character: offset - (starts[lo] as number) };
}

interface Hit {
  readonly rule: CompiledRule;
  readonly secret: string;
  readonly start: number;
  readonly end: number;
  occurrences: number;
}

function* candidates(rule: CompiledRule, text: string): Generator<{ secret: string; start: number; end: number }> {
  for (const m of text.matchAll(rule.regex)) {
    const span = m.indices?.groups?.secret ?? m.indices?.[0];
    if (span === undefined) continue;
    const [start, end] = span;
    if (end <= start) continue;
    yield { secret: text.slice(start, end), start, end };
  }
}

/**
 * Scan one text for secrets and return redacted diagnostics: code `secrets/<rule id>`, the
 * location, a fingerprint and a next step. A diagnostic never contains the secret (not in the
 * message, `data`, or anywhere else), only its fingerprints and length.
 *
 * Rules run in rule-set order; a value already claimed by an earlier rule is not reported again
 * by a later, more generic one (an AWS key is `aws-access-key-id`, not also `high-entropy-assignment`).
 * The same value found several times in one file by one rule is one finding (`data.occurrences`).
 *
 * @example
 * ```ts
 * const [d] = scanText(`aws_access_key_id = ${key}\n`, "config/prod.env");
 * d.code; // "secrets/aws-access-key-id" — and JSON.stringify(d) does not contain the key
 * ```
 */
export function scanText(
  text: string,
  path: string,
  rules: RuleSet = DEFAULT_RULES,
  allowlist: Allowlist = effectiveAllowlist(rules),
): Diagnostic[] {
  if (allowlist.skipsPath(path)) return [];
  const lower = text.toLowerCase();
  const claimed: Array<readonly [number, number]> = [];
  const overlaps = (start: number, end: number): boolean => claimed.some(([s, e]) => start < e && s < end);
  const hits = new Map<string, Hit>();
  for (const rule of rules.rules) {
    if (rule.keywords !== undefined && !rule.keywords.some((k) => lower.includes(k))) continue;
    const mine: Array<readonly [number, number]> = [];
    for (const c of candidates(rule, text)) {
      if (overlaps(c.start, c.end)) continue;
      if (rule.entropy !== undefined && !passesEntropy(c.secret, rule.entropy)) continue;
      if (allowlist.values.has(c.secret)) continue;
      mine.push([c.start, c.end]);
      const key = `${rule.id}\u0000${c.secret}`;
      const seen = hits.get(key);
      if (seen !== undefined) seen.occurrences++;
      else hits.set(key, { rule, secret: c.secret, start: c.start, end: c.end, occurrences: 1 });
    }
    claimed.push(...mine);
  }
  if (hits.size === 0) return [];
  const starts = lineStarts(text);
  const out: Diagnostic[] = [];
  for (const hit of [...hits.values()].sort((a, b) => a.start - b.start || a.rule.id.localeCompare(b.rule.id))) {
    const fingerprint = findingFingerprint(hit.rule.id, path, hit.secret);
    const secretFp = secretFingerprint(hit.rule.id, hit.secret);
    if (allowlist.fingerprints.has(fingerprint) || allowlist.fingerprints.has(secretFp)) continue;
    const start = position(starts, hit.start);
    const end = position(starts, hit.end);
    const data: Record<string, unknown> = {
      rule: hit.rule.id,
      secretFingerprint: secretFp,
      length: hit.secret.length,
      occurrences: hit.occurrences,
    };
    if (hit.rule.entropy !== undefined) data.entropy = Math.round(shannonEntropy(hit.secret) * 100) / 100;
    const d: Diagnostic = {
      source: SOURCE,
      code: `${SOURCE}/${hit.rule.id}`,
      severity: hit.rule.severity,
      message: `${hit.rule.description} is committed in ${path} at line ${start.line + 1} (value redacted, ${hit.secret.length} characters).`,
      range: { path, start, end },
      fingerprint,
      help: hit.rule.help ?? DEFAULT_HELP,
      tags: ["secret"],
      data,
    };
    out.push(hit.rule.href === undefined ? d : { ...d, codeDescription: { href: hit.rule.href } });
  }
  return out;
}
