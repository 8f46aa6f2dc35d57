import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { APPLY_REJECTION_CODES } from "../src/index.js";

const doc = readFileSync(new URL("../../../docs/apply.md", import.meta.url), "utf8");

describe("docs/apply.md", () => {
  it.each(APPLY_REJECTION_CODES)("H10.4 documents %s", (code) => {
    expect(doc).toContain(`\`${code}\``);
  });

  it("documents the unknown-proposal error", () => {
    expect(doc).toContain("`ASP_APPLY_UNKNOWN_PROPOSAL`");
  });
});
