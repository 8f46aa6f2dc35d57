// The maintained catalogue: secretlint's recommended preset on @secretlint/core, imported
// statically so the plugin bundle carries it (no rule is resolved by name at run time).
import { lintSource } from "@secretlint/core";
import { secretLintProfiler } from "@secretlint/profiler";
import { creator as recommendedPreset } from "@secretlint/secretlint-rule-preset-recommend";
import type { SecretLintCoreConfigRule } from "@secretlint/types";

/** One catalogue hit: where, which rule, and its reference page. Never the message (it quotes the secret). */
export interface CatalogueHit {
  /** `secretlint-<rule>`, e.g. `secretlint-sendgrid`. */
  readonly id: string;
  /** The rule's message id (e.g. `SENDGRID_KEY`): names the format, never the value. */
  readonly messageId: string;
  readonly start: number;
  readonly end: number;
  readonly href?: string;
}

const PREFIX = "@secretlint/secretlint-rule-";

// @secretlint/core 12 marks a performance entry for every rule of every file, and its profiler
// keeps each one and scans all it kept on every end mark: the cost of a file grows with the files
// scanned before it (in one scan worker, 500 small files took 12 s, 1,000 over 60 s; issue 26).
// Upstream made profiling opt-in in 13.x (secretlint/secretlint#1633, #1653, fixed by #1673),
// which needs Node 22. On 12 the profiler is the same singleton core imports: switch its marks
// off, so nothing is observed or kept. Nothing here ever reads a profile.
secretLintProfiler.mark = () => {};

/**
 * Catalogue rules left out, and why. `filter-comments` honours `secretlint-disable` comments
 * written in the scanned file: the file is the attacker's, so it must not switch the scan off
 * (a repository's own allowlist lives in `asp.secrets.json` on the base tree).
 */
export const EXCLUDED_CATALOGUE_RULES: Readonly<Record<string, string>> = Object.freeze({
  [`${PREFIX}filter-comments`]: "a comment in the scanned file must not disable the scan",
});

const CATALOGUE: readonly SecretLintCoreConfigRule[] = recommendedPreset.rules
  .filter((rule) => EXCLUDED_CATALOGUE_RULES[rule.meta.id] === undefined)
  .map((rule) => ({ id: rule.meta.id, rule }) as SecretLintCoreConfigRule);

/** The ids (`secretlint-<rule>`) of the catalogue rules in force, in preset order. */
export const CATALOGUE_RULE_IDS: readonly string[] = Object.freeze(CATALOGUE.map((r) => catalogueId(r.id)));

function catalogueId(ruleId: string): string {
  return `secretlint-${ruleId.startsWith(PREFIX) ? ruleId.slice(PREFIX.length) : ruleId.replace(/[^a-z0-9-]/g, "-")}`;
}

/**
 * Run the catalogue over one text. The path is only a label (`noPhysicFilePath`): nothing is
 * read from disk. Returns spans, never the rule's message or data, which quote the secret.
 */
export async function lintCatalogue(text: string, path: string): Promise<CatalogueHit[]> {
  const dot = path.lastIndexOf(".");
  const result = await lintSource({
    source: {
      content: text,
      filePath: path,
      ext: dot > path.lastIndexOf("/") ? path.slice(dot) : "",
      contentType: "text",
    },
    options: { config: { rules: [...CATALOGUE] }, maskSecrets: true, noPhysicFilePath: true },
  });
  const hits: CatalogueHit[] = [];
  for (const m of result.messages) {
    if (m.type !== "message") continue;
    const [start, end] = m.range;
    if (!(end > start)) continue;
    const hit = { id: catalogueId(m.ruleId), messageId: m.messageId, start, end };
    hits.push(typeof m.docsUrl === "string" && m.docsUrl.startsWith("https://") ? { ...hit, href: m.docsUrl } : hit);
  }
  return hits;
}
