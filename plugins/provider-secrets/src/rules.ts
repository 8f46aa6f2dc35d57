import { SEVERITIES, type Severity } from "@asp/contracts";
import { SecretsError } from "./errors.js";
import defaultRuleSet from "./rules/default.json" with { type: "json" };

/** Entropy gate of a rule: the captured value must be long and random enough to count. */
export interface EntropyGate {
  /** Shortest value that may count (characters). */
  readonly minLength: number;
  /** Minimum Shannon entropy (bits per character) for a value made only of hex digits. */
  readonly hex: number;
  /** Minimum Shannon entropy for any other value of the base64 / base64url alphabet. */
  readonly base64: number;
  /** Values without a digit never count (keeps words and identifiers out). */
  readonly requireDigit?: boolean;
  /**
   * Values that read as a phrase (three or more `-`, `_` or `.` separated parts, at least half
   * of them letters only, none longer than 12 characters, e.g. `s3cret-token-from-the-env`)
   * never count.
   */
  readonly rejectPhrases?: boolean;
}

/** One detection rule, as written in a rule-set file. */
export interface SecretRule {
  /** `[a-z0-9-]`, unique in the set; the diagnostic code is `secrets/<id>`. */
  readonly id: string;
  readonly description: string;
  /** A JavaScript regular expression; the named group `secret` (or the whole match) is the secret. */
  readonly pattern: string;
  /** Extra flags among `i`, `m`, `s`, `u` (`g` and `d` are always added). */
  readonly flags?: string;
  readonly severity: Severity;
  /** Lower-case substrings; the rule runs on a file only when one of them occurs in it. */
  readonly keywords?: readonly string[];
  readonly entropy?: EntropyGate;
  /**
   * Lower-case substrings that mark a value as a placeholder (`example`, `dummy` ...): a value
   * containing one is not reported. For generic rules; a format rule should not need it.
   */
  readonly stopwords?: readonly string[];
  /** The next step shown with a finding (rotate, remove from history, use a secret store). */
  readonly help?: string;
  /** A page that explains the credential and how to revoke it. */
  readonly href?: string;
  /**
   * A case-insensitive JavaScript regular expression over the repository-relative path: the rule
   * runs only on files whose path matches, and only on the file's own text (never on decoded
   * views). With a pattern that takes the file's start (`^(?<secret>[\s\S]{16,64})`), the file
   * itself is the finding (a committed `.p12` keystore).
   */
  readonly path?: string;
}

/** What an allowlist may name: paths (globs), fingerprints, and published example values. */
export interface AllowlistSpec {
  /** Globs (picomatch, dot files included) of paths that are never scanned. */
  readonly paths?: readonly string[];
  /** 64-hex fingerprints (either the finding's `fingerprint` or its `data.secretFingerprint`). */
  readonly fingerprints?: readonly string[];
  /**
   * Exact values that are never secrets because they are published as examples (AWS's
   * `AKIAIOSFODNN7EXAMPLE`). Only the shipped rule set may carry them: a repository's config
   * lists fingerprints instead, so a real secret is never written into config in clear.
   */
  readonly values?: readonly string[];
}

/**
 * A value a service issues that has no prefix of its own (a 40-character key, a UUID): it counts
 * only assigned to a name holding the service's name (`ZENDESK_API_TOKEN = "…"`,
 * `zendesk: { secret: … }` does not), in every assignment form the generic rule knows, and never
 * under an identifier's name (`…_id`, `…Name`, `…Url`). Compiled into an ordinary rule.
 */
export interface ServiceValueSpec {
  /** `[a-z0-9-]`, unique among rules and services; the diagnostic code is `secrets/<id>`. */
  readonly id: string;
  readonly description: string;
  /** Lower-case service names; one must occur in the assigned name (and they are the keywords). */
  readonly names: readonly string[];
  /** A JavaScript pattern of the whole value, matched case-insensitively with exact bounds. */
  readonly value: string;
  /** Default `error`. */
  readonly severity?: Severity;
  /** Default: at least 3.0 bits per character (2.5 for hex), with a digit. */
  readonly entropy?: EntropyGate;
  readonly help?: string;
}

/** A rule-set file: version 1, rules, service values, and a built-in allowlist. */
export interface RuleSetSpec {
  readonly version: 1;
  readonly description?: string;
  readonly rules: readonly SecretRule[];
  readonly services?: readonly ServiceValueSpec[];
  readonly allowlist?: AllowlistSpec;
}

/** A validated rule with its compiled expression. */
export interface CompiledRule extends SecretRule {
  /** Global, with indices (`gd`), ready for `matchAll`. */
  readonly regex: RegExp;
  /** `path`, compiled. */
  readonly pathRegex?: RegExp;
}

/** A validated rule set. */
export interface RuleSet {
  readonly $$type: "@asp/SecretsRuleSet";
  readonly version: 1;
  readonly rules: readonly CompiledRule[];
  readonly allowlist: Required<AllowlistSpec>;
}

