// Threat model invariant 9: untrusted text is data; it never drives a terminal. Providers,
// plugin folders and the candidate repository (file names, candidate policy) control much of
// what `asp` prints. Every human renderer passes each such field through `inert`, so an escape
// sequence, a carriage return or a newline inside one field cannot erase, recolour or forge a
// line of the host's output. `--json` output is unchanged: JSON.stringify escapes C0 itself.

const SHORT: Readonly<Record<number, string>> = { 10: "\\n", 13: "\\r", 9: "\\t" };

/**
 * True for code points a terminal may act on rather than print: C0 controls (ESC included),
 * DEL, C1 controls (0x80-0x9f, which some terminals read as CSI / OSC), the line and paragraph
 * separators, and the bidirectional controls that reorder what a reader sees.
 */
function isControl(cp: number): boolean {
  return (
    cp < 0x20 ||
    (cp >= 0x7f && cp <= 0x9f) ||
    cp === 0x061c ||
    cp === 0x200e ||
    cp === 0x200f ||
    cp === 0x2028 ||
    cp === 0x2029 ||
    (cp >= 0x202a && cp <= 0x202e) ||
    (cp >= 0x2066 && cp <= 0x2069)
  );
}

function visible(cp: number): string {
  const short = SHORT[cp];
  if (short !== undefined) return short;
  const hex = cp.toString(16);
  return cp <= 0xff ? `\\x${hex.padStart(2, "0")}` : `\\u{${hex}}`;
}

/**
 * Make one untrusted field safe to print on a terminal: every control code point is replaced by
 * its visible escape (`ESC` prints as the four characters `\x1b`, a newline as `\n`, a bidi
 * override as `\u{202e}`); everything else, backslashes included, is printed as is. Total: any
 * string gives a string with no C0/C1 control in it.
 * @example
 * ```ts
 * inert("\x1b[2K\rALLOW"); // "\\x1b[2K\\rALLOW"
 * ```
 */
export function inert(text: string): string {
  let out = "";
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const cp = text.charCodeAt(i);
    if (!isControl(cp)) continue;
    out += text.slice(start, i) + visible(cp);
    start = i + 1;
  }
  return start === 0 ? text : out + text.slice(start);
}
