import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./lib/workspace.js";

// The README's second command: `pnpm demo` shows a change denied with its next step, then allowed
// after the fix, with the real signed example plugins under the real CLI (issue 17, "Done when").
describe("pnpm demo", () => {
  it("H1b.5 H1b.6 denies the change with a next step per finding, then allows the fix", () => {
    const r = spawnSync(process.execPath, [join(ROOT, "scripts/demo.mjs")], { encoding: "utf8", timeout: 240_000 });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    const [denied = "", allowed = ""] = r.stdout.split("=== 2.");
    expect(denied).toMatch(/^DENY \(gate\)/m);
    expect(denied).toMatch(/secrets\/aws-access-key-id[\s\S]*next: \S/);
    expect(denied).toMatch(/ts\/2322[\s\S]*next: \S/);
    expect(allowed).toMatch(/^ALLOW \(gate\)/m);
    expect(r.stdout).toContain("demo: change DENIED (exit 1), fix ALLOWED (exit 0)");
  }, 300_000);
});