const RULE_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
const FINGERPRINT = /^[0-9a-f]{64}$/;
const RULE_KEYS = new Set([
  "id",
  "description",
  "pattern",
  "flags",
  "severity",
  "keywords",
  "entropy",
  "stopwords",
  "help",
  "href",
  "path",
]);
const ENTROPY_KEYS = new Set(["minLength", "hex", "base64", "requireDigit", "rejectPhrases"]);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function fail(message: string, data: Record<string, unknown> = {}): never {
  throw new SecretsError("ASP_SECRETS_INVALID_RULES", message, { data });
}

function stringList(value: unknown, where: string, check?: (s: string) => boolean): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) fail(`${where} must be an array of strings`, { where });
  return value.map((s, i) => {
    if (typeof s !== "string" || s === "" || (check !== undefined && !check(s))) {
      fail(`${where}[${i}] is not a valid entry`, { where, index: i });
    }
    return s;
  });
}

function compileRule(raw: unknown, index: number): CompiledRule {
  const where = `rules[${index}]`;
  if (!isObject(raw)) fail(`${where} must be an object`, { where });
  for (const key of Object.keys(raw))
    if (!RULE_KEYS.has(key)) fail(`${where} has unknown key "${key}"`, { where, key });
  const { id, description, pattern, flags, severity, keywords, entropy, stopwords, help, href, path } = raw;
  if (typeof id !== "string" || !RULE_ID.test(id)) fail(`${where}.id must match ${RULE_ID}`, { where });
  if (typeof description !== "string" || description === "") fail(`rule ${id}: description is required`, { rule: id });
  if (typeof pattern !== "string" || pattern === "") fail(`rule ${id}: pattern is required`, { rule: id });
  if (flags !== undefined && (typeof flags !== "string" || !/^[imsu]*$/.test(flags))) {
    fail(`rule ${id}: flags may only contain i, m, s, u`, { rule: id });
  }
  if (typeof severity !== "string" || !(SEVERITIES as readonly string[]).includes(severity)) {
    fail(`rule ${id}: severity must be one of ${SEVERITIES.join(", ")}`, { rule: id });
  }
  let regex: RegExp;
  try {
    regex = new RegExp(pattern, `gd${flags ?? ""}`);
  } catch (error) {
    fail(`rule ${id}: pattern does not compile: ${(error as Error).message}`, { rule: id });
  }
  // A pattern that matches the empty string would loop forever over every position.
  if (new RegExp(`^(?:${pattern})$`, flags ?? "").test("")) fail(`rule ${id}: pattern matches the empty string`);
  const rule: { -readonly [K in keyof CompiledRule]: CompiledRule[K] } = {
    id,
    description,
    pattern,
    severity: severity as Severity,
    regex,
  };
  if (flags !== undefined) rule.flags = flags;
  if (keywords !== undefined)
    rule.keywords = stringList(keywords, `rule ${id}: keywords`, (s) => s === s.toLowerCase());
  if (entropy !== undefined) {
    if (!isObject(entropy)) fail(`rule ${id}: entropy must be an object`, { rule: id });
    for (const key of Object.keys(entropy))
      if (!ENTROPY_KEYS.has(key)) fail(`rule ${id}: entropy has unknown key "${key}"`, { rule: id, key });
    const { minLength, hex, base64, requireDigit, rejectPhrases } = entropy;
    if (typeof minLength !== "number" || !Number.isInteger(minLength) || minLength < 1)
      fail(`rule ${id}: entropy.minLength must be a positive integer`, { rule: id });
    for (const [name, v] of [
      ["hex", hex],
      ["base64", base64],
    ] as const) {
      if (typeof v !== "number" || !(v >= 0 && v <= 8)) fail(`rule ${id}: entropy.${name} must be 0..8 bits`);
    }
    for (const [name, v] of [
      ["requireDigit", requireDigit],
      ["rejectPhrases", rejectPhrases],
    ] as const) {
      if (v !== undefined && typeof v !== "boolean")
        fail(`rule ${id}: entropy.${name} must be a boolean`, { rule: id });
    }
    rule.entropy = {
      minLength,
      hex: hex as number,
      base64: base64 as number,
      ...(requireDigit === undefined ? {} : { requireDigit: requireDigit as boolean }),
      ...(rejectPhrases === undefined ? {} : { rejectPhrases: rejectPhrases as boolean }),
    };
  }
  if (stopwords !== undefined)
    rule.stopwords = stringList(stopwords, `rule ${id}: stopwords`, (s) => s === s.toLowerCase());
  if (help !== undefined) {
    if (typeof help !== "string" || help === "") fail(`rule ${id}: help must be a non-empty string`, { rule: id });
    rule.help = help;
  }
  if (href !== undefined) {
    if (typeof href !== "string" || !/^https:\/\/\S+$/.test(href)) fail(`rule ${id}: href must be an https URL`);
    rule.href = href;
  }
  if (path !== undefined) {
    if (typeof path !== "string" || path === "") fail(`rule ${id}: path must be a non-empty string`, { rule: id });
    try {
      rule.pathRegex = new RegExp(path, "i");
    } catch (error) {
      fail(`rule ${id}: path does not compile: ${(error as Error).message}`, { rule: id });
    }
    rule.path = path;
  }
  return Object.freeze(rule);
}

