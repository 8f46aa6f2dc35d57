import picomatch from "picomatch";
import { SecretsError } from "./errors.js";
import type { AllowlistSpec, RuleSet } from "./rules.js";

/** A compiled allowlist: what a scan skips. */
export interface Allowlist {
  /** True when the path is never scanned. */
  readonly skipsPath: (path: string) => boolean;
  /** Fingerprints (finding or secret) that are known not to be secrets. */
  readonly fingerprints: ReadonlySet<string>;
  /** Published example values (never reported, never echoed). */
  readonly values: ReadonlySet<string>;
}

/** The repository's `asp.secrets.json`, read from the base tree of the change. */
export interface SecretsConfig {
  readonly allowlist: { readonly paths: readonly string[]; readonly fingerprints: readonly string[] };
  /** Whether the rule set's published example values stay allowlisted (default true). */
  readonly documentedExamples: boolean;
}

/** Where the repository's configuration lives, relative to the tree root. */
export const CONFIG_PATH = "asp.secrets.json";

/** The empty allowlist. */
export const EMPTY_ALLOWLIST: Allowlist = Object.freeze({
  skipsPath: () => false,
  fingerprints: new Set<string>(),
  values: new Set<string>(),
});

const FINGERPRINT = /^[0-9a-f]{64}$/;

function configError(message: string, data: Record<string, unknown> = {}): never {
  throw new SecretsError("ASP_SECRETS_INVALID_CONFIG", `${CONFIG_PATH}: ${message}`, { data });
}

function globMatcher(globs: readonly string[], onBad: (glob: string) => never): (path: string) => boolean {
  if (globs.length === 0) return () => false;
  const matchers = globs.map((g) => {
    try {
      return picomatch(g, { dot: true, strictBrackets: true });
    } catch {
      return onBad(g);
    }
  });
  return (path) => matchers.some((m) => m(path));
}

/**
 * Compile allowlist entries (paths as picomatch globs with dot files, fingerprints, values).
 *
 * @throws SecretsError `ASP_SECRETS_INVALID_RULES` for a glob that does not compile.
 */
export function compileAllowlist(...specs: readonly AllowlistSpec[]): Allowlist {
  const paths = specs.flatMap((s) => s.paths ?? []);
  return Object.freeze({
    skipsPath: globMatcher(paths, (glob) => {
      throw new SecretsError("ASP_SECRETS_INVALID_RULES", "an allowlist path glob does not compile", {
        data: { glob },
      });
    }),
    fingerprints: new Set(specs.flatMap((s) => s.fingerprints ?? [])),
    values: new Set(specs.flatMap((s) => s.values ?? [])),
  });
}

/**
 * Parse the text of `asp.secrets.json`:
 * `{ "allowlist": { "paths": [glob], "fingerprints": [hex64] }, "documentedExamples": boolean }`.
 * Every key is optional; unknown keys are refused (a typo must not silently widen nothing).
 *
 * @throws SecretsError `ASP_SECRETS_INVALID_CONFIG` naming the key at fault.
 */
export function parseSecretsConfig(text: string): SecretsConfig {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    configError("is not valid JSON");
  }
  const isObject = (v: unknown): v is Record<string, unknown> =>
    typeof v === "object" && v !== null && !Array.isArray(v);
  if (!isObject(value)) configError("must be a JSON object");
  for (const key of Object.keys(value))
    if (key !== "allowlist" && key !== "documentedExamples" && key !== "$schema")
      configError(`unknown key "${key}"`, { key });
  const allow = value.allowlist ?? {};
  if (!isObject(allow)) configError("allowlist must be an object");
  for (const key of Object.keys(allow))
    if (key !== "paths" && key !== "fingerprints")
      configError(`allowlist has unknown key "${key}" (only paths and fingerprints: never write a secret here)`, {
        key,
      });
  const list = (v: unknown, key: string, ok: (s: string) => boolean): string[] => {
    if (v === undefined) return [];
    if (!Array.isArray(v)) configError(`allowlist.${key} must be an array of strings`, { key });
    return v.map((s, index) => {
      if (typeof s !== "string" || !ok(s)) configError(`allowlist.${key}[${index}] is not valid`, { key, index });
      return s;
    });
  };
  const paths = list(allow.paths, "paths", (s) => s !== "");
  globMatcher(paths, (glob) => configError("an allowlist path glob does not compile", { glob }));
  const fingerprints = list(allow.fingerprints, "fingerprints", (s) => FINGERPRINT.test(s));
  const documentedExamples = value.documentedExamples ?? true;
  if (typeof documentedExamples !== "boolean") configError("documentedExamples must be a boolean");
  return { allowlist: { paths, fingerprints }, documentedExamples };
}

/** The allowlist in force: the rule set's own, plus the repository's configuration when given. */
export function effectiveAllowlist(rules: RuleSet, config?: SecretsConfig): Allowlist {
  if (config === undefined) return compileAllowlist(rules.allowlist);
  return compileAllowlist(
    {
      paths: rules.allowlist.paths,
      fingerprints: rules.allowlist.fingerprints,
      values: config.documentedExamples ? rules.allowlist.values : [],
    },
    config.allowlist,
  );
}
