// The crash-consistency proof (issue 13 item 6): a child process applies a 50-file plan through
// stage() and is SIGKILLed after each journal step in turn, at random instants, and during
// recovery; after recover() the worktree's git tree id is exactly B or exactly B', and recover's
// outcome says which.
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStagedSnapshot } from "../src/index.js";
import { crashPlan } from "./fixtures/plan.js";
import { cloneRepo, expectedTree, makeRepo, removeScratch, tempDir, treeId } from "./helpers.js";

const here = dirname(fileURLToPath(import.meta.url));
const CONCURRENCY = 3;
const RANDOM_KILLS = 50;

interface Run {
  readonly root: string;
  readonly journalDir: string;
  readonly trace: string;
}

interface Exit {
  readonly signal: NodeJS.Signals | null;
  readonly code: number | null;
  readonly finished: boolean;
  readonly ms?: number;
}

let childScript: string;
let template: string;
let B: string;
let B2: string;
/** The step names of an uninterrupted stage(), in order. */
let stageSteps: string[];
let stageMs: number;

function newRun(root = cloneRepo(template)): Run {
  const dir = tempDir("asp-staged-journal-");
  return { root, journalDir: join(dir, "journal"), trace: join(dir, "trace") };
}

function runChild(
  mode: "stage" | "recover" | "naive",
  run: Run,
  fault: { step?: number; killAfterMs?: number } = {},
): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, [childScript, mode, run.root, run.journalDir, run.trace], {
      env: { ...process.env, ASP_STAGED_FAULT_STEP: String(fault.step ?? 0) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    let timer: NodeJS.Timeout | undefined;
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      if (timer === undefined && fault.killAfterMs !== undefined && out.includes("ready\n")) {
        timer = setTimeout(() => child.kill("SIGKILL"), fault.killAfterMs);
      }
    });
    child.stderr?.on("data", (d: Buffer) => {
      err += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (timer !== undefined) clearTimeout(timer);
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (signal === null && code !== 0) reject(new Error(`child ${mode} exited ${code}: ${err}`));
      const done = line === undefined ? undefined : (JSON.parse(line) as { ms: number });
      resolve({ signal, code, finished: done !== undefined, ...(done === undefined ? {} : { ms: done.ms }) });
    });
  });
}

function traceOf(run: Run): string[] {
  return existsSync(run.trace)
    ? readFileSync(run.trace, "utf8")
        .split("\n")
        .filter((l) => l.length > 0)
        .map((l) => l.slice(l.indexOf(" ") + 1))
    : [];
}