/** A name that labels an identifier, not a secret: the assigned name ends with one of these. */
const IDENTIFIER_TAIL = "(?:ids?|name|type|path|file|url|uri|ref|header|prefix|region|endpoint|host|user(?:name)?)";

/**
 * The assignment forms a service value is recognised in, after the name: `=`, `:`, `:=`, `?=`,
 * `::=`, `.=`, `=>`, a typed declaration (`x: string =`, `var x string =`), `"name", "value"`
 * (after a closing quote) and an XML element (`<name>value`).
 */
const ASSIGNMENT =
  "[\"'\\]]{0,2}(?:\\s{0,8}(?::\\s{0,8}[A-Za-z_][A-Za-z0-9_.<>|?\\[\\]]{0,40}\\s{0,8})?=|\\s{1,8}[A-Za-z_*\\[\\]][A-Za-z0-9_.*\\[\\]]{0,40}\\s{0,8}=|\\s{0,8}(?::{1,3}=|[?+.]=|=>|:)|(?<=[\"'])\\s{0,8},|>\\s{0,16})\\s{0,8}[\"'`]?";

const SERVICE_KEYS = new Set(["id", "description", "names", "value", "severity", "entropy", "help"]);
const SERVICE_HELP =
  "Revoke this credential in the service's console and issue a new one, remove it from the change and from git history (git filter-repo), and read it from a secret store or the environment.";

/** A service value as the rule {@link compileRule} checks like any other. */
function serviceRule(raw: unknown, index: number): unknown {
  const where = `services[${index}]`;
  if (!isObject(raw)) fail(`${where} must be an object`, { where });
  for (const key of Object.keys(raw))
    if (!SERVICE_KEYS.has(key)) fail(`${where} has unknown key "${key}"`, { where, key });
  const names = stringList(raw.names, `${where}.names`, (s) => s === s.toLowerCase() && /^[a-z0-9._-]+$/.test(s));
  if (names.length === 0) fail(`${where}.names must name the service`, { where });
  if (typeof raw.value !== "string" || raw.value === "") fail(`${where}.value is required`, { where });
  const escaped = names.map((n) => n.replace(/[.]/g, "\\."));
  const pattern =
    `(?:${escaped.join("|")})(?![A-Za-z0-9_.-]{0,32}?${IDENTIFIER_TAIL}(?![A-Za-z0-9_.-]))[A-Za-z0-9_.-]{0,32}?` +
    `${ASSIGNMENT}(?<secret>${raw.value})(?![A-Za-z0-9_-])`;
  return {
    id: raw.id,
    description: raw.description,
    pattern,
    flags: "i",
    severity: raw.severity ?? "error",
    keywords: names,
    entropy: raw.entropy ?? { minLength: 8, hex: 2.5, base64: 3.0, requireDigit: true },
    help: raw.help ?? SERVICE_HELP,
  };
}

/**
 * Validate a rule-set document and compile its patterns.
 *
 * @throws SecretsError `ASP_SECRETS_INVALID_RULES` naming the first problem (never a secret).
 * @example
 * ```ts
 * const rules = loadRuleSet(JSON.parse(readFileSync("my-rules.json", "utf8")));
 * scanText(text, "src/app.ts", rules);
 * ```
 */
export function loadRuleSet(value: unknown): RuleSet {
  if (!isObject(value)) fail("a rule set must be an object");
  for (const key of Object.keys(value))
    if (!["version", "description", "rules", "services", "allowlist"].includes(key))
      fail(`unknown key "${key}"`, { key });
  if (value.version !== 1) fail("version must be 1");
  if (!Array.isArray(value.rules) || value.rules.length === 0) fail("rules must be a non-empty array");
  if (value.services !== undefined && !Array.isArray(value.services)) fail("services must be an array");
  const specs: unknown[] = value.rules;
  const services = (value.services ?? []) as unknown[];
  const rules = [
    ...specs.map(compileRule),
    ...services.map((s, i) => compileRule(serviceRule(s, i), specs.length + i)),
  ];
  const seen = new Set<string>();
  for (const r of rules) {
    if (seen.has(r.id)) fail(`duplicate rule id ${r.id}`, { rule: r.id });
    seen.add(r.id);
  }
  const allow = value.allowlist ?? {};
  if (!isObject(allow)) fail("allowlist must be an object");
  for (const key of Object.keys(allow))
    if (!["paths", "fingerprints", "values"].includes(key)) fail(`allowlist has unknown key "${key}"`, { key });
  return Object.freeze({
    $$type: "@asp/SecretsRuleSet",
    version: 1,
    rules: Object.freeze(rules),
    allowlist: Object.freeze({
      paths: stringList(allow.paths, "allowlist.paths"),
      fingerprints: stringList(allow.fingerprints, "allowlist.fingerprints", (s) => FINGERPRINT.test(s)),
      values: stringList(allow.values, "allowlist.values"),
    }),
  });
}

/** The rule set shipped with the plugin (`src/rules/default.json`), validated at load. */
export const DEFAULT_RULES: RuleSet = loadRuleSet(defaultRuleSet);
