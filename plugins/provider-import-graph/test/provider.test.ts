import { describe, expect, it } from "vitest";
import { parseProviderArgs } from "../src/index.js";

describe("parseProviderArgs", () => {
  it.each([
    [[], { check: false }],
    [["--check"], { check: true }],
  ])("parses %j", (argv, options) => {
    expect(parseProviderArgs(argv)).toEqual(options);
  });
  it.each([[["--verbose"]], [["--check", "extra"]], [["--check=yes"]]])("refuses %j", (argv) => {
    expect(() => parseProviderArgs(argv)).toThrowWithCode("ASP_IMPORTS_BAD_OPTIONS");
  });
});
