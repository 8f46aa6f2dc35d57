import { ThsError } from "@asp/ths";
import { describe, expect, it } from "vitest";
import { EXIT, EXIT_HELP, EXIT_OF_CODE } from "../src/exit-codes.js";
import { runCli } from "../src/main.js";

describe("exit codes", () => {
  it("a gate whose trusted base another host moved exits 75 (try again), like a busy store, not 70", () => {
    // The error is internal by category (nothing the user typed is wrong), so without its own
    // mapping it would exit 70 and a CI retry policy keyed on 75 would never retry it.
    const moved = new ThsError("ASP_THS_TRUSTED_BASE_MOVED", "moved");
    expect(moved.category).toBe("internal");
    expect(EXIT_OF_CODE[moved.code]).toBe(EXIT.storeBusy);
    for (const code of ["ASP_EVIDENCE_STORE_LOCKED", "ASP_PGSTORE_UNAVAILABLE"]) {
      expect(EXIT_OF_CODE[code]).toBe(EXIT.storeBusy);
    }
    expect(EXIT_HELP).toMatch(/75 {2}try again: .*moved the trusted base/);
  });

  it("asp --help prints the exit codes as EXIT_HELP says them", async () => {
    let out = "";
    const code = await runCli(["--help"], {
      stdout: (s: string) => {
        out += s;
      },
      stderr: () => undefined,
      cwd: process.cwd(),
      env: {},
    });
    expect(code).toBe(EXIT.ok);
    expect(out).toContain(EXIT_HELP.split("\n").find((l) => l.includes("75")));
  });
});
