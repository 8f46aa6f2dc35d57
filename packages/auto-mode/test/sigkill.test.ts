import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { openStore } from "@asp/evidence";
import { afterEach, describe, expect, it } from "vitest";
import { loadAutoRunProjection, runIdOf } from "../src/index.js";
import { RUN, tempStore } from "./helpers.js";

const CHILD = fileURLToPath(new URL("./fixtures/kill-child.mjs", import.meta.url));
const ACTIONS_CHILD = fileURLToPath(new URL("./fixtures/kill-child-actions.mjs", import.meta.url));
const REPAIR_CHILD = fileURLToPath(new URL("./fixtures/kill-child-repair.mjs", import.meta.url));
const DIST = fileURLToPath(new URL("../dist/index.js", import.meta.url));
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** Run the child until its `stopAt`-th event committed, SIGKILL it, and return the events it saw. */
function runAndKill(dir: string, stopAt: number, verdict: string, argv?: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv ?? [CHILD, dir, String(stopAt), verdict], {
      stdio: ["ignore", "pipe", "pipe"],
    });
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

  // Every durable commit of a run whose Engine acts: the steps and the transitions, in order.
  const COMMITS = [
    "auto_run_started",
    "step:admitted",
    "step:executed",
    "step:turn",
    "step:admitted",
    "step:executed",
    "step:turn",
    "candidate_ready",
    "auto_audit_started",
    "auto_audit_completed",
    "auto_run_terminal",
  ];
  it("AM.durable.1 AM.durable.2: killed after each committed step and transition of an acting run, the reopened projection claims no more than the facts prove", async () => {
    for (let stopAt = 1; stopAt <= COMMITS.length; stopAt++) {
      const t = await tempStore();
      cleanups.push(t.cleanup);
      await t.store.close();
      const scratch = mkdtempSync(join(tmpdir(), "asp-kill-ws-"));
      cleanups.push(async () => rmSync(scratch, { recursive: true, force: true }));
      const seen = await runAndKill(t.dir, stopAt, "pass", [ACTIONS_CHILD, t.dir, scratch, String(stopAt)]);
      expect(seen.at(-1)).toBe(`${stopAt} ${COMMITS[stopAt - 1]}`);
      const store = await openStore(t.dir, { waitMs: 10_000 });
      try {
        const p = await loadAutoRunProjection(store, runIdOf(RUN));
        expect(p.problems).toEqual([]);
        const committed = COMMITS.slice(0, stopAt);
        // Exactly the steps that committed, nothing an interrupted action did not finish.
        expect(p.steps.map((s) => `step:${s.phase}`)).toEqual(committed.filter((c) => c.startsWith("step:")));
        const candidate = committed.includes("candidate_ready");
        expect(p.state).toBe(stopAt === COMMITS.length ? "verified" : candidate ? "candidate" : null);
        expect(p.user_truth).toBe(
          stopAt === COMMITS.length
            ? "Verified"
            : candidate
              ? "Candidate · provisional / not verified"
              : "Started · no candidate",
        );
        if (candidate) expect(p.candidate?.artifact_versions.map((a) => a.artifact_id)).toEqual(["a.txt"]);
      } finally {
        await store.close();
      }
    }
  }, 120_000);

  it("AM.durable.1 AM.stage5.1: killed after each committed step and transition of a run that repairs, the reopened projection is the reviewed candidate B or the repaired B', never Verified before B' passed", async () => {
    const fresh = async () => {
      const t = await tempStore();
      cleanups.push(t.cleanup);
      await t.store.close();
      const scratch = mkdtempSync(join(tmpdir(), "asp-kill-repair-ws-"));
      cleanups.push(async () => rmSync(scratch, { recursive: true, force: true }));
      return { dir: t.dir, scratch };
    };
    // The whole course once, unkilled: every commit in order.
    const whole = await fresh();
    const all = (await runAndKill(whole.dir, 0, "pass", [REPAIR_CHILD, whole.dir, whole.scratch, "0"])).filter(
      (l) => l !== "done",
    );
    const commits = all.map((l) => l.slice(l.indexOf(" ") + 1));
    expect(commits).toContain("repair_started");
    expect(commits.at(-1)).toBe("auto_run_terminal");
    // The kills before the Repair are the acting run's test above: here from the issues verdict on.
    for (let stopAt = commits.indexOf("repair_started"); stopAt <= commits.length; stopAt++) {
      const { dir, scratch } = await fresh();
      const seen = await runAndKill(dir, stopAt, "pass", [REPAIR_CHILD, dir, scratch, String(stopAt)]);
      expect(seen.at(-1)).toBe(`${stopAt} ${commits[stopAt - 1]}`);
      const store = await openStore(dir, { waitMs: 10_000 });
      try {
        const p = await loadAutoRunProjection(store, runIdOf(RUN));
        expect(p.problems, `killed after ${stopAt} ${commits[stopAt - 1]}`).toEqual([]);
        const committed = commits.slice(0, stopAt);
        const candidates = committed.filter((c) => c === "candidate_ready").length;
        if (stopAt === commits.length) {
          expect(p.user_truth).toBe("Verified");
          expect(p.candidate?.parent_candidate_id).not.toBeNull();
        } else {
          expect(p.state).toBe(candidates === 0 ? null : "candidate");
          // B (the producer's, no parent) until B' committed; then B' (its parent B), unverified.
          if (candidates === 1) expect(p.candidate?.parent_candidate_id).toBeNull();
          if (candidates === 2) expect(p.candidate?.parent_candidate_id).toBe(p.repair_runs[0]?.from_candidate_id);
          expect(p.candidate?.review_status ?? "candidate").not.toBe("verified");
        }
        // A Repair Run is open exactly between repair_started and repair_completed.
        const started = committed.includes("repair_started");
        const completed = committed.includes("repair_completed");
        expect(p.repair_runs.map((r) => r.outcome)).toEqual(started ? [completed ? "applied" : null] : []);
      } finally {
        await store.close();
      }
    }
  }, 240_000);
});
