import { resolveRelative } from "@asp/sdk";
/** Normalize a `/`-separated relative path (`.` and `..` segments); `null` when it leaves the root. */
export function normalizePath(path: string): string | null {
  return resolveRelative("", path);
}

const dirOf = (path: string): string => {
  const i = path.lastIndexOf("/");
  return i < 0 ? "" : path.slice(0, i);
};

const TS_FOR_JS: Readonly<Record<string, readonly string[]>> = {
  ".js": [".ts", ".tsx", ".d.ts", ".js", ".jsx"],
  ".jsx": [".tsx", ".jsx", ".d.ts"],
  ".mjs": [".mts", ".d.mts", ".mjs"],
  ".cjs": [".cts", ".d.cts", ".cjs"],
};
const EXTENSIONS = [".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mts", ".cts", ".mjs", ".cjs"];

/**
 * Resolve an import specifier of `from` against the files of the tree, the way TypeScript's
 * resolution finds repository files:
 *
 * - relative only (`./`, `../`); a bare specifier is an external package (`"external"`),
 * - a `.js` / `.jsx` / `.mjs` / `.cjs` suffix maps to the TypeScript source first
 *   (`./a.js` -> `a.ts`, `a.tsx`, `a.d.ts`, then `a.js`),
 * - then the exact path, the path plus each extension, and `index` plus each extension in the folder.
 *
 * Returns the resolved path, `"external"`, or `null` when a relative specifier matches no file.
 *
 * @example
 * ```ts
 * resolveImport("src/index.ts", "./math.js", new Set(["src/math.ts"])); // "src/math.ts"
 * ```
 */
export function resolveImport(from: string, specifier: string, files: ReadonlySet<string>): string | "external" | null {
  if (!specifier.startsWith("./") && !specifier.startsWith("../") && specifier !== "." && specifier !== "..") {
    return "external";
  }
  const base = normalizePath(`${dirOf(from)}/${specifier}`);
  if (base === null) return null;
  const candidates: string[] = [];
  const ext = /\.[mc]?jsx?$/.exec(base)?.[0];
  if (ext !== undefined) {
    const stem = base.slice(0, -ext.length);
    for (const e of TS_FOR_JS[ext] ?? []) candidates.push(stem + e);
  }
  if (base !== "") {
    candidates.push(base);
    for (const e of EXTENSIONS) candidates.push(base + e);
  }
  for (const e of EXTENSIONS) candidates.push(base === "" ? `index${e}` : `${base}/index${e}`);
  for (const c of candidates) if (files.has(c)) return c;
  return null;
}
