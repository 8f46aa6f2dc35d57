import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

// A generated, type-correct TypeScript project: CORE shared modules and a chain of feature
// modules importing them (and, in runs of ten, each other), shared by the `typescript` and
// `gate-tsc` suites so both measure the same kind of project.

/** Shared modules every feature imports. */
export const CORE = 10;
/** Feature modules of the full-size project (200 files with the core). */
export const FEATURES = 190;

/** The source of core module `i`. */
function coreModule(i: number): string {
  return `export interface Entity${i} {
  readonly id: string;
  readonly createdAt: Date;
  readonly tags: readonly string[];
  readonly score${i}: number;
}

export type Patch${i} = Partial<Omit<Entity${i}, "id">>;

export function make${i}(id: string, score: number): Entity${i} {
  return { id, createdAt: new Date(0), tags: [], score${i}: score };
}

export class Store${i}<T extends { readonly id: string }> {
  readonly #items = new Map<string, T>();
  put(item: T): this {
    this.#items.set(item.id, item);
    return this;
  }
  get(id: string): T | undefined {
    return this.#items.get(id);
  }
  where(predicate: (item: T) => boolean): T[] {
    return [...this.#items.values()].filter(predicate);
  }
}
`;
}

/** The source of feature module `i`; a different `edit` changes its content (still type-correct). */
export function featureModule(i: number, edit = 0): string {
  const a = i % CORE;
  const b = (i * 7 + 3) % CORE;
  const prev = i % 10 === 0 ? "" : `import { feature${i - 1} } from "./f${i - 1}.js";\n`;
  const chained = i % 10 === 0 ? "0" : `feature${i - 1}(input).total`;
  return `import { type Entity${a}, make${a}, Store${a} } from "../core/c${a}.js";
import { type Patch${b}, Store${b}, make${b} } from "../core/c${b}.js";
${prev}
export interface Result${i} {
  readonly total: number;
  readonly names: readonly string[];
  readonly patch: Patch${b};
}

const store${i} = new Store${a}<Entity${a}>();

export function feature${i}(input: readonly number[]): Result${i} {
  const items = input.map((n, k) => make${a}(\`f${i}-\${k}\`, n * ${edit + 1}));
  for (const item of items) store${i}.put(item);
  const kept = store${i}.where((e) => e.score${a} > 2);
  const other = new Store${b}<ReturnType<typeof make${b}>>().put(make${b}("x", ${chained}));
  const total = kept.reduce((sum, e) => sum + e.score${a}, 0) + (other.get("x")?.score${b} ?? 0);
  return { total, names: kept.map((e) => e.id.toUpperCase()), patch: { tags: ["f${i}"] } };
}

export const summary${i} = (r: Result${i}): string => \`\${r.names.length}:\${r.total.toFixed(2)}\`;
`;
}

/** Every file of the project by path (`package.json`, `tsconfig.json`, CORE + `features` modules). */
export function generateProject(features = FEATURES): Map<string, string> {
  const files = new Map<string, string>();
  files.set("package.json", `${JSON.stringify({ name: "bench-project", private: true, type: "module" })}\n`);
  files.set(
    "tsconfig.json",
    `${JSON.stringify(
      {
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
        },
        include: ["src"],
      },
      null,
      2,
    )}\n`,
  );
  for (let i = 0; i < CORE; i++) files.set(`src/core/c${i}.ts`, coreModule(i));
  for (let i = 0; i < features; i++) files.set(`src/features/f${i}.ts`, featureModule(i));
  return files;
}

/** Write `files` (path -> text) under `dir`. */
export function writeProject(dir: string, files: ReadonlyMap<string, string>): void {
  for (const [path, text] of files) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
}
