import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { API_KEY_MARKER, createScrubber, StreamScrubber } from "../src/scrub.js";
import { SseDecoder } from "../src/sse.js";

const enc = new TextEncoder();

/** Decode `bytes` delivered in the pieces `cuts` makes. */
function decodeIn(bytes: Uint8Array, cuts: readonly number[]): string[] {
  const d = new SseDecoder();
  const at = [0, ...[...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b), bytes.length];
  const out: string[] = [];
  for (let i = 1; i < at.length; i++) out.push(...d.push(bytes.slice(at[i - 1], at[i])));
  out.push(...d.end());
  return out;
}

describe("SseDecoder", () => {
  it("reads data lines, joins multi-line data, ignores comments and other fields, takes any line ending", () => {
    const body =
      ': keep-alive\r\nevent: message\ndata: {"a":1}\n\nid: 7\rdata: line one\rdata:line two\r\rdata: [DONE]\r\n\r\n';
    expect(decodeIn(enc.encode(body), [])).toEqual(['{"a":1}', "line one\nline two", "[DONE]"]);
  });

  it("takes a last event without its blank line", () => {
    expect(decodeIn(enc.encode("data: last"), [])).toEqual(["last"]);
  });

  it("refuses bytes that are not UTF-8 (ASP_ENGINE_OPENAI_MALFORMED_STREAM)", () => {
    const d = new SseDecoder();
    expect(() => d.push(new Uint8Array([0x64, 0xff]))).toThrowWithCode("ASP_ENGINE_OPENAI_MALFORMED_STREAM");
    const t = new SseDecoder();
    t.push(new Uint8Array([0x64, 0x61, 0x74, 0x61, 0x3a, 0xe2, 0x82]));
    expect(() => t.end()).toThrowWithCode("ASP_ENGINE_OPENAI_MALFORMED_STREAM");
  });

  it("gives the same events however the bytes are split (a CRLF, a character included)", () => {
    const event = fc.record({
      data: fc.array(
        fc.string({ unit: "grapheme", maxLength: 12 }).map((s) => s.replace(/[\r\n]/g, "")),
        {
          minLength: 1,
          maxLength: 3,
        },
      ),
      eol: fc.constantFrom("\n", "\r\n", "\r"),
      comment: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(event, { maxLength: 6 }), fc.array(fc.nat(), { maxLength: 8 }), (events, cuts) => {
        const body = events
          .map((e) => `${e.comment ? `: note${e.eol}` : ""}${e.data.map((l) => `data: ${l}${e.eol}`).join("")}${e.eol}`)
          .join("");
        const expected = events.map((e) => e.data.join("\n"));
        expect(decodeIn(enc.encode(body), cuts)).toEqual(expected);
      }),
    );
  });
});

describe("StreamScrubber", () => {
  const KEY = "sk-proj_T3st/Key+9f8e=7d6c5b4a39281706";

  it("shows text at once when no tail can start the key", () => {
    const s = new StreamScrubber(createScrubber([KEY]));
    expect(s.push("Hello, ")).toBe("Hello, ");
    expect(s.push("world")).toBe("world");
    expect(s.flush()).toBe("");
  });

  it("holds back a tail that could start the key, and releases it once it cannot", () => {
    const s = new StreamScrubber(createScrubber([KEY]));
    expect(s.push("token sk-pr")).toBe("token ");
    expect(s.push("ize")).toBe("sk-prize");
  });

  it("scrubs the key however the text around it is split, and shows the rest unchanged", () => {
    const scrubber = createScrubber([KEY]);
    fc.assert(
      fc.property(
        fc.string({ maxLength: 30 }),
        fc.string({ maxLength: 30 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (before, after, cuts) => {
          const text = `${before}${KEY}${after}`;
          const at = [0, ...[...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b), text.length];
          const s = new StreamScrubber(scrubber);
          let shown = "";
          for (let i = 1; i < at.length; i++) shown += s.push(text.slice(at[i - 1], at[i]));
          shown += s.flush();
          expect(shown).not.toContain(KEY);
          expect(shown).toBe(scrubber.scrub(text));
          expect(shown).toContain(API_KEY_MARKER);
        },
      ),
    );
  });

  it("never shows an encoded key either, with text made of the key's own characters around it", () => {
    const scrubber = createScrubber([KEY]);
    const bytes = Buffer.from(KEY, "utf8");
    const encodings = [
      bytes.toString("base64"),
      bytes.toString("base64url"),
      bytes.toString("hex"),
      bytes.toString("hex").toUpperCase(),
      encodeURIComponent(KEY),
      [...KEY].reverse().join(""),
    ];
    // Noise from the key's alphabet makes near-spellings and prefixes of every form.
    const noise = fc.string({ unit: fc.constantFrom(...new Set([...KEY, ...encodings.join("")])), maxLength: 40 });
    fc.assert(
      fc.property(
        noise,
        fc.constantFrom(...encodings),
        noise,
        fc.array(fc.nat(), { maxLength: 8 }),
        (a, form, b, cuts) => {
          const text = `${a}${form}${b}`;
          const at = [0, ...[...new Set(cuts.map((c) => c % (text.length + 1)))].sort((x, y) => x - y), text.length];
          const s = new StreamScrubber(scrubber);
          let shown = "";
          for (let i = 1; i < at.length; i++) shown += s.push(text.slice(at[i - 1], at[i]));
          shown += s.flush();
          expect(scrubber.holds(shown)).toBe(false);
          expect(shown).toBe(scrubber.scrub(text));
        },
      ),
      { numRuns: 300 },
    );
  });
});
