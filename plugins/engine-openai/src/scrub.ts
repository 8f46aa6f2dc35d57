import { Buffer } from "node:buffer";

// The key scrub of `@asp/verifier-openai` (same spellings, same marker), with one addition a
// stream needs: a stream scrubber that holds back the tail of the text that could still become a
// spelling of the key, so a key split across two chunks is never emitted in two halves.

/** What an echoed API key is replaced with, in every step's text and arguments. */
export const API_KEY_MARKER = "[redacted:api-key]";

/** Shorter encodings would redact ordinary text; the raw secret is always scrubbed, whatever its length. */
const MIN_FORM = 4;
/** Passes until no form is left (a replacement can join the text around it into a new form). */
const MAX_PASSES = 4;

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The stretch of base64 (or base64url) text that only the secret's bytes determine, at each of
 * the three byte alignments: the secret's encoding inside any longer base64 text (`Bearer <key>`,
 * a header dump) contains one of them, whatever precedes it.
 */
function base64Cores(bytes: Buffer): string[] {
  const out: string[] = [];
  for (let pad = 0; pad < 3; pad++) {
    const padded = Buffer.concat([Buffer.alloc(pad), bytes]);
    const from = Math.ceil((pad * 8) / 6);
    const to = Math.floor((padded.length * 8) / 6);
    for (const encoding of ["base64", "base64url"] as const) out.push(padded.toString(encoding).slice(from, to));
  }
  return out;
}

/** How one secret can be spelled: exact forms, and forms whose letters' case is free. */
function formsOf(secret: string): { exact: string[]; anyCase: string[] } {
  const bytes = Buffer.from(secret, "utf8");
  const exact = [
    secret,
    JSON.stringify(secret).slice(1, -1),
    encodeURIComponent(secret),
    encodeURI(secret),
    [...secret].reverse().join(""),
    // The whole encodings first (longest wins), so no stray last character is left beside the marker.
    bytes.toString("base64"),
    bytes.toString("base64url"),
    ...base64Cores(bytes),
  ];
  const anyCase = [bytes.toString("hex"), [...bytes].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("")];
  const keep = (f: string): boolean => f === secret || f.length >= MIN_FORM;
  return { exact: [...new Set(exact)].filter(keep), anyCase: [...new Set(anyCase)].filter(keep) };
}

function alternation(forms: readonly string[], flags: string): RegExp | null {
  if (forms.length === 0) return null;
  // Longest first, so a longer spelling is replaced whole before a shorter one inside it.
  return new RegExp(
    [...forms]
      .sort((a, b) => b.length - a.length)
      .map(escapeRegExp)
      .join("|"),
    flags,
  );
}

/** A string scrubber for some secrets. */
export interface Scrubber {
  /** `text` with every spelling of a secret replaced by {@link API_KEY_MARKER}. */
  scrub(text: string): string;
  /** True when some spelling of a secret is in `text`. */
  holds(text: string): boolean;
  /**
   * The length of the longest tail of `text` that is the start of a spelling of a secret (and
   * not a whole one): what a stream must hold back until more text shows what it is.
   */
  pendingTail(text: string): number;
  /** Where spellings of a secret are in `text`: `[start, end)` of each, by start. */
  matches(text: string): Array<readonly [number, number]>;
}

/**
 * A scrubber for `secrets` (the API key): raw, JSON-escaped, percent-encoded (`encodeURIComponent`,
 * `encodeURI`, every byte as `%XX` in either case), hex in either case, base64 and base64url at
 * every alignment, and reversed, each replaced with {@link API_KEY_MARKER}.
 */
export function createScrubber(secrets: readonly string[]): Scrubber {
  const exact: string[] = [];
  const anyCase: string[] = [];
  for (const s of secrets) {
    if (s === "") continue;
    const f = formsOf(s);
    exact.push(...f.exact);
    anyCase.push(...f.anyCase);
  }
  const lowered = anyCase.map((f) => f.toLowerCase());
  const patterns = [alternation(exact, "g"), alternation(anyCase, "gi")].filter((p): p is RegExp => p !== null);
  const holds = (text: string): boolean =>
    patterns.some((p) => {
      p.lastIndex = 0;
      return p.test(text);
    });
  /** The longest k < form.length with `text` ending in form's first k characters. */
  const tailOf = (text: string, form: string): number => {
    for (let k = Math.min(form.length - 1, text.length); k > 0; k--) {
      if (text.endsWith(form.slice(0, k))) return k;
    }
    return 0;
  };
  return {
    holds,
    scrub(text) {
      let out = text;
      for (let pass = 0; pass < MAX_PASSES && holds(out); pass++) {
        for (const p of patterns) out = out.replace(p, API_KEY_MARKER);
      }
      return out;
    },
    matches(text) {
      const out: Array<readonly [number, number]> = [];
      for (const p of patterns) {
        p.lastIndex = 0;
        for (let m = p.exec(text); m !== null; m = p.exec(text)) {
          out.push([m.index, m.index + m[0].length]);
          if (m[0].length === 0) p.lastIndex++;
        }
      }
      return out.sort((a, b) => a[0] - b[0]);
    },
    pendingTail(text) {
      let longest = 0;
      for (const f of exact) longest = Math.max(longest, tailOf(text, f));
      const low = text.toLowerCase();
      for (const f of lowered) longest = Math.max(longest, tailOf(low, f));
      return longest;
    },
  };
}

/** `value` (parsed JSON) with every string, object keys included, scrubbed. */
export function scrubJson(value: unknown, scrubber: Scrubber): unknown {
  if (typeof value === "string") return scrubber.scrub(value);
  if (Array.isArray(value)) return value.map((v) => scrubJson(v, scrubber));
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      // defineProperty: a `__proto__` key stays a plain own property, as JSON.parse made it.
      Object.defineProperty(out, scrubber.scrub(k), {
        value: scrubJson(v, scrubber),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}

/** True when some string of `value` (object keys included) still holds a form of a secret. */
export function jsonHolds(value: unknown, scrubber: Scrubber): boolean {
  if (typeof value === "string") return scrubber.holds(value);
  if (Array.isArray(value)) return value.some((v) => jsonHolds(v, scrubber));
  if (typeof value === "object" && value !== null) {
    return Object.entries(value).some(([k, v]) => scrubber.holds(k) || jsonHolds(v, scrubber));
  }
  return false;
}

/**
 * Scrubs text that arrives in pieces: `push` returns what can be shown now (scrubbed), holding
 * back a tail that could still turn into a spelling of a secret; `flush` returns the rest.
 */
export class StreamScrubber {
  #pending = "";

  constructor(private readonly scrubber: Scrubber) {}

  /** The scrubbed text that is safe to show after `piece` arrived (may be empty). */
  push(piece: string): string {
    this.#pending += piece;
    let cut = this.#pending.length - this.scrubber.pendingTail(this.#pending);
    // Never cut through a whole spelling (held halves would each pass the scrub): show it, scrubbed.
    for (const [start, end] of this.scrubber.matches(this.#pending)) {
      if (start < cut && cut < end) cut = end;
    }
    const ready = this.#pending.slice(0, cut);
    this.#pending = this.#pending.slice(cut);
    return this.scrubber.scrub(ready);
  }

  /** Whatever is still held back, scrubbed: the stream ended. */
  flush(): string {
    const rest = this.#pending;
    this.#pending = "";
    return this.scrubber.scrub(rest);
  }
}
