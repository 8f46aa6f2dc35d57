import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { openStore } from "@asp/evidence";
import { afterEach, describe, expect, it } from "vitest";
import { loadAutoRunProjection, runIdOf } from "../src/index.js";
import { RUN, tempStore } from "./helpers.js";

const CHILD = fileURLToPath(new URL("./fixtures/kill-child.mjs", import.meta.url));
const DIST = fileURLToPath(new URL("../dist/index.js", import.meta.url));
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** Run the child until its `stopAt`-th event committed, SIGKILL it, and return the events it saw. */
function runAndKill(dir: string, stopAt: number, verdict: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, dir, String(stopAt), verdict], { stdio: ["ignore", "pipe", "pipe"] });
    const seen: string[] = [];
    let buf = "";
    let err = "";
    child.stderr.on("data", (c: Buffer) => {
      err += c.toString();
    });
    child.stdout.on("data", (c: Buffer) => {
      buf += c.toString();
      const lines = buf.split("\n");
      buf = lines.pop() ?? "";
      for (const line of lines) {
        seen.push(line);
        if (line.startsWith(`${stopAt} `)) child.kill("SIGKILL");
      }
    });
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (signal !== "SIGKILL" && !seen.includes("done")) reject(new Error(`child exited ${code}: ${err}`));
      else resolve(seen);
    });
  });
}

// The five transitions of a run: started, candidate, audit started, audit completed, terminal.
const PHASES = [
  "auto_run_started",
  "candidate_ready",
  "auto_audit_started",
  "auto_audit_completed",
  "auto_run_terminal",
];

describe.skipIf(!existsSync(DIST))("SIGKILL of the run process (needs `pnpm --filter @asp/auto-mode build`)", () => {
  it.each(["pass", "issues"])(
    "AM.durable.1 AM.portable.1: killed after each committed transition (%s), the reopened projection is the last committed state, never Verified without its pass",
    async (verdict) => {
      for (let stopAt = 1; stopAt <= PHASES.length; stopAt++) {
        const t = await tempStore();
        cleanups.push(t.cleanup);
        await t.store.close();
        const seen = await runAndKill(t.dir, stopAt, verdict);
        expect(seen.at(-1)).toBe(`${stopAt} ${PHASES[stopAt - 1]}`);
        const store = await openStore(t.dir, { waitMs: 10_000 });
        try {
          const p = await loadAutoRunProjection(store, runIdOf(RUN));
          expect(p.problems).toEqual([]);
          if (stopAt === 1) expect(p.state).toBeNull();
          else if (stopAt < PHASES.length) expect(p.state).toBe("candidate");
          else expect(p.state).toBe(verdict === "pass" ? "verified" : "completed_with_issues");
          if (p.state === "verified") expect(p.review_runs[0]?.verdict).toBe("pass");
        } finally {
          await store.close();
        }
      }
    },
    60_000,
  );
});