async function pool<T, R>(items: readonly T[], n: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

/**
 * Recover in this process, then judge: the tree is B or B' and the outcome agrees; a second
 * recover has nothing to do; no staging folder or journal is left. Returns what it saw, and the
 * problems (empty when the run proves the property).
 */
async function recoverAndJudge(
  run: Run,
): Promise<{ outcome: string; tree: "B" | "B'" | "neither"; problems: string[] }> {
  const problems: string[] = [];
  const sandbox = createStagedSnapshot();
  const { outcome } = await sandbox.recover({ root: run.root, journalDir: run.journalDir });
  const id = await treeId(run.root);
  const tree = id === B ? "B" : id === B2 ? "B'" : "neither";
  const trace = traceOf(run);
  if (tree === "neither") problems.push(`tree ${id} is neither B nor B'`);
  if (outcome === "rolled_back" && tree !== "B") problems.push(`rolled_back but tree is ${tree}`);
  if (outcome === "rolled_forward" && tree !== "B'") problems.push(`rolled_forward but tree is ${tree}`);
  // No journal: either the child died before journalling anything (B), or after it removed the
  // journal of a completed apply (B').
  if (outcome === "none" && tree === "B" && trace.some((s) => s.endsWith("journal:prepared"))) {
    problems.push("none at B although a journal had been written");
  }
  if (outcome === "none" && tree === "B'" && !trace.includes(stageSteps.at(-2) as string)) {
    problems.push("none at B' although the apply had not finished");
  }
  const again = await sandbox.recover({ root: run.root, journalDir: run.journalDir });
  if (again.outcome !== "none") problems.push(`second recover said ${again.outcome}`);
  const staging = join(run.root, ".git", "asp-staging");
  if (existsSync(staging) && readdirSync(staging).length > 0) problems.push("a staging folder is left");
  if (existsSync(run.journalDir) && readdirSync(run.journalDir).length > 0) problems.push("a journal file is left");
  return { outcome, tree, problems };
}

beforeAll(async () => {
  const out = join(tempDir("asp-staged-child-"), "crash-child.mjs");
  await build({
    entryPoints: [join(here, "fixtures", "crash-child.ts")],
    outfile: out,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "silent",
  });
  childScript = out;
  template = makeRepo();
  B = await treeId(template);
  B2 = await expectedTree(template, crashPlan());
  // An uninterrupted apply in a child: it publishes B' and names every step it takes.
  const run = newRun();
  const exit = await runChild("stage", run);
  expect(exit.finished).toBe(true);
  expect(await treeId(run.root)).toBe(B2);
  stageSteps = traceOf(run);
  stageMs = exit.ms ?? 0;
}, 60_000);

afterAll(removeScratch, 60_000);

describe("sandbox-staged-snapshot crash consistency (issue 13 item 6)", () => {
  it("the plan has 50 writes and the journal names every step", () => {
    expect(crashPlan()).toHaveLength(50);
    expect(B).not.toBe(B2);
    // journal:prepared, 40 staged files, staging synced, the commit, 50 renames, synced, done, cleanup, removed.
    expect(stageSteps[0]).toBe("journal:prepared");
    expect(stageSteps.filter((s) => s.startsWith("stage:") && s !== "stage:synced")).toHaveLength(40);
    expect(stageSteps.filter((s) => s.startsWith("publish:") && s !== "publish:synced")).toHaveLength(50);
    expect(stageSteps.slice(-3)).toEqual(["journal:done", "cleanup", "journal:removed"]);
  });

  it("H6.7 host §6: SIGKILLed after each step in turn, recover() leaves exactly B before the commit point and exactly B' after it", async () => {
    const commit = stageSteps.indexOf("journal:committed") + 1;
    const last = stageSteps.length;
    const steps = Array.from({ length: last }, (_, i) => i + 1);
    const results = await pool(steps, CONCURRENCY, async (n) => {
      const run = newRun();
      const exit = await runChild("stage", run, { step: n });
      const judged = await recoverAndJudge(run);
      const expected = n < commit ? "rolled_back" : n < last ? "rolled_forward" : "none";
      const problems = [...judged.problems];
      if (exit.signal !== "SIGKILL") problems.push(`not killed (${exit.code})`);
      if (judged.outcome !== expected) problems.push(`outcome ${judged.outcome}, expected ${expected}`);
      return { n, step: stageSteps[n - 1], ...judged, problems };
    });
    expect(results.filter((r) => r.problems.length > 0)).toEqual([]);
    expect(results.filter((r) => r.tree === "B")).toHaveLength(commit - 1);
    expect(results.filter((r) => r.tree === "B'")).toHaveLength(last - commit + 1);
  }, 120_000);

  it(`H6.7 host §6: SIGKILLed at ${RANDOM_KILLS}+ random instants, recover() leaves exactly B or B' and says which`, async () => {
    let window = Math.max(stageMs, 5);
    const landed: Array<{ outcome: string; tree: string; problems: string[] }> = [];
    let attempts = 0;
    while (landed.length < RANDOM_KILLS && attempts < RANDOM_KILLS * 4) {
      const need = RANDOM_KILLS - landed.length;
      const batch = Array.from({ length: Math.min(CONCURRENCY * 4, need + CONCURRENCY) }, () => Math.random() * window);
      attempts += batch.length;
      const results = await pool(batch, CONCURRENCY, async (delay) => {
        const run = newRun();
        const exit = await runChild("stage", run, { killAfterMs: delay });
        const judged = await recoverAndJudge(run);
        return { killed: exit.signal === "SIGKILL" && !exit.finished, ...judged };
      });
      for (const r of results) {
        // Every run is judged; only a kill that interrupted the apply counts toward the 50.
        expect(r.problems).toEqual([]);
        if (r.killed) landed.push(r);
      }
      // The machine's speed varies: when most applies finished before the kill, aim earlier.
      if (results.filter((r) => r.killed).length < results.length / 2) window *= 0.7;
    }
    expect(landed.length).toBeGreaterThanOrEqual(RANDOM_KILLS);
    const tally = (o: string) => landed.filter((r) => r.outcome === o).length;
    console.info(
      `random kills: ${landed.length} landed of ${attempts}; rolled_back ${tally("rolled_back")}, rolled_forward ${tally("rolled_forward")}, none ${tally("none")}; window ${window.toFixed(1)} ms`,
    );
  }, 180_000);

  describe("when recovery itself is killed", () => {
    /**
     * Stage killed after `stageStep`, then recover killed after each of its steps in turn, then
     * recover again in this process. Recovery's 50 renames run one idempotent function
     * (`publishJournal`, which the stage kills above already cut at every rename): here every
     * non-rename step, the first and last renames and every fifth one (to stay within the time
     * budget of a busy machine). Journals name absolute paths, so each worker keeps one
     * crashed state and restores it in place before every attempt.
     */
    async function killRecoveryAtEachStep(stageStep: number, expected: "B" | "B'") {
      const slots = await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          const run = newRun();
          expect((await runChild("stage", run, { step: stageStep })).signal).toBe("SIGKILL");
          const saved = tempDir("asp-staged-saved-");
          cpSync(dirname(run.root), join(saved, "root"), { recursive: true, verbatimSymlinks: true });
          cpSync(dirname(run.journalDir), join(saved, "journal"), { recursive: true });
          const restore = () => {
            for (const [from, to] of [
              ["root", dirname(run.root)],
              ["journal", dirname(run.journalDir)],
            ] as const) {
              rmSync(to, { recursive: true, force: true });
              cpSync(join(saved, from), to, { recursive: true, verbatimSymlinks: true });
            }
            rmSync(run.trace, { force: true });
          };
          restore();
          return { run, restore };
        }),
      );
      // How many steps an uninterrupted recovery takes.
      const probe = slots[0] as (typeof slots)[number];
      expect((await runChild("recover", probe.run)).finished).toBe(true);
      const recoverSteps = traceOf(probe.run);
      expect(recoverSteps.length).toBeGreaterThan(0);
      const free = [...slots];
      const rename = /^recover:publish:(\d+)$/;
      const chosen = recoverSteps
        .map((name, i) => ({ name, m: i + 1 }))
        .filter(({ name }) => {
          const n = Number(rename.exec(name)?.[1] ?? 0);
          return n === 0 || n === 1 || n % 5 === 0 || !recoverSteps.includes(`recover:publish:${n + 1}`);
        })
        .map(({ m }) => m);
      const problems = await pool(chosen, CONCURRENCY, async (m) => {
        const slot = free.pop() as (typeof slots)[number];
        slot.restore();
        const { run } = slot;
        const out: string[] = [];
        const at = recoverSteps[m - 1];
        if ((await runChild("recover", run, { step: m })).signal !== "SIGKILL") out.push(`${at}: not killed`);
        const { outcome } = await createStagedSnapshot().recover({ root: run.root, journalDir: run.journalDir });
        const id = await treeId(run.root);
        const tree = id === B ? "B" : id === B2 ? "B'" : "neither";
        if (tree !== expected) out.push(`recover killed after ${at}: tree ${tree}`);
        const want = m === recoverSteps.length ? "none" : expected === "B" ? "rolled_back" : "rolled_forward";
        if (outcome !== want) out.push(`recover killed after ${at}: outcome ${outcome}`);
        free.push(slot);
        return out;
      });
      expect(problems.flat()).toEqual([]);
      return { recoverSteps, killed: chosen.length };
    }

    it("H6.7 host §6: a recovery killed after each of its steps mid-publish is finished by the next one, at exactly B'", async () => {
      const midPublish = stageSteps.indexOf("journal:committed") + 1 + 25;
      const { recoverSteps, killed } = await killRecoveryAtEachStep(midPublish, "B'");
      expect(recoverSteps.filter((s) => s.startsWith("recover:publish:"))).toHaveLength(51);
      expect(killed).toBeGreaterThanOrEqual(15);
    }, 120_000);

    it("H6.7 host §6: a recovery killed after each of its steps before the commit point still ends at exactly B", async () => {
      const { recoverSteps, killed } = await killRecoveryAtEachStep(10, "B");
      expect(recoverSteps).toEqual(["recover:cleanup", "recover:journal:removed"]);
      expect(killed).toBe(2);
    }, 60_000);
  });

  it("the proof has teeth: a naive in-place apply killed midway leaves a tree that is neither B nor B'", async () => {
    const run = newRun();
    const exit = await runChild("naive", run, { step: 25 });
    expect(exit.signal).toBe("SIGKILL");
    const id = await treeId(run.root);
    expect(id).not.toBe(B);
    expect(id).not.toBe(B2);
  });
});
