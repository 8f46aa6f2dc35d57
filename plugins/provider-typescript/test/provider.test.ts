import { describe, expect, it } from "vitest";
import { parseProviderArgs } from "../src/index.js";

describe("parseProviderArgs", () => {
  it.each([
    [[], {}],
    [["--project", "app/tsconfig.json"], { project: "app/tsconfig.json" }],
    [
      ["--scope", "all", "--max-diagnostics", "50", "--lib-dir", "/opt/lib"],
      { scope: "all", maxDiagnostics: 50, libDir: "/opt/lib" },
    ],
    // node:util parseArgs: the inline form is the same option.
    [["--project=app/tsconfig.json", "--scope=changed"], { project: "app/tsconfig.json", scope: "changed" }],
  ])("parses %j", (argv, options) => {
    expect(parseProviderArgs(argv)).toEqual(options);
  });
  it.each([
    [["--scope", "everything"]],
    [["--project"]],
    [["--project", "--scope"]],
    [["--verbose"]],
    [["stray-positional"]],
    [["--max-diagnostics", "12abc"]],
    [["--max-diagnostics", "-1"]],
  ])("refuses %j", (argv) => {
    expect(() => parseProviderArgs(argv)).toThrowWithCode("ASP_TS_BAD_OPTIONS");
  });
});
