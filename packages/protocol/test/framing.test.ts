import { describe, expect, it } from "vitest";
import { FrameGuard, type FrameViolation } from "../src/framing.js";

function run(max: number, chunks: Buffer[]): { out: string; violations: FrameViolation[] } {
  const violations: FrameViolation[] = [];
  const guard = new FrameGuard(max, (v) => violations.push(v));
  const out: Buffer[] = [];
  guard.on("data", (b: Buffer) => out.push(b));
  for (const c of chunks) guard.write(c);
  return { out: Buffer.concat(out).toString("utf8"), violations };
}

const frame = (body: string): string => `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

describe("FrameGuard", () => {
  it("passes well-framed messages through unchanged, split at any byte", async () => {
    const text = frame('{"a":1}') + frame('{"b":"é"}');
    const bytes = Buffer.from(text);
    const chunks = [...bytes].map((b) => Buffer.from([b]));
    const r = run(1024, chunks);
    await new Promise((r) => setImmediate(r));
    expect(r.out).toBe(text);
    expect(r.violations).toEqual([]);
  });

  it("H8.4 skips an oversize body unparsed, reports its size, and keeps the stream in sync (host §8)", async () => {
    const big = "x".repeat(100);
    const r = run(50, [Buffer.from(frame(big) + frame('{"ok":true}'))]);
    await new Promise((r) => setImmediate(r));
    expect(r.violations).toEqual([{ kind: "oversize", bytes: 100 }]);
    expect(r.out).toBe(frame('{"ok":true}'));
  });

  it.each([
    ["no Content-Length", "X-Other: 1\r\n\r\n{}"],
    ["a bad Content-Length", "Content-Length: ten\r\n\r\n{}"],
    ["garbage without a header", "hello world\r\n\r\n"],
  ])("stops on %s", async (_what, text) => {
    const r = run(1024, [Buffer.from(text)]);
    await new Promise((r) => setImmediate(r));
    expect(r.violations[0]?.kind).toBe("framing");
    expect(r.out).toBe("");
  });
});
