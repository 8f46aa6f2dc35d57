// Repository bytes are untrusted: no encoding may hide a secret from the scan. Every blob is
// turned into text (UTF-8 when it is valid, else latin1 so that every byte stays one character),
// and encoded runs inside that text (UTF-16, base64, hex) are decoded into further views that
// the same rules scan. A hit in a view is reported at the span of the text it was decoded from.

/** How a blob's bytes were turned into the text the rules scan. */
export type TextEncoding = "utf-8" | "latin1";

/** How a view was decoded from the file's text. */
export type ViewEncoding = "utf-16le" | "utf-16be" | "base64" | "hex";

/** A blob as text: offsets in `text` are what findings point at. */
export interface DecodedText {
  readonly text: string;
  readonly encoding: TextEncoding;
}

/** A decoded view of part of the file: a hit anywhere in it is reported at `[start, end)`. */
export interface EncodedView {
  readonly text: string;
  readonly encoding: ViewEncoding;
  /** Span, in the file's text, of the encoded run this view was decoded from. */
  readonly start: number;
  readonly end: number;
}

/** Views decoded per file at most (each is scanned by every rule). */
export const MAX_VIEWS = 2000;

/** Encoded runs shorter than this are not decoded (shorter than the shortest token format). */
const MIN_BASE64 = 24;
const MIN_HEX = 32;
// Runs are bounded (a multiple of 4 and of 2, so a longer run splits at aligned offsets): an
// unbounded repetition over a multi-megabyte run overflows the regular-expression stack.
const BASE64_RUN = /[A-Za-z0-9+/_-]{24,65536}={0,2}/g;
const HEX_RUN = /(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){16,32768}/g;

/**
 * Decode a blob for scanning: UTF-8 when the bytes are valid UTF-8 (a leading BOM dropped),
 * otherwise latin1, which maps every byte to one character, so an ASCII token next to an invalid
 * byte or a NUL is still matched. Never throws.
 */
export function decodeBlob(bytes: Uint8Array): DecodedText {
  try {
    return { text: new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes), encoding: "utf-8" };
  } catch {
    return { text: new TextDecoder("latin1").decode(bytes), encoding: "latin1" };
  }
}

/** Share of characters that are printable ASCII or common whitespace. */
function printableShare(text: string): number {
  if (text.length === 0) return 0;
  let ok = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c >= 0x20 && c < 0x7f) || c === 0x09 || c === 0x0a || c === 0x0d) ok++;
  }
  return ok / text.length;
}

/** True when decoded bytes look like text worth scanning (not random key material). */
function looksLikeText(text: string): boolean {
  return printableShare(text) >= 0.9;
}

function latin1(bytes: Uint8Array): string {
  return new TextDecoder("latin1").decode(bytes);
}

function base64Bytes(run: string): Uint8Array | undefined {
  const body = run.replace(/=+$/, "");
  if (body.length < MIN_BASE64 || body.length % 4 === 1) return undefined;
  const urlSafe = /[-_]/.test(body);
  if (urlSafe && /[+/]/.test(body)) return undefined;
  return Buffer.from(body, urlSafe ? "base64url" : "base64");
}

/**
 * The UTF-16 views of a text that holds NUL bytes in alternating positions (a file saved as
 * UTF-16 without a BOM, or with one). Offsets map back by halving: character `i` of a view
 * comes from bytes `2i` and `2i + 1` of the file.
 */
function utf16Views(text: string): EncodedView[] {
  if (!text.includes("\u0000")) return [];
  const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0) & 0xff);
  const views: EncodedView[] = [];
  for (const [encoding, offset] of [
    ["utf-16le", 0],
    ["utf-16be", 1],
  ] as const) {
    // Keep the bytes of the half that carries the ASCII characters: for UTF-16LE of ASCII the
    // odd bytes are NUL. Reading every other byte tolerates odd lengths and stray bytes.
    let out = "";
    for (let i = offset; i < bytes.length; i += 2) out += String.fromCharCode(bytes[i] as number);
    const nulShare = (() => {
      let n = 0;
      let total = 0;
      for (let i = 1 - offset; i < bytes.length; i += 2, total++) if (bytes[i] === 0) n++;
      return total === 0 ? 0 : n / total;
    })();
    if (nulShare >= 0.5) views.push({ text: out, encoding, start: 0, end: text.length });
  }
  return views;
}

/**
 * Decoded views of the encoded runs inside `text`: base64 / base64url runs of at least 24
 * characters and hex runs of at least 32 digits that decode to mostly printable text, and UTF-16
 * views when the text holds NUL bytes. Views are decoded once more (a base64 of a base64), and
 * at most {@link MAX_VIEWS} are returned. Pure and total: any text gives a list.
 */
export function encodedViews(text: string): EncodedView[] {
  const views: EncodedView[] = [...utf16Views(text)];
  const queue: Array<{ text: string; start: number; end: number; depth: number }> = [
    { text, start: 0, end: text.length, depth: 0 },
    ...views.map((v) => ({ text: v.text, start: v.start, end: v.end, depth: 1 })),
  ];
  while (queue.length > 0 && views.length < MAX_VIEWS) {
    const source = queue.shift() as (typeof queue)[number];
    const inner = source.depth > 0;
    const push = (decoded: string, encoding: ViewEncoding, start: number, end: number): void => {
      if (!looksLikeText(decoded) || views.length >= MAX_VIEWS) return;
      // A hit in a nested view is reported at the span of the outermost run.
      const span = inner ? { start: source.start, end: source.end } : { start, end };
      views.push({ text: decoded, encoding, ...span });
      if (source.depth < 1) queue.push({ text: decoded, ...span, depth: source.depth + 1 });
    };
    for (const m of source.text.matchAll(BASE64_RUN)) {
      const bytes = base64Bytes(m[0]);
      if (bytes !== undefined) push(latin1(bytes), "base64", m.index, m.index + m[0].length);
    }
    for (const m of source.text.matchAll(HEX_RUN)) {
      if (m[0].length < MIN_HEX) continue;
      push(latin1(Buffer.from(m[0], "hex")), "hex", m.index, m.index + m[0].length);
    }
  }
  return views;
}
