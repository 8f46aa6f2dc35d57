import { createHash } from "node:crypto";
import type { Diagnostic } from "@asp/contracts";
import { type Allowlist, effectiveAllowlist } from "./allowlist.js";
import { type CatalogueHit, lintCatalogue } from "./catalogue.js";
import { decodeBlob, type EncodedView, encodedViews, type ViewEncoding } from "./decode.js";
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

/** True for a value that reads as words joined by separators (`s3cret-token-from-the-env`). */
function isPhrase(value: string): boolean {
  const parts = value.split(/[-_.]+/).filter((p) => p !== "");
  if (parts.length < 3 || parts.some((p) => p.length > 12)) return false;
  return parts.filter((p) => /^[A-Za-z]+$/.test(p)).length * 2 >= parts.length;
}

/** Passwords documentation and local setups write where a real one would go. */
const PLACEHOLDER_PASSWORDS = new Set([
  "pass",
  "password",
  "passwd",
  "pwd",
  "secret",
  "changeme",
  "user",
  "username",
  "root",
  "admin",
  "guest",
  "test",
  "example",
  "postgres",
  "mysql",
  "redis",
  "rabbitmq",
  "mongo",
  "sa",
]);

/**
 * True when a matched value is a placeholder, never a credential (issue 26: a quarter of a
 * public scanner's own negative samples were flagged on these):
 * - most of it is runs of one repeated character (`ghp_xxxx…`, `glpat-XXXX…`, `AKIAXXXX…`,
 *   `xoxb-0000…-xxxx…`): at least half its characters in runs of 4 or more, which a random
 *   token essentially never has (a private key block, which has runs of `A`, is far below half);
 * - it is a mask: at least three quarters of its letters and digits are mask characters (`x`,
 *   `X`, `0`, `*`, `#`), as when a document shows a token's shape (`ghp_x0xx00x…`, `sk_live_****`);
 *   a random token has about one in twenty;
 * - a URL's password is one of the words documentation uses (`redis://user:pass@localhost`,
 *   `postgres://postgres:postgres@…`).
 */
