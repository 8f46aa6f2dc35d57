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
