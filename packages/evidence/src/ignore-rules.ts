import ignore, { type Ignore } from "ignore";

/** One `.gitignore` (or the host's excludes) and the directory its patterns are relative to. */
interface Level {
  readonly base: string;
  readonly rules: Ignore;
}

/** Parse gitignore text; case-sensitive, like git on Linux. */
export function parseIgnore(text: string | readonly string[]): Ignore {
  return ignore({ ignorecase: false }).add(typeof text === "string" ? text : [...text]);
}

/**
 * gitignore precedence as git applies it: the deepest `.gitignore` with a matching pattern
 * decides (a later `!pattern` re-includes). Host excludes sit above all of them: a repository's
 * `.gitignore` can never re-include what the host excluded.
 */
export class IgnoreRules {
  private constructor(
    private readonly host: Ignore | null,
    private readonly levels: readonly Level[],
  ) {}

  /** Rules with only the host's excludes (gitignore syntax, relative to the root). */
  static root(excludes: readonly string[]): IgnoreRules {
    return new IgnoreRules(excludes.length > 0 ? parseIgnore(excludes) : null, []);
  }

  /** These rules plus a `.gitignore` found in directory `base` ("" for the root). */
  with(base: string, text: string): IgnoreRules {
    return new IgnoreRules(this.host, [...this.levels, { base, rules: parseIgnore(text) }]);
  }

  /** Whether `path` (relative to the root) is excluded; directories are tested with a trailing slash. */
  ignores(path: string, isDir: boolean): boolean {
    const p = isDir ? `${path}/` : path;
    if (this.host?.ignores(p)) return true;
    for (let i = this.levels.length - 1; i >= 0; i--) {
      const level = this.levels[i] as Level;
      const r = level.rules.test(level.base === "" ? p : p.slice(level.base.length + 1));
      if (r.ignored) return true;
      if (r.unignored) return false;
    }
    return false;
  }
}
