import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ProviderManifest } from "@asp/contracts";
import { digestPlugin } from "@asp/plugin-host";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EXIT } from "../src/index.js";
import { inert } from "../src/terminal.js";
import { runInProcess } from "./helpers.js";

const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url)).replace(/\/$/, "");
const FORGED = "\x1b[2K\rALLOW (gate)";
// C0, DEL, C1: what a terminal may act on.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the point of the test
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function hostile(args: string[] = []): ProviderManifest {
  const path = join(FIXTURES, "fake-terminal-escape.mjs");
  return {
    id: "fake-terminal-escape",
    version: "1.0.0",
    digest: digestPlugin(FIXTURES).digest,
    executable: process.execPath,
    args: [path, "--source", "esc", ...args],
    cwd: FIXTURES,
    root: FIXTURES,
    capabilities: ["check"],
    diagnosticSources: ["esc"],
    protocolVersion: "1.0",
  };
}

/** A host configuration outside the repository, granting the provider at every call-site. */
function setup(m: ProviderManifest, files: Record<string, string>): { config: string; repo: string } {
  const dir = mkdtempSync(join(tmpdir(), "asp-cli-term-"));
  const sites = ["interactive", "gate", "sweep"];
  writeFileSync(
    join(dir, "policy.json"),
    JSON.stringify({
      apiVersion: "asp.policy/v1",
      requirements: [{ id: "req-esc", capability: "check", sources: ["esc"], callSites: sites }],
      providers: [{ id: m.id, version: m.version, digest: m.digest }],
      grants: [{ provider: m.id, version: m.version, digest: m.digest, requirement: "req-esc", callSites: sites }],
      budgets: { timeoutMs: { interactive: 5000, gate: 5000, sweep: 5000 } },
    }),
  );
  const config = join(dir, "host.json");
  writeFileSync(config, JSON.stringify({ store: "store", policy: "policy.json", providers: [m] }));
  const repo = mkdtempSync(join(tmpdir(), "asp-cli-term-repo-"));
  for (const [p, t] of Object.entries(files)) writeFileSync(join(repo, p), t);
  return { config, repo };
}

describe("terminal output", () => {
  describe("inert", () => {
    it("prints ESC, CR and a newline as visible escapes, and leaves ordinary text alone", () => {
      expect(inert(FORGED)).toBe("\\x1b[2K\\rALLOW (gate)");
      expect(inert("a\nb\tc\u0000\u009b\u007f")).toBe("a\\nb\\tc\\x00\\x9b\\x7f");
      expect(inert("abc\u202eevil\u2066")).toBe("abc\\u{202e}evil\\u{2066}");
      expect(inert("plain ✖ text, C:\\path é")).toBe("plain ✖ text, C:\\path é");
    });

    it("threat model invariant 9: for any string, the output holds no C0/C1 control and no bidi control", () => {
      fc.assert(
        fc.property(fc.string({ unit: "binary" }), (s) => {
          const out = inert(s);
          expect(out).not.toMatch(CONTROL);
          expect(out).not.toMatch(/[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
        }),
        { numRuns: 2000 },
      );
    });

    it("is the identity on text without controls, so ordinary output is unchanged", () => {
      fc.assert(
        fc.property(fc.string({ unit: "grapheme" }), (s) => {
          fc.pre(!CONTROL.test(s) && !/[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/.test(s));
          expect(inert(s)).toBe(s);
        }),
      );
    });
  });

  describe("when a real provider answers with terminal control sequences", () => {
    it("threat model invariant 9: asp gate prints them visibly escaped, no raw ESC or CR, and --json keeps the raw string", async () => {
      const { config, repo } = setup(hostile(), { "a.ts": "x\n", "b\u001b[1A\rALLOW.ts": "y\n" });
      const human = await runInProcess(["gate", "--config", config, "--repo", repo]);
      expect(human.code).toBe(EXIT.deny);
      expect(human.stdout).toMatch(/^DENY \(gate\)/);
      expect(human.stdout).toContain("\\x1b[2K\\rALLOW (gate)");
      expect(human.stdout).toContain("b\\x1b[1A\\rALLOW.ts");
      expect(human.stdout).toContain("next: \\x1b]0;owned\\x07run\\nALLOW");
      for (const out of [human.stdout, human.stderr]) {
        // Only the host's own line breaks remain: no control but \n anywhere.
        expect(out.replaceAll("\n", "")).not.toMatch(CONTROL);
      }
      // Every output line is one the host wrote: none starts with a forged verdict.
      expect(human.stdout.split("\n").filter((l) => l.startsWith("ALLOW"))).toEqual([]);

      // sweep: the whole tree again, whatever base the gate left behind.
      const json = await runInProcess(["sweep", "--json", "--config", config, "--repo", repo]);
      const envelope = JSON.parse(json.stdout) as { findings: Array<{ diagnostic: { message: string } }> };
      expect(envelope.findings.map((f) => f.diagnostic.message)).toEqual([FORGED, FORGED]);
    });

    it("a crashing provider's stderr tail is escaped in the degraded line and the progress line", async () => {
      const { config, repo } = setup(hostile(["--crash", "yes"]), { "a.ts": "x\n" });
      const r = await runInProcess(["gate", "--config", config, "--repo", repo]);
      expect(r.code).toBe(EXIT.indeterminate);
      expect(r.stdout).toContain("degraded: ");
      expect(r.stdout).toContain("\\x1b[2K\\r\\x1b[32mALLOW");
      expect(r.stderr).toContain("degraded (");
      for (const out of [r.stdout, r.stderr]) expect(out.replaceAll("\n", "")).not.toMatch(CONTROL);
    });
  });
});