export function isPlaceholder(value: string): boolean {
  if (value.length >= 8) {
    let inRuns = 0;
    for (let i = 0; i < value.length; ) {
      let j = i + 1;
      while (j < value.length && value[j] === value[i]) j++;
      if (j - i >= 4) inRuns += j - i;
      i = j;
    }
    if (inRuns * 2 >= value.length) return true;
    const alnum = value.replace(/[^A-Za-z0-9*#]/g, "");
    const masked = alnum.replace(/[^xX0*#]/g, "").length;
    if (alnum.length >= 8 && masked * 4 >= alnum.length * 3) return true;
  }
  const url = /^[a-z][a-z0-9+.-]*:\/\/[^:/\s@]*:([^@/\s]+)@/i.exec(value);
  const password = url === null ? value : url[1];
  return PLACEHOLDER_PASSWORDS.has((password ?? "").toLowerCase());
}

/** True when `value` passes an entropy gate (long enough, random enough for its alphabet). */
export function passesEntropy(value: string, gate: EntropyGate): boolean {
  if (value.length < gate.minLength) return false;
  if (gate.requireDigit === true && !/[0-9]/.test(value)) return false;
  if (gate.rejectPhrases === true && isPhrase(value)) return false;
  const threshold = alphabetOf(value) === "hex" ? gate.hex : gate.base64;
  return shannonEntropy(value) >= threshold;
}

/**
 * True for content that git would call binary: a NUL byte in the first 8 KiB, or bytes that are
 * not UTF-8. Such content is still scanned (as latin1, see `decodeBlob`): this only labels it.
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

/** What a finding is attributed to: a rule of the rule set, or a rule of the catalogue. */
interface Detector {
  readonly id: string;
  readonly description: string;
  readonly severity: CompiledRule["severity"];
  readonly help?: string;
  readonly href?: string;
  readonly entropy?: EntropyGate;
  readonly stopwords?: readonly string[];
  readonly messageId?: string;
}

interface Hit {
  readonly detector: Detector;
  readonly secret: string;
  /** Span reported, in the file's text (the encoded run for a decoded view). */
  readonly start: number;
  readonly end: number;
  readonly encoding?: ViewEncoding;
  occurrences: number;
}

interface Span {
  readonly secret: string;
  readonly start: number;
  readonly end: number;
}

function* ruleSpans(rule: CompiledRule, text: string): Generator<Span> {
  for (const m of text.matchAll(rule.regex)) {
    const span = m.indices?.groups?.secret ?? m.indices?.[0];
    if (span === undefined) continue;
    const [start, end] = span;
    if (end <= start) continue;
    yield { secret: text.slice(start, end), start, end };
  }
}

function catalogueDetector(hit: CatalogueHit): Detector {
  const name = hit.id.slice("secretlint-".length);
  const d: Detector = {
    id: hit.id,
    description: `A secret (${hit.messageId}, secretlint rule ${name})`,
    severity: "error",
    messageId: hit.messageId,
  };
  return hit.href === undefined ? d : { ...d, href: hit.href };
}

/**
 * Every rule over one view (the file's text, or a decoded view of part of it), in claim order:
 * the rule set's `error` rules, then the catalogue, then the rule set's other (generic) rules. A
 * span claimed by an earlier detector is not reported again by a later one.
 */
async function scanView(
  text: string,
  path: string,
  rules: RuleSet,
  allowlist: Allowlist,
  report: (detector: Detector, span: Span) => void,
  primary: boolean,
): Promise<void> {
  const lower = text.toLowerCase();
  const claimed: Array<readonly [number, number]> = [];
  const overlaps = (start: number, end: number): boolean => claimed.some(([s, e]) => start < e && s < end);
  const accept = (detector: Detector, spans: Iterable<Span>): void => {
    const mine: Array<readonly [number, number]> = [];
    for (const c of spans) {
      if (overlaps(c.start, c.end)) continue;
      if (detector.entropy !== undefined && !passesEntropy(c.secret, detector.entropy)) continue;
      if (detector.stopwords?.some((w) => c.secret.toLowerCase().includes(w)) === true) continue;
      if (allowlist.values.has(c.secret)) continue;
      // A placeholder is claimed (no later, more generic rule reports it) but not reported.
      if (isPlaceholder(c.secret)) {
        mine.push([c.start, c.end]);
        continue;
      }
      mine.push([c.start, c.end]);
      report(detector, c);
    }
    claimed.push(...mine);
  };
  const runRules = (which: readonly CompiledRule[]): void => {
    for (const rule of which) {
      // A path rule runs on matching files' own text only (never on a decoded view).
      if (rule.pathRegex !== undefined && (!primary || !rule.pathRegex.test(path))) continue;
      if (rule.keywords !== undefined && !rule.keywords.some((k) => lower.includes(k))) continue;
      accept(rule, ruleSpans(rule, text));
    }
  };
  runRules(rules.rules.filter((r) => r.severity === "error"));
  for (const hit of await lintCatalogue(text, path)) {
    accept(catalogueDetector(hit), [{ secret: text.slice(hit.start, hit.end), start: hit.start, end: hit.end }]);
  }
  runRules(rules.rules.filter((r) => r.severity !== "error"));
}

/**
 * Scan one text for secrets and return redacted diagnostics: code `secrets/<rule id>` (rule-set
 * rules) or `secrets/secretlint-<rule>` (the catalogue), the location, a fingerprint and a next
 * step. A diagnostic never contains the secret (not in the message, `data`, or anywhere else),
 * only its fingerprints and length.
 *
 * Base64, base64url, hex and UTF-16 runs inside the text are decoded and scanned too; a secret
 * found in one is reported at the span of the encoded run, with `data.encoding`.
 * A value already claimed by an earlier, more specific detector is not reported again by a later,
 * more generic one (an AWS key is `aws-access-key-id`, not also `high-entropy-assignment`).
 * The same value found several times in one file by one rule is one finding (`data.occurrences`).
 *
 * Unbounded in time: for repository content use it inside a bounded scanner (`createBoundedScanner`).
 *
 * @example
 * ```ts
 * const [d] = await scanText(`aws_access_key_id = ${key}\n`, "config/prod.env");
 * d.code; // "secrets/aws-access-key-id" — and JSON.stringify(d) does not contain the key
 * ```
 */
export async function scanText(
  text: string,
  path: string,
  rules: RuleSet = DEFAULT_RULES,
  allowlist: Allowlist = effectiveAllowlist(rules),
): Promise<Diagnostic[]> {
  if (allowlist.skipsPath(path)) return [];
  const hits = new Map<string, Hit>();
  const record = (view: EncodedView | undefined) => (detector: Detector, span: Span) => {
    const key = `${detector.id}\u0000${span.secret}`;
    const seen = hits.get(key);
    if (seen !== undefined) {
      seen.occurrences++;
      return;
    }
    const at = view === undefined ? span : view;
    const hit: Hit = { detector, secret: span.secret, start: at.start, end: at.end, occurrences: 1 };
    hits.set(key, view === undefined ? hit : { ...hit, encoding: view.encoding });
  };
  await scanView(text, path, rules, allowlist, record(undefined), true);
  for (const view of encodedViews(text)) await scanView(view.text, path, rules, allowlist, record(view), false);
  if (hits.size === 0) return [];
  return toDiagnostics([...hits.values()], text, path, allowlist);
}

/**
 * Scan one blob: decoded as UTF-8 when valid, otherwise as latin1 (so invalid UTF-8 or NUL bytes
 * never hide a secret), then {@link scanText}. `data.textEncoding` says `latin1` for such a blob.
 */
export async function scanBlob(
  bytes: Uint8Array,
  path: string,
  rules: RuleSet = DEFAULT_RULES,
  allowlist: Allowlist = effectiveAllowlist(rules),
): Promise<Diagnostic[]> {
  const { text, encoding } = decodeBlob(bytes);
  const found = await scanText(text, path, rules, allowlist);
  if (encoding === "utf-8") return found;
  return found.map((d) => ({ ...d, data: { ...(d.data as Record<string, unknown>), textEncoding: encoding } }));
}

function toDiagnostics(hits: Hit[], text: string, path: string, allowlist: Allowlist): Diagnostic[] {
  const starts = lineStarts(text);
  const out: Diagnostic[] = [];
  for (const hit of hits.sort((a, b) => a.start - b.start || a.detector.id.localeCompare(b.detector.id))) {
    const rule = hit.detector;
    const fingerprint = findingFingerprint(rule.id, path, hit.secret);
    const secretFp = secretFingerprint(rule.id, hit.secret);
    if (allowlist.fingerprints.has(fingerprint) || allowlist.fingerprints.has(secretFp)) continue;
    const start = position(starts, hit.start);
    const end = position(starts, hit.end);
    const data: Record<string, unknown> = {
      rule: rule.id,
      secretFingerprint: secretFp,
      length: hit.secret.length,
      occurrences: hit.occurrences,
    };
    if (rule.entropy !== undefined) data.entropy = Math.round(shannonEntropy(hit.secret) * 100) / 100;
    if (rule.messageId !== undefined) data.catalogueMessage = rule.messageId;
    if (hit.encoding !== undefined) data.encoding = hit.encoding;
    const how = hit.encoding === undefined ? "" : `, ${hit.encoding}-encoded`;
    const d: Diagnostic = {
      source: SOURCE,
      code: `${SOURCE}/${rule.id}`,
      severity: rule.severity,
      message: `${rule.description} is committed in ${path} at line ${start.line + 1} (value redacted${how}, ${hit.secret.length} characters).`,
      range: { path, start, end },
      fingerprint,
      help: rule.help ?? DEFAULT_HELP,
      tags: ["secret"],
      data,
    };
    out.push(rule.href === undefined ? d : { ...d, codeDescription: { href: rule.href } });
  }
  return out;
}
