/** RFC 6901 pointer of a path of keys and indexes; `""` is the whole document. */
export function toPointer(path: ReadonlyArray<string | number>): string {
  let out = "";
  for (const token of path) out += `/${String(token).replaceAll("~", "~0").replaceAll("/", "~1")}`;
  return out;
}

/** The tokens of an RFC 6901 pointer. */
export function fromPointer(pointer: string): string[] {
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((t) => t.replaceAll("~1", "/").replaceAll("~0", "~"));
}

/** The value at `pointer` inside `root`, or `undefined`. */
export function valueAt(root: unknown, pointer: string): unknown {
  let node = root;
  for (const token of fromPointer(pointer)) {
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<string, unknown>)[token];
  }
  return node;
}

/** Freeze a JSON value and everything inside it. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Readonly all the way down: what a frozen, activated policy document is typed as. */
export type DeepReadonly<T> =
  T extends ReadonlyArray<infer U>
    ? ReadonlyArray<DeepReadonly<U>>
    : T extends object
      ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
      : T;

/** A duplicate object key found in JSON text. */
export interface DuplicateKey {
  /** Pointer of the duplicated member (the second occurrence). */
  readonly pointer: string;
  readonly key: string;
}

/**
 * Every object key that occurs twice in the same object of `text`, which must already be valid
 * JSON (`JSON.parse` keeps the last value silently; a reviewer reading the file may see the
 * first). A small scanner rather than a parser: it only tracks keys and positions.
 */
export function findDuplicateKeys(text: string): DuplicateKey[] {
  const found: DuplicateKey[] = [];
  const path: Array<string | number> = [];
  let i = 0;
  const ws = (): void => {
    while (i < text.length && (text[i] === " " || text[i] === "\n" || text[i] === "\r" || text[i] === "\t")) i++;
  };
  const str = (): string => {
    const start = i;
    i++; // opening quote
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++; // closing quote
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (depth: number): void => {
    if (depth > 512) throw new RangeError("nesting deeper than 512");
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const keys = new Set<string>();
      ws();
      if (text[i] === "}") {
        i++;
        return;
      }
      for (;;) {
        ws();
        const key = str();
        ws();
        i++; // colon
        path.push(key);
        if (keys.has(key)) found.push({ pointer: toPointer(path), key });
        keys.add(key);
        value(depth + 1);
        path.pop();
        ws();
        if (text[i++] === "}") return;
      }
    }
    if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") {
        i++;
        return;
      }
      for (let index = 0; ; index++) {
        path.push(index);
        value(depth + 1);
        path.pop();
        ws();
        if (text[i++] === "]") return;
      }
    }
    if (c === '"') {
      str();
      return;
    }
    while (i < text.length && !",}] \n\r\t".includes(text[i] as string)) i++;
  };
  value(0);
  return found;
}
