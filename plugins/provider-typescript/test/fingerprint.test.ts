import { describe, expect, it } from "vitest";
import { fingerprintDiagnostic, normalizeText } from "../src/index.js";

const base = { code: "ts/2322", path: "src/a.ts", text: 'const n: number = "x";', occurrence: 0 };

describe("fingerprintDiagnostic", () => {
  it("is a versioned sha256", () => {
    expect(fingerprintDiagnostic(base)).toMatch(/^ts1:[0-9a-f]{64}$/);
  });
  it("ignores whitespace differences in the offending text", () => {
    expect(fingerprintDiagnostic({ ...base, text: '   const  n: number =\t"x";  ' })).toBe(fingerprintDiagnostic(base));
  });
  it.each([
    ["code", { code: "ts/2345" }],
    ["path", { path: "src/b.ts" }],
    ["text", { text: 'const m: number = "x";' }],
    ["occurrence", { occurrence: 1 }],
    ["a global diagnostic", { path: null }],
  ])("changes with the %s", (_what, change) => {
    expect(fingerprintDiagnostic({ ...base, ...change })).not.toBe(fingerprintDiagnostic(base));
  });
  it("cannot be forged by moving text between fields", () => {
    expect(fingerprintDiagnostic({ ...base, path: "src/a.ts\n", text: "x" })).not.toBe(
      fingerprintDiagnostic({ ...base, path: "src/a.ts", text: "\nx" }),
    );
  });
});

describe("normalizeText", () => {
  it("collapses whitespace runs and trims", () => {
    expect(normalizeText("  a \t b\n\nc  ")).toBe("a b c");
  });
});
