/**
 * JSON text checks that `JSON.parse` cannot make: it keeps the last of two equal keys silently,
 * so a trusted document whose reader saw the first value would be read as the second.
 */

/** RFC 6901 pointer of a path of keys and indexes. */
function pointerOf(path: ReadonlyArray<string | number>): string {
  return path.map((t) => `/${String(t).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

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
 *
 * @throws RangeError when `text` nests deeper than 512 levels.
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
        if (keys.has(key)) found.push({ pointer: pointerOf(path), key });
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
