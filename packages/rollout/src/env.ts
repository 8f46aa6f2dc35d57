import { rolloutError } from "./errors.js";
import type { ValueLocation } from "./parse.js";

/** The contract's variable prefix. The contract names always work, with or without an alias. */
export const CONTRACT_ENV_PREFIX = "OPENAI4S_";

/** The environment as the caller passes it (the CLI passes `process.env`); never read from globals here. */
export type Environment = Readonly<Record<string, string | undefined>>;

const ALIAS_PREFIX = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_$/;

/**
 * Check a host alias prefix (`ASP_` makes `ASP_STAGE1_TRUSTED_DELIVERY` an alias of
 * `OPENAI4S_STAGE1_TRUSTED_DELIVERY`).
 *
 * @throws RolloutError `ASP_ROLLOUT_INVALID_OPTION` unless upper-case, ending in `_`, and not starting with `OPENAI4S_`.
 */
export function checkAliasPrefix(prefix: string | undefined): string | undefined {
  if (prefix === undefined) return undefined;
  if (!ALIAS_PREFIX.test(prefix) || prefix.startsWith(CONTRACT_ENV_PREFIX)) {
    throw rolloutError(
      "ASP_ROLLOUT_INVALID_OPTION",
      "aliasPrefix must be upper-case letters, digits and underscores, end with '_', and not start with OPENAI4S_",
      { key: "aliasPrefix", source: "options" },
    );
  }
  return prefix;
}

/**
 * The host alias of a contract variable: the alias prefix replaces `OPENAI4S_`.
 *
 * @example
 * ```ts
 * aliasOf("OPENAI4S_AUTO_WALL_TIME_S", "ASP_"); // "ASP_AUTO_WALL_TIME_S"
 * ```
 */
export function aliasOf(contractName: string, aliasPrefix: string): string {
  return aliasPrefix + contractName.slice(CONTRACT_ENV_PREFIX.length);
}

/** A variable read from the environment: the parsed value and the name it was read from. */
export interface EnvReading<T> {
  readonly value: T;
  readonly name: string;
}

/**
 * Read one contract variable and its alias (if an alias prefix is configured) and parse them.
 * Unset (`undefined`) means absent; any defined value, even `""`, is parsed.
 *
 * @throws RolloutError whatever `parse` throws; `ASP_ROLLOUT_ALIAS_CONFLICT` when both names are
 *   set and parse to different values.
 */
export function readEnvSetting<T>(
  env: Environment,
  contractName: string,
  aliasPrefix: string | undefined,
  parse: (raw: string, at: ValueLocation) => T,
): EnvReading<T> | undefined {
  const names = aliasPrefix === undefined ? [contractName] : [contractName, aliasOf(contractName, aliasPrefix)];
  const readings: EnvReading<T>[] = [];
  for (const name of names) {
    const raw = env[name];
    if (raw !== undefined) readings.push({ value: parse(raw, { key: name, source: "env" }), name });
  }
  const [first, second] = readings;
  if (first !== undefined && second !== undefined && !Object.is(first.value, second.value)) {
    throw rolloutError(
      "ASP_ROLLOUT_ALIAS_CONFLICT",
      `${first.name} and its alias ${second.name} are both set and disagree; set only one`,
      { key: first.name, source: "env" },
      { data: { alias: second.name } },
    );
  }
  return first;
}

/**
 * Refuse variables inside the contract's namespaces (`OPENAI4S_STAGE…`, `OPENAI4S_AUTO_…`, and
 * the same under the alias prefix) that name no known setting: a misspelled variable would
 * otherwise be silently ignored and leave a stage or budget at its default.
 *
 * @throws RolloutError `ASP_ROLLOUT_UNKNOWN_KEY` naming the first unknown variable (sorted by name).
 */
export function checkUnknownVariables(
  env: Environment,
  known: ReadonlySet<string>,
  aliasPrefix: string | undefined,
): void {
  const prefixes = [CONTRACT_ENV_PREFIX, ...(aliasPrefix === undefined ? [] : [aliasPrefix])].flatMap((p) => [
    `${p}STAGE`,
    `${p}AUTO_`,
  ]);
  const knownNames = new Set(known);
  if (aliasPrefix !== undefined) for (const name of known) knownNames.add(aliasOf(name, aliasPrefix));
  const unknown = Object.keys(env)
    .filter((name) => env[name] !== undefined && prefixes.some((p) => name.startsWith(p)) && !knownNames.has(name))
    .sort();
  const [first] = unknown;
  if (first !== undefined) {
    throw rolloutError(
      "ASP_ROLLOUT_UNKNOWN_KEY",
      `${first} is not a known Auto Mode variable; check its spelling against docs/configuration.md`,
      { key: first, source: "env" },
    );
  }
}
