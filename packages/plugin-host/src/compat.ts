import { PROTOCOL_VERSION } from "@asp/contracts";

type Version = [number, number, number];

function parse(v: string): Version | null {
  const m = /^v?(\d+)(?:\.(\d+|x|\*))?(?:\.(\d+|x|\*))?$/.exec(v.trim());
  if (m === null) return null;
  const n = (s: string | undefined): number => (s === undefined || s === "x" || s === "*" ? 0 : Number(s));
  return [n(m[1]), n(m[2]), n(m[3])];
}

const cmp = (a: Version, b: Version): number => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

function satisfiesOne(version: Version, comparator: string): boolean | null {
  if (comparator === "*" || comparator === "x" || comparator === "") return true;
  const m = /^(>=|<=|>|<|=|\^|~)?\s*(.+)$/.exec(comparator);
  if (m === null) return null;
  const op = m[1] ?? "=";
  const raw = m[2] as string;
  const target = parse(raw);
  if (target === null) return null;
  const parts = raw.replace(/^v/, "").split(".");
  const c = cmp(version, target);
  switch (op) {
    case ">=":
      return c >= 0;
    case ">":
      return c > 0;
    case "<=":
      return c <= 0;
    case "<":
      return c < 0;
    case "^":
      return c >= 0 && (target[0] > 0 ? version[0] === target[0] : version[0] === 0 && version[1] === target[1]);
    case "~":
      return c >= 0 && version[0] === target[0] && version[1] === target[1];
    default: {
      // Bare or "=": partial versions ("20", "20.x") match every version under them.
      const precise = parts.filter((p) => p !== "x" && p !== "*").length;
      return version.slice(0, precise).every((n, i) => n === target[i]);
    }
  }
}

/**
 * True when `version` (e.g. `process.version`) satisfies the npm-style `range` of a manifest's
 * `engines.node`: `>=`, `>`, `<=`, `<`, `=`, `^`, `~`, `x` wildcards, spaces (and) and `||` (or).
 * A range it cannot parse is not satisfied: a plugin that cannot prove compatibility is refused.
 */
export function satisfiesNodeRange(version: string, range: string): boolean {
  const v = parse(version.replace(/^v/, "").split("-")[0] ?? "");
  if (v === null) return false;
  return range.split("||").some((alt) => {
    const comparators = alt
      .trim()
      .replace(/(>=|<=|>|<|=|\^|~)\s+/g, "$1")
      .split(/\s+/)
      .filter((s) => s !== "");
    if (comparators.length === 0) return true;
    return comparators.every((c) => satisfiesOne(v, c) === true);
  });
}

/** True when a provider's protocol version has the host's major version. */
export function protocolCompatible(version: string): boolean {
  return version.split(".")[0] === PROTOCOL_VERSION.split(".")[0];
}
