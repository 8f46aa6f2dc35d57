import {
  existsSync,
  linkSync,
  lstatSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StageFlag } from "@asp/contracts";
import type { Digest, FactInput, FactLog } from "@asp/evidence";
import { type BudgetSet, createStageFlags, DEFAULT_BUDGETS } from "@asp/rollout";
import { afterEach, describe, expect, it } from "vitest";
import {
  type ActorIdentity,
  type AutoRunnerOptions,
  createAutoRunner,
  createScratchWorkspace,
  type Engine,
  type EngineStep,
  type Guardian,
  loadAutoRunProjection,
  type PermissionClassifier,
  projectAutoRun,
  projectionInputOf,
  type ReviewerPort,
  RUN_MACHINE,
  runIdOf,
} from "../src/index.js";
import {
  allowAll,
  askDocs,
  countingReviewer,
  docsRules,
  fakeReviewer,
  manualTime,
  PRODUCER,
  patchBodies,
  RUN,
  tempStores,
} from "./helpers.js";

// Stage 5 (bounded Repair) under Stage 9 (the safe checkpoint): issues → repair → an independent
// re-review, against a real level store and Reviewers that are real subprocesses.

const setup = tempStores();
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const utf8 = new TextEncoder();

const AUTO_FIX = {
  preset: "on",
  result_review_mode: "auto_fix",
  approvals_reviewer: "user",
  source: "frame",
  normalized: false,
} as const;

const REPAIRER: ActorIdentity = {
  actor_id: "agent-repair",
  session_id: "session-repair",
  fingerprint: "model-a;cfg-1",
};

const BASE_FLAGS: StageFlag[] = [
  "stage2_auto_run_storage",
  "stage4_review_completion_gate",
  "stage5_auto_repair",
  "stage9_safe_repair_checkpoint",
];

/** The producer: one candidate with a wrong answer and one Artifact. */
function producer(): Engine {
  return {
    actor: PRODUCER,
    async *run(): AsyncGenerator<EngineStep> {
      yield { kind: "turn", usage: { input_tokens: 1000, output_tokens: 100 } };
      yield {
        kind: "completion",
        payload: "The answer is 41.",
        artifacts: [{ artifact_id: "result.csv", version_id: "v1", bytes: utf8.encode("x,y\n1,41\n") }],
        evidence: [],
      };
    },
  };
}

/** The producer over a workspace: its answer is what the workspace holds (`before` runs first, out of band). */
function workspaceProducer(before: () => void = () => undefined): Engine {
  return {
    actor: PRODUCER,
    async *run(): AsyncGenerator<EngineStep> {
      before();
      yield { kind: "turn", usage: { input_tokens: 1000, output_tokens: 100 } };
      yield { kind: "completion", payload: "The answer is 41.", artifacts: [], evidence: [] };
    },
  };
}

/** A Reviewer that runs `side` on its first call (fault injection: another writer acting meanwhile). */
function duringReview(reviewer: ReviewerPort, side: () => void): ReviewerPort {
  let done = false;
  return {
    ...reviewer,
    verifier: {
      verify: (request) => {
        if (!done) side();
        done = true;
        return reviewer.verifier.verify(request);
      },
    },
  };
}

/** A Repair Agent answering each round with `plan(round, task)`; it records the tasks it was given. */
function repairAgent(
  plan: (round: number, task: Record<string, unknown>) => EngineStep[],
  actor: ActorIdentity = REPAIRER,
): Engine & { tasks: Array<Record<string, unknown>>; tools: string[][]; replies: unknown[] } {
  const tasks: Array<Record<string, unknown>> = [];
  const tools: string[][] = [];
  const replies: unknown[] = [];
  return {
    actor,
    tasks,
    tools,
    replies,
    async *run(params) {
      const task = JSON.parse(params.task) as Record<string, unknown>;
      tasks.push(task);
      tools.push(params.tools.map((t) => t.name));
      for (const step of plan(tasks.length, task)) {
        const reply: unknown = yield step;
        if (reply !== undefined) replies.push(reply);
      }
    },
  };
}

const corrected = (path = "result.csv", csv = "x,y\n1,42\n"): EngineStep[] => [
  { kind: "turn", usage: { input_tokens: 100, output_tokens: 20 } },
  {
    kind: "completion",
    payload: "The answer is 42 (corrected).",
    artifacts: [{ artifact_id: path, version_id: "v2", bytes: utf8.encode(csv) }],
    evidence: [],
  },
];
/** A plan that changes the answer but not what the Reviewer objects to. */
const stubborn = (round: number): EngineStep[] => [
  {
    kind: "completion",
    payload: `The answer is 41, restated ${round} time(s).`,
    artifacts: [],
    evidence: [],
  },
];

/** The terminal of a run whose every repair round was spent with the finding still open. */
const ROUNDS_SPENT = {
  state: "completed_with_issues",
  stop_reason: "budget_exhausted",
  exhausted_limit: "max_repair_rounds",
} as const;

async function runWith(
  o: Partial<AutoRunnerOptions> & Pick<AutoRunnerOptions, "reviewers">,
  extra: { flags?: StageFlag[]; budgets?: Partial<BudgetSet> } = {},
) {
  const t = await setup();
  const runner = createAutoRunner({
    store: t.store,
    engine: producer(),
    flags: createStageFlags([...BASE_FLAGS, ...(extra.flags ?? [])]),
    ...o,
  });
  const projection = await runner.run({
    run: RUN,
    selection: AUTO_FIX,
    budgets: { ...DEFAULT_BUDGETS, ...extra.budgets },
  });
  return { t, projection };
}

async function eventTypes(t: Awaited<ReturnType<typeof setup>>): Promise<string[]> {
  const input = await projectionInputOf(t.store, runIdOf(RUN));
  return input.facts.filter((f) => f.kind === "auto.event").map((f) => (f.record as { type: string }).type);
}

describe("Stage 5 and Stage 9: bounded Repair from a committed checkpoint", () => {
  it("AM.stage5.1 AM.states.5 AM.states.13 AM.durable.5: issues, repair, an independent pass: Verified on the new candidate only; the old one never", async () => {
    const agent = repairAgent(() => corrected());
    const reviewer = countingReviewer(fakeReviewer("fake-judge"));
    const { t, projection } = await runWith({ reviewers: [reviewer.port], repair: { engine: agent } });
    expect(projection.problems).toEqual([]);
    expect(projection.user_truth).toBe("Verified");
    expect(await eventTypes(t)).toEqual([
      "auto_run_started",
      "candidate_ready",
      "auto_audit_started",
      "auto_audit_completed",
      "repair_started",
      "candidate_ready",
      "repair_completed",
      "auto_audit_started",
      "auto_audit_completed",
      "auto_run_terminal",
    ]);
    expect(reviewer.calls()).toBe(2);
    const [repair] = projection.repair_runs;
    const candidate = projection.candidate;
    expect(repair).toMatchObject({ round: 1, outcome: "applied", mutation_set: ["result.csv"], turns_used: 1 });
    expect(repair?.actor).toEqual(REPAIRER);
    // The new candidate: the Repair actor's, a child of the reviewed one, and the only Verified one.
    expect(candidate?.candidate_id).toBe(repair?.to_candidate_id);
    expect(candidate).toMatchObject({ review_status: "verified", parent_candidate_id: repair?.from_candidate_id });
    expect(candidate?.producer).toEqual(REPAIRER);
    expect(projection.terminal?.candidate_id).toBe(candidate?.candidate_id);
    expect(repair?.before_versions[0]?.checksum).not.toBe(repair?.after_versions[0]?.checksum);
    // The old candidate's finding is resolved by the independent re-review, named as its cause.
    const old = projection.findings.find((f) => f.review_run_id === projection.review_runs[0]?.review_run_id);
    expect(projection.finding_statuses).toEqual([
      {
        finding_id: old?.finding_id,
        status: "resolved",
        cause: `${repair?.repair_run_id}, then ${projection.review_runs[1]?.review_run_id}`,
      },
    ]);
    // The Repair Agent saw the findings, the answer, its Artifacts and the mutation set.
    expect(agent.tasks[0]).toMatchObject({
      kind: "repair",
      round: 1,
      answer: "The answer is 41.",
      artifacts: [{ path: "result.csv", content: "x,y\n1,41\n" }],
      findings: [{ severity: "major", claim: "the answer is wrong" }],
      mutation_set: ["result.csv"],
    });
    // The checkpoint is a frozen snapshot holding the pre-repair bytes.
    const input = await projectionInputOf(t.store, runIdOf(RUN));
    const checkpoint = input.snapshots[repair?.checkpoint.digest as string];
    expect(checkpoint?.refs.map((r) => r.name)).toEqual(["artifact:result.csv", "checkpoint", "payload"]);
    // Rounds and turns are in the ledger; the Repair turn spent the extra-token budget.
    expect(projection.ledger?.consumed).toMatchObject({ repair_rounds: 1, repair_turns: 1, extra_tokens: 120 });
  });

  it("AM.states.7 AM.budgets.7: a stubborn finding ends completed_with_issues(budget_exhausted: max_repair_rounds) after the round budget; every finding unaddressed", async () => {
    const agent = repairAgent(stubborn);
    const { projection } = await runWith({ reviewers: [fakeReviewer("fake-judge")], repair: { engine: agent } });
    expect(projection.problems).toEqual([]);
    expect(projection.terminal).toMatchObject(ROUNDS_SPENT);
    expect(projection.repair_runs.map((r) => [r.round, r.outcome])).toEqual([
      [1, "applied"],
      [2, "applied"],
    ]);
    expect(projection.ledger?.consumed.repair_rounds).toBe(2);
    expect(agent.tasks).toHaveLength(2);
    // The latest candidate's finding is the unresolved one; the earlier two were not addressed.
    expect(projection.terminal?.unresolved_finding_ids).toEqual(projection.blocking_finding_ids);
    expect(projection.finding_statuses.map((s) => s.status)).toEqual(["unaddressed", "unaddressed", "open"]);
    expect(projection.label).toBe("Completed · unverified · 1 unresolved issues · budget exhausted: max_repair_rounds");
  });

  it("AM.stage8.1 AM.budgets.8: with the loop circuits on, the same finding after a repair opens the circuit: completed_with_issues(loop_detected)", async () => {
    const agent = repairAgent(stubborn);
    const { projection } = await runWith(
      { reviewers: [fakeReviewer("fake-judge")], repair: { engine: agent } },
      { flags: ["stage8_loop_circuits"], budgets: { repeated_finding_limit: 1 } },
    );
    expect(projection.problems).toEqual([]);
    expect(projection.terminal).toMatchObject({ state: "completed_with_issues", stop_reason: "loop_detected" });
    expect(projection.repair_runs).toHaveLength(1);
    expect(projection.ledger?.circuits.no_progress).toBe("open");
    expect(projection.label).toContain("Loop detected");
  });

  it("AM.stage9.1 AM.terminals.4 AM.invariants.9: an edit outside the mutation set is never applied: safe_rollback_unavailable, the Repair Run rejected", async () => {
    const agent = repairAgent(() => corrected("secrets.env"));
    const { projection } = await runWith({ reviewers: [fakeReviewer("fake-judge")], repair: { engine: agent } });
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safe_rollback_unavailable");
    expect(projection.user_truth).toBe("Blocked · Safe rollback unavailable");
    expect(projection.repair_runs.map((r) => [r.outcome, r.to_candidate_id])).toEqual([["rejected", null]]);
    // No new candidate: the reviewed one is the latest, and unverified.
    expect(projection.candidate?.parent_candidate_id).toBeNull();
    expect(projection.finding_statuses.map((s) => s.status)).toEqual(["unaddressed"]);
  });

  it("AM.invariants.9 AM.states.9: a path escaping the mutation set (a .. segment) is the higher-priority safety boundary", async () => {
    const agent = repairAgent(() => corrected("../result.csv"));
    const { projection } = await runWith({ reviewers: [fakeReviewer("fake-judge")], repair: { engine: agent } });
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safety_boundary");
    expect(projection.repair_runs.map((r) => r.outcome)).toEqual(["rejected"]);
  });

  it("AM.stage5.1 AM.invariants.9 (ADR 0006): stage 5 without stage 9 starts no Repair: safe_rollback_unavailable, the Repair Agent never asked", async () => {
    const t = await setup();
    const agent = repairAgent(() => corrected());
    const runner = createAutoRunner({
      store: t.store,
      engine: producer(),
      reviewers: [fakeReviewer("fake-judge")],
      repair: { engine: agent },
      flags: createStageFlags(["stage2_auto_run_storage", "stage4_review_completion_gate", "stage5_auto_repair"]),
    });
    const projection = await runner.run({ run: RUN, selection: AUTO_FIX });
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safe_rollback_unavailable");
    expect(projection.repair_runs).toEqual([]);
    expect(agent.tasks).toEqual([]);
    expect(projection.ledger?.consumed.repair_rounds).toBe(0);
  });

  it("AM.budgets.7 AM.invariants.8: the Repair Agent's turns are bounded per round: completed_with_issues(budget_exhausted: repair_turns_per_round)", async () => {
    const agent = repairAgent(() => [
      { kind: "turn", usage: { input_tokens: 10, output_tokens: 1 } },
      { kind: "turn", usage: { input_tokens: 10, output_tokens: 1 } },
      { kind: "turn", usage: { input_tokens: 10, output_tokens: 1 } },
      ...corrected(),
    ]);
    const { projection } = await runWith(
      { reviewers: [fakeReviewer("fake-judge")], repair: { engine: agent } },
      { budgets: { repair_turns_per_round: 2 } },
    );
    expect(projection.problems).toEqual([]);
    expect(projection.terminal).toMatchObject({
      state: "completed_with_issues",
      stop_reason: "budget_exhausted",
      exhausted_limit: "repair_turns_per_round",
    });
    expect(projection.repair_runs.map((r) => [r.outcome, r.turns_used])).toEqual([["failed", 3]]);
  });

  it("AM.invariants.2 AM.states.5: the Repair actor is frozen in the exclusions and never reviews: refused before any inference call", async () => {
    const agent = repairAgent(() => corrected());
    // The only Reviewer is the Repair Agent's session (under another model): not eligible.
    const reviewer = countingReviewer(
      fakeReviewer("fake-judge", { actor_id: "reviewer-x", session_id: REPAIRER.session_id }),
    );
    const { projection } = await runWith({ reviewers: [reviewer.port], repair: { engine: agent } });
    expect(projection.terminal).toMatchObject({
      state: "review_unavailable",
      unavailable_reason: "reviewer_independence_unavailable",
    });
    expect(reviewer.calls()).toBe(0);
  });

  it("AM.states.9: a Repair Run whose completion cannot commit ends at the safety boundary, never Verified", async () => {
    const t = await setup();
    const log: FactLog = new Proxy(t.store.log, {
      get(target, prop, receiver) {
        if (prop === "append") {
          return async (entries: readonly FactInput[]) => {
            const completing = entries.some(
              (e) => e.kind === "auto.event" && (e.record as { type?: string }).type === "repair_completed",
            );
            if (completing) throw new Error("fault injection: disk full");
            return target.append(entries);
          };
        }
        return Reflect.get(target, prop, receiver);
      },
    });
    const projection = await createAutoRunner({
      store: { log, objects: t.store.objects },
      engine: producer(),
      reviewers: [fakeReviewer("fake-judge")],
      repair: { engine: repairAgent(() => corrected()) },
      flags: createStageFlags(BASE_FLAGS),
    }).run({ run: RUN, selection: AUTO_FIX });
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safety_boundary");
    expect(projection.phase).toBe("terminal");
    // The repaired candidate committed, its Repair Run never completed: it is not Verified.
    expect(projection.candidate?.review_status).toBe("unverified");
    expect(projection.repair_runs.map((r) => r.outcome)).toEqual([null]);
  });

  it("refuses auto_fix under stages 5 and 9 without a Repair Agent, and a Repair Agent in the producer's session, before anything commits", async () => {
    const t = await setup();
    const flags = createStageFlags(BASE_FLAGS);
    const base = { store: t.store, engine: producer(), reviewers: [fakeReviewer("fake-judge")], flags };
    await expect(createAutoRunner(base).run({ run: RUN, selection: AUTO_FIX })).rejects.toMatchObject({
      code: "ASP_AUTO_MODE_INVALID_OPTION",
      data: { key: "repair" },
    });
    const same = repairAgent(() => corrected(), { ...REPAIRER, session_id: PRODUCER.session_id });
    await expect(
      createAutoRunner({ ...base, repair: { engine: same } }).run({ run: RUN, selection: AUTO_FIX }),
    ).rejects.toMatchObject({ code: "ASP_AUTO_MODE_INVALID_OPTION", data: { key: "repair.engine.actor" } });
    await expect(
      createAutoRunner({ ...base, repair: { engine: repairAgent(() => []), mutationSet: ["../x"] } }).run({
        run: RUN,
        selection: AUTO_FIX,
      }),
    ).rejects.toMatchObject({ code: "ASP_AUTO_MODE_INVALID_OPTION", data: { key: "repair.mutationSet" } });
    expect((await projectionInputOf(t.store, runIdOf(RUN))).facts).toEqual([]);
  });

  it("with a workspace, the repair is applied by the host to the scratch tree, and the new candidate is what the tree holds", async () => {
    const t = await setup();
    const time = manualTime();
    const dir = mkdtempSync(join(tmpdir(), "asp-auto-repair-ws-"));
    dirs.push(dir);
    const workspace = await createScratchWorkspace({ dir });
    await workspace.write("result.csv", utf8.encode("x,y\n1,41\n"));
    const engine = workspaceProducer();
    const agent = repairAgent(() => corrected());
    const runner = createAutoRunner({
      store: t.store,
      engine,
      workspace,
      // The completion's files are mediated writes: policy must allow them.
      permissions: allowAll,
      reviewers: [fakeReviewer("fake-judge")],
      repair: { engine: agent, mutationSet: ["notes.md"] },
      flags: createStageFlags(BASE_FLAGS),
      clock: time.clock,
      timers: time.timers,
    });
    const projection = await runner.run({ run: RUN, selection: AUTO_FIX });
    expect(projection.problems).toEqual([]);
    expect(projection.user_truth).toBe("Verified");
    expect(projection.repair_runs[0]?.mutation_set).toEqual(["notes.md", "result.csv"]);
    expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,42\n");
    expect(projection.candidate?.artifact_versions.map((v) => v.artifact_id)).toEqual(["result.csv"]);
  });
});

describe("Repair through the host's mediated tools (propose, check against the mutation set, apply, roll back)", () => {
  /** A run over a real scratch workspace holding result.csv (the producer's change) and notes.md. */
  async function inWorkspace(
    plan: (round: number, task: Record<string, unknown>) => EngineStep[],
    o: {
      permissions?: PermissionClassifier;
      mutationSet?: string[];
      plant?: (dir: string) => void;
      /** Fault injection: wrap the store's fact log. */
      log?: (log: FactLog) => FactLog;
      guardian?: Guardian;
      flags?: StageFlag[];
      approvals?: "user" | "auto_review";
      check?: NonNullable<AutoRunnerOptions["repair"]>["check"];
      /** Runs while the candidate is being reviewed (after it committed, before any Repair). */
      duringReview?: (dir: string) => void;
    } = {},
  ) {
    const t = await setup();
    const time = manualTime();
    const dir = mkdtempSync(join(tmpdir(), "asp-auto-repair-tools-"));
    dirs.push(dir);
    const workspace = await createScratchWorkspace({ dir });
    await workspace.write("result.csv", utf8.encode("x,y\n1,41\n"));
    o.plant?.(dir);
    const engine = workspaceProducer();
    const agent = repairAgent(plan);
    const runner = createAutoRunner({
      store: o.log === undefined ? t.store : { log: o.log(t.store.log), objects: t.store.objects },
      engine,
      workspace,
      permissions: o.permissions ?? allowAll,
      reviewers: [duringReview(fakeReviewer("fake-judge"), () => o.duringReview?.(dir))],
      repair: { engine: agent, mutationSet: o.mutationSet ?? [], ...(o.check === undefined ? {} : { check: o.check }) },
      flags: createStageFlags([...BASE_FLAGS, ...(o.flags ?? [])]),
      clock: time.clock,
      timers: time.timers,
      ...(o.guardian === undefined ? {} : { guardian: o.guardian }),
    });
    const projection = await runner.run({
      run: RUN,
      selection: { ...AUTO_FIX, approvals_reviewer: o.approvals ?? "user" },
    });
    return { t, dir, agent, projection };
  }
  const write = (path: string, content: string, id = "w"): EngineStep => ({
    kind: "action",
    action: { tool: "write_file", arguments: { path, content }, call_id: id },
  });
  const done = (payload = "The answer is 42 (corrected)."): EngineStep => ({
    kind: "completion",
    payload,
    artifacts: [],
    evidence: [],
  });
  const phases = (p: {
    steps: ReadonlyArray<{ phase: string; action: { tool: string; target: string | null } | null }>;
  }) => p.steps.map((s) => `${s.phase}${s.action === null ? "" : `:${s.action.tool}:${s.action.target}`}`);

  it("AM.stage9.1 AM.invariants.9: the Repair Agent edits through the host's mediated tools: each write checked, admitted, run by the host and audited; the new candidate holds what it wrote", async () => {
    const { dir, agent, projection } = await inWorkspace(() => [
      { kind: "action", action: { tool: "read_file", arguments: { path: "result.csv" }, call_id: "r" } },
      { kind: "turn", usage: { input_tokens: 100, output_tokens: 20 } },
      write("result.csv", "x,y\n1,42\n"),
      done(),
    ]);
    expect(projection.problems).toEqual([]);
    expect(projection.user_truth).toBe("Verified");
    // Offered reads and whole-file writes only: no command (its writes cannot be bounded).
    expect(agent.tasks).toHaveLength(1);
    expect(agent.tools).toEqual([["read_file", "write_file"]]);
    expect(phases(projection)).toEqual([
      "turn",
      "admitted:read_file:result.csv",
      "executed:read_file:result.csv",
      "turn",
      "admitted:write_file:result.csv",
      "executed:write_file:result.csv",
    ]);
    expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,42\n");
    const [repair] = projection.repair_runs;
    expect(repair?.outcome).toBe("applied");
    expect(projection.candidate?.candidate_id).toBe(repair?.to_candidate_id);
    expect(projection.candidate?.artifact_versions.map((v) => v.artifact_id)).toEqual(["result.csv"]);
    expect(repair?.after_versions[0]?.checksum).not.toBe(repair?.before_versions[0]?.checksum);
  });

  it("AM.stage9.1 AM.terminals.4: a write outside the mutation set through the tools is refused before it runs, audited, and the workspace rolled back to the checkpoint: safe_rollback_unavailable", async () => {
    const { dir, projection } = await inWorkspace(() => [
      write("result.csv", "x,y\n1,42\n", "a"),
      write("deploy/secrets.env", "TOKEN=1\n", "b"),
      done(),
    ]);
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safe_rollback_unavailable");
    expect(projection.repair_runs.map((r) => [r.outcome, r.to_candidate_id])).toEqual([["rejected", null]]);
    const refused = projection.steps.find((s) => s.phase === "refused");
    expect(refused?.refusal).toMatchObject({
      code: "ASP_AUTO_MODE_OUTSIDE_MUTATION_SET",
      terminal: "safe_rollback_unavailable",
    });
    expect(refused?.action?.target).toBe("deploy/secrets.env");
    // The in-set write that did run is undone; the refused one never ran.
    expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
    expect(existsSync(join(dir, "deploy"))).toBe(false);
    expect(projection.candidate?.parent_candidate_id).toBeNull();
  });

  it("AM.invariants.9: a command proposed by the Repair Agent is refused (not offered), and a file it created in the mutation set is removed on rollback", async () => {
    const { dir, projection } = await inWorkspace(
      () => [
        write("notes.md", "new notes\n", "a"),
        { kind: "action", action: { tool: "run_command", arguments: { argv: ["rm", "result.csv"] }, call_id: "c" } },
        done(),
      ],
      { mutationSet: ["notes.md"] },
    );
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safe_rollback_unavailable");
    expect(projection.steps.find((s) => s.phase === "refused")?.refusal?.detail).toMatch(/run_command is not offered/);
    expect(existsSync(join(dir, "notes.md"))).toBe(false);
    expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
  });

  it("AM.states.9 AM.invariants.9: a link planted in the workspace during a repair is never followed: safety_boundary, the target untouched", async () => {
    const outside = mkdtempSync(join(tmpdir(), "asp-auto-repair-outside-"));
    dirs.push(outside);
    writeFileSync(join(outside, "victim.txt"), "original\n");
    let workDir = "";
    const { projection } = await inWorkspace(
      () => {
        // Planted while the Repair runs (after the checkpoint froze), then written through.
        symlinkSync(join(outside, "victim.txt"), join(workDir, "notes.md"));
        return [write("notes.md", "pwned\n"), done()];
      },
      {
        mutationSet: ["notes.md"],
        plant: (dir) => {
          workDir = dir;
        },
      },
    );
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safety_boundary");
    expect(projection.repair_runs.map((r) => r.outcome)).toEqual(["rejected"]);
    // The boundary is the adapter's: the admitted write met the link and refused it.
    expect(phases(projection).slice(-2)).toEqual(["admitted:write_file:notes.md", "refused:write_file:notes.md"]);
    expect(projection.steps.at(-1)?.refusal).toMatchObject({
      code: "ASP_AUTO_MODE_PATH_ESCAPE",
      terminal: "safety_boundary",
    });
    expect(readFileSync(join(outside, "victim.txt"), "utf8")).toBe("original\n");
    // The link is left as planted (the rollback never writes through it either).
    expect(lstatSync(join(workDir, "notes.md")).isSymbolicLink()).toBe(true);
  });

  it("AM.invariants.9: a mutation-set path that is already a link when the checkpoint freezes is the safety boundary before Repair starts", async () => {
    const outside = mkdtempSync(join(tmpdir(), "asp-auto-repair-outside-"));
    dirs.push(outside);
    writeFileSync(join(outside, "victim.txt"), "original\n");
    const { projection, agent } = await inWorkspace(() => [write("notes.md", "pwned\n"), done()], {
      mutationSet: ["notes.md"],
      plant: (dir) => symlinkSync(join(outside, "victim.txt"), join(dir, "notes.md")),
    });
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safety_boundary");
    expect(projection.repair_runs).toEqual([]);
    expect(agent.tasks).toEqual([]);
    expect(readFileSync(join(outside, "victim.txt"), "utf8")).toBe("original\n");
  });

  it("AM.invariants.9: an escaping path proposed through the tools is the safety boundary; a write policy denies ends policy_requires_explicit_setup, attributed to policy", async () => {
    const escaped = await inWorkspace(() => [write("../result.csv", "x"), done()]);
    expect(escaped.projection.problems).toEqual([]);
    expect(escaped.projection.terminal_reason).toBe("safety_boundary");
    const denyWrites: PermissionClassifier = {
      classify: (action) =>
        action.tool === "write_file"
          ? { outcome: "deny", reason: "permissions.rules[0] denies writes", fenced: false }
          : { outcome: "allow", reason: "reads are allowed", fenced: false },
    };
    const denied = await inWorkspace(() => [write("result.csv", "x,y\n1,42\n"), done()], {
      permissions: denyWrites,
    });
    expect(denied.projection.problems).toEqual([]);
    expect(denied.projection.terminal_reason).toBe("policy_requires_explicit_setup");
    expect(denied.projection.steps.find((s) => s.phase === "refused")?.refusal).toMatchObject({ code: "policy_deny" });
    expect(readFileSync(join(denied.dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
  });
  it("AM.stage9.1: a completion naming the checkpoint's bytes after a mediated write of others leaves the workspace at the checkpoint: no_change, nothing stale carried into the next round", async () => {
    const { dir, projection } = await inWorkspace(() => [
      write("result.csv", "x,y\n1,666\n"),
      {
        kind: "completion",
        payload: "The answer is 41.",
        artifacts: [{ artifact_id: "result.csv", version_id: "v0", bytes: utf8.encode("x,y\n1,41\n") }],
        evidence: [],
      },
    ]);
    expect(projection.problems).toEqual([]);
    expect(projection.repair_runs.map((r) => r.outcome)).toEqual(["no_change", "no_change"]);
    expect(projection.terminal).toMatchObject({
      stop_reason: "budget_exhausted",
      exhausted_limit: "max_repair_rounds",
    });
    // The completion's file went through write_file like the Agent's own write (both audited).
    expect(phases(projection).filter((p) => p.startsWith("executed:write_file"))).toHaveLength(4);
    expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
    // Round 2 started from the checkpoint's bytes, not the bad ones.
    const manifests = projection.repair_runs.map((r) => r.checkpoint.digest);
    expect(new Set(manifests).size).toBe(1);
  });

  it("AM.stage9.1: a repaired plan that cannot become a candidate (the host's own ref name taken) rolls the workspace back: agent_failed, the Repair Run failed", async () => {
    const { dir, projection } = await inWorkspace(() => [
      write("result.csv", "x,y\n1,42\n"),
      {
        kind: "completion",
        payload: "The answer is 42 (corrected).",
        artifacts: [],
        evidence: [{ name: "payload", bytes: utf8.encode("a forged payload") }],
      },
    ]);
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("agent_failed");
    expect(projection.repair_runs.map((r) => [r.outcome, r.to_candidate_id])).toEqual([["failed", null]]);
    expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
  });

  it("AM.invariants.9: with a workspace the completion's own files are mediated writes: a write policy denies is refused there too, nothing written", async () => {
    const denyWrites: PermissionClassifier = {
      classify: (action) =>
        action.tool === "write_file"
          ? { outcome: "deny", reason: "permissions.rules[0] denies writes", fenced: false }
          : { outcome: "allow", reason: "reads are allowed", fenced: false },
    };
    const { dir, projection } = await inWorkspace(() => corrected(), { permissions: denyWrites });
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("policy_requires_explicit_setup");
    expect(projection.steps.at(-1)?.refusal).toMatchObject({ code: "policy_deny" });
    expect(projection.repair_runs.map((r) => r.outcome)).toEqual(["rejected"]);
    expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
  });

  it("AM.invariants.9: a completion file outside the mutation set is refused at the propose step like a tool write; one that is not text is agent_failed", async () => {
    const outside = await inWorkspace(() => corrected("deploy/secrets.env"));
    expect(outside.projection.problems).toEqual([]);
    expect(outside.projection.terminal_reason).toBe("safe_rollback_unavailable");
    expect(outside.projection.steps.at(-1)?.refusal?.code).toBe("ASP_AUTO_MODE_OUTSIDE_MUTATION_SET");
    expect(existsSync(join(outside.dir, "deploy"))).toBe(false);
    const binary = await inWorkspace(() => [
      write("result.csv", "x,y\n1,42\n"),
      {
        kind: "completion",
        payload: "The answer is 42 (corrected).",
        artifacts: [{ artifact_id: "result.csv", version_id: "v2", bytes: new Uint8Array([0xff, 0xfe, 0x00]) }],
        evidence: [],
      },
    ]);
    expect(binary.projection.problems).toEqual([]);
    expect(binary.projection.terminal_reason).toBe("agent_failed");
    expect(readFileSync(join(binary.dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
  });

  it("AM.invariants.9: a tool the Repair Agent is not offered is refused as outside the mutation set, before any mediation", async () => {
    const { projection } = await inWorkspace(() => [
      { kind: "action", action: { tool: "http_get", arguments: { url: "https://example.com" }, call_id: "h" } },
      done(),
    ]);
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safe_rollback_unavailable");
    expect(projection.steps.at(-1)?.refusal).toMatchObject({
      code: "ASP_AUTO_MODE_OUTSIDE_MUTATION_SET",
      terminal: "safe_rollback_unavailable",
    });
    expect(projection.steps.at(-1)?.refusal?.detail).toMatch(/http_get is not offered/);
  });

  it("AM.invariants.9: a hard link to a file outside the workspace is never written through: at the checkpoint, the safety boundary before Repair starts; planted during the repair, refused by the adapter", async () => {
    const outside = mkdtempSync(join(tmpdir(), "asp-auto-repair-outside-"));
    dirs.push(outside);
    const victim = join(outside, "victim.txt");
    writeFileSync(victim, "original\n");
    const before = await inWorkspace(() => [write("notes.md", "pwned\n"), done()], {
      mutationSet: ["notes.md"],
      plant: (dir) => linkSync(victim, join(dir, "notes.md")),
    });
    expect(before.projection.problems).toEqual([]);
    expect(before.projection.terminal_reason).toBe("safety_boundary");
    expect(before.projection.repair_runs).toEqual([]);
    expect(before.agent.tasks).toEqual([]);
    expect(readFileSync(victim, "utf8")).toBe("original\n");
    let workDir = "";
    const during = await inWorkspace(
      () => {
        linkSync(victim, join(workDir, "notes.md"));
        return [write("notes.md", "pwned\n"), done()];
      },
      {
        mutationSet: ["notes.md"],
        plant: (dir) => {
          workDir = dir;
        },
      },
    );
    expect(during.projection.problems).toEqual([]);
    expect(during.projection.terminal_reason).toBe("safety_boundary");
    expect(during.projection.steps.at(-1)?.refusal?.code).toBe("ASP_AUTO_MODE_PATH_ESCAPE");
    expect(readFileSync(victim, "utf8")).toBe("original\n");
    // The link is left as planted: the rollback never wrote through it either.
    expect(lstatSync(join(workDir, "notes.md")).ino).toBe(statSync(victim).ino);
  });

  it("AM.states.9: a Repair action whose result cannot commit ends from repair_acting at the safety boundary, the workspace rolled back", async () => {
    let executed = 0;
    const { dir, projection } = await inWorkspace(() => [write("result.csv", "x,y\n1,42\n"), done()], {
      log: (log) =>
        new Proxy(log, {
          get(target, prop, receiver) {
            if (prop === "append") {
              return async (entries: readonly FactInput[]) => {
                const result = entries.some(
                  (e) =>
                    e.kind === "auto.step" && (e.record as { body?: { phase?: string } }).body?.phase === "executed",
                );
                if (result) {
                  executed += 1;
                  throw new Error("fault injection: disk full");
                }
                return target.append(entries);
              };
            }
            return Reflect.get(target, prop, receiver);
          },
        }),
    });
    expect(executed).toBe(1);
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safety_boundary");
    expect(phases(projection).at(-1)).toBe("admitted:write_file:result.csv");
    expect(projection.repair_runs.map((r) => r.outcome)).toEqual([null]);
    // The write ran, its result never committed: the host undid it.
    expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
  });
  it("AM.durable.5: a tampered history where a Repair write left the mutation set, or a terminal from repair_acting is not the safety boundary, projects the safety boundary", async () => {
    const { t } = await inWorkspace(() => [write("result.csv", "x,y\n1,42\n"), done()]);
    const input = await projectionInputOf(t.store, runIdOf(RUN));
    expect(projectAutoRun(input).user_truth).toBe("Verified");
    const moved = {
      ...input,
      facts: input.facts.map((f) => {
        const body = (f.record as { body?: { action?: { tool?: string; target?: string } } }).body;
        if (f.kind !== "auto.step" || body?.action?.tool !== "write_file") return f;
        return {
          ...f,
          record: { ...(f.record as object), body: { ...body, action: { ...body.action, target: "deploy/x" } } },
        };
      }),
    };
    const a = projectAutoRun(moved);
    expect(a.terminal_reason).toBe("safety_boundary");
    expect(a.problems.join("\n")).toMatch(/admitted a write of deploy\/x outside its mutation set/);

    let failed = false;
    const broken = await inWorkspace(() => [write("result.csv", "x,y\n1,42\n"), done()], {
      log: (log) =>
        new Proxy(log, {
          get(target, prop, receiver) {
            if (prop !== "append") return Reflect.get(target, prop, receiver);
            return async (entries: readonly FactInput[]) => {
              const result = entries.some(
                (e) => e.kind === "auto.step" && (e.record as { body?: { phase?: string } }).body?.phase === "executed",
              );
              if (result && !failed) {
                failed = true;
                throw new Error("fault injection: disk full");
              }
              return target.append(entries);
            };
          },
        }),
    });
    expect(broken.projection.terminal_reason).toBe("safety_boundary");
    const b = await projectionInputOf(broken.t.store, runIdOf(RUN));
    const relabelled = {
      ...b,
      facts: b.facts.map((f) => {
        if (f.kind !== "auto.terminal") return f;
        const body = (f.record as { body: Record<string, unknown> }).body;
        return {
          ...f,
          record: {
            ...(f.record as object),
            body: { ...body, terminal_reason: "agent_failed", user_truth: "Failed · Agent error" },
          },
        };
      }),
    };
    expect(projectAutoRun(relabelled).problems.join("\n")).toMatch(/terminal while repair_acting/);
  });

  it("AM.terminals.4: a branch conflict (another writer changed the reviewed candidate's file in the workspace) is safe_rollback_unavailable: Repair never starts", async () => {
    const { dir, agent, projection } = await inWorkspace(() => [write("result.csv", "x,y\n1,42\n"), done()], {
      duringReview: (d) => writeFileSync(join(d, "result.csv"), "x,y\n1,40\n"),
    });
    expect(projection.problems).toEqual([]);
    expect(projection.terminal_reason).toBe("safe_rollback_unavailable");
    expect(projection.repair_runs).toEqual([]);
    expect(agent.tasks).toHaveLength(0);
    // The other writer's bytes stay: the host neither repairs nor reverts what it did not write.
    expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,40\n");
  });

  describe("H6: a Repair's writes are staged and published only once the host's check allows the plan", () => {
    it("AM.stage9.1 AM.invariants.9: while the host judges the plan the workspace still holds the checkpoint; a denied plan never touches it (same inode, same bytes)", async () => {
      let dirOf = "";
      const seenOnDisk: string[] = [];
      const inodes: number[] = [];
      const { dir, projection } = await inWorkspace(
        () => [write("result.csv", "x,y\n1,42\n", "a"), write("notes.md", "why\n", "b"), done()],
        {
          mutationSet: ["notes.md"],
          plant: (d) => {
            dirOf = d;
          },
          check: async () => {
            seenOnDisk.push(readFileSync(join(dirOf, "result.csv"), "utf8"));
            inodes.push(statSync(join(dirOf, "result.csv")).ino);
            return { decision: "deny", receipt_id: "receipt-1" };
          },
        },
      );
      expect(projection.problems).toEqual([]);
      expect(projection.terminal).toMatchObject(ROUNDS_SPENT);
      // One check: round 2 proposes the same plan, decided by the first denial (ADR 0012).
      expect(seenOnDisk).toEqual(["x,y\n1,41\n"]);
      expect(statSync(join(dir, "result.csv")).ino).toBe(inodes[0]);
      expect(existsSync(join(dir, "notes.md"))).toBe(false);
      // The Agent still read back what it staged: its writes were real to it, never to the workspace.
      expect(projection.steps.filter((s) => s.phase === "executed").length).toBeGreaterThan(0);
    });

    it("AM.terminals.7: a link planted in the workspace after a write was staged is refused when the allowed plan is published: safety_boundary, nothing followed", async () => {
      let dirOf = "";
      const outside = mkdtempSync(join(tmpdir(), "asp-auto-repair-outside-"));
      dirs.push(outside);
      const { dir, projection } = await inWorkspace(
        () => [write("result.csv", "x,y\n1,42\n", "a"), write("notes.md", "why\n", "b"), done()],
        {
          mutationSet: ["notes.md"],
          plant: (d) => {
            dirOf = d;
          },
          check: async () => {
            symlinkSync(join(outside, "stolen.md"), join(dirOf, "notes.md"));
            return { decision: "allow", receipt_id: "receipt-1" };
          },
        },
      );
      expect(projection.problems).toEqual([]);
      expect(projection.terminal_reason).toBe("safety_boundary");
      expect(existsSync(join(outside, "stolen.md"))).toBe(false);
      expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
      expect(projection.candidate?.parent_candidate_id).toBeNull();
    });
  });

  describe("a Repair Agent's ask reaches the Guardian like the producer's (Stages 6 and 7)", () => {
    const enforce = {
      permissions: askDocs,
      guardian: docsRules,
      flags: ["stage7_guardian_enforcement"] as StageFlag[],
      approvals: "auto_review" as const,
      mutationSet: ["docs/fix.md", "secrets/fix.md"],
    };
    /** A Guardian that stops every ask it is given (critical, not recoverable). */
    const critical: Guardian = {
      identity: { prompt_version: "fixed-1", model_version: "fixed" },
      assess: async () => ({ decision: "deny", risk: "critical", recoverable: false, rationale: "never" }),
    };

    it("AM.stage7.1 AM.invariants.3: under Stage 7 with auto_review a Repair write policy asks about is allowed once by the Guardian, audited, and the repaired candidate is reviewed: Verified", async () => {
      const { dir, projection } = await inWorkspace(
        () => [write("docs/fix.md", "why 42\n", "a"), write("result.csv", "x,y\n1,42\n", "b"), done()],
        enforce,
      );
      expect(projection.problems).toEqual([]);
      expect(projection.user_truth).toBe("Verified");
      expect(phases(projection)).toEqual([
        "turn",
        "admitted:write_file:docs/fix.md",
        "executed:write_file:docs/fix.md",
        "admitted:write_file:result.csv",
        "executed:write_file:result.csv",
      ]);
      expect(projection.guardian_decisions).toHaveLength(1);
      expect(projection.guardian_decisions[0]).toMatchObject({ decision: "allow", resolution: "admitted" });
      expect(readFileSync(join(dir, "docs/fix.md"), "utf8")).toBe("why 42\n");
      expect(projection.repair_runs.map((r) => r.outcome)).toEqual(["applied"]);
    });

    it("AM.stage7.1: a recoverable deny of a Repair write runs nothing and returns its rationale to the Repair Agent, which writes elsewhere: Verified", async () => {
      const { dir, agent, projection } = await inWorkspace(
        () => [write("secrets/fix.md", "k\n", "a"), write("result.csv", "x,y\n1,42\n", "b"), done()],
        enforce,
      );
      expect(projection.problems).toEqual([]);
      expect(projection.user_truth).toBe("Verified");
      expect(phases(projection)).toEqual([
        "turn",
        "denied:write_file:secrets/fix.md",
        "admitted:write_file:result.csv",
        "executed:write_file:result.csv",
      ]);
      expect(agent.replies[0]).toMatchObject({ status: "refused", code: "guardian_denied" });
      expect(String((agent.replies[0] as { reason?: string }).reason)).toMatch(/outside secrets/);
      expect(existsSync(join(dir, "secrets"))).toBe(false);
    });

    it("AM.stage7.1 AM.terminals.8: a Guardian stop inside a Repair rolls the workspace back, rejects the Repair Run and ends blocked_by_guardian naming its record", async () => {
      const { dir, projection } = await inWorkspace(
        () => [write("result.csv", "x,y\n1,42\n", "a"), write("docs/fix.md", "k\n", "b"), done()],
        { ...enforce, guardian: critical },
      );
      expect(projection.problems).toEqual([]);
      expect(projection.terminal).toMatchObject({ state: "blocked_by_guardian" });
      expect(projection.terminal?.guardian_record_id).toBe(projection.guardian_decisions[0]?.record_id);
      expect(projection.repair_runs.map((r) => [r.outcome, r.to_candidate_id])).toEqual([["rejected", null]]);
      // The in-set write that ran is undone; the refused one never ran.
      expect(readFileSync(join(dir, "result.csv"), "utf8")).toBe("x,y\n1,41\n");
      expect(existsSync(join(dir, "docs"))).toBe(false);
      expect(projection.candidate?.parent_candidate_id).toBeNull();
    });

    it("AM.stage6.1: under Stage 6 a Repair write's ask gets the Guardian's advice and is still refused headless as policy's", async () => {
      const { projection } = await inWorkspace(() => [write("docs/fix.md", "k\n", "a"), done()], {
        ...enforce,
        flags: ["stage6_guardian_shadow"],
        approvals: "user",
      });
      expect(projection.problems).toEqual([]);
      expect(projection.terminal_reason).toBe("policy_requires_explicit_setup");
      expect(phases(projection)).toEqual(["turn", "refused:write_file:docs/fix.md"]);
      expect(projection.guardian_decisions).toEqual([
        expect.objectContaining({ mode: "shadow", resolution: "advice" }),
      ]);
    });

    it("AM.durable.5: blocked_by_guardian from a Repair is accepted only right after the rejected Repair Run the Guardian's stop ended, naming its candidate", async () => {
      const { t } = await inWorkspace(() => [write("docs/fix.md", "k\n", "b"), done()], {
        ...enforce,
        guardian: critical,
      });
      const input = await projectionInputOf(t.store, runIdOf(RUN));
      expect(projectAutoRun(input).problems).toEqual([]);
      const STOP = /blocked_by_guardian without the Guardian's committed stop/;
      // The Repair Run relabelled as failed (its record and its event alike).
      const failed = patchBodies(
        {
          ...input,
          facts: input.facts.map((f) =>
            f.kind === "auto.event" && (f.record as { type?: string }).type === "repair_completed"
              ? { ...f, record: { ...(f.record as object), outcome: "failed" } }
              : f,
          ),
        },
        "auto.repair_run",
        (body) => ((body as { outcome?: string }).outcome === "rejected" ? { outcome: "failed" } : {}),
      );
      expect(projectAutoRun(failed).problems.join("\n")).toMatch(STOP);
      // The terminal naming another candidate than the one the Repair was repairing.
      const elsewhere = patchBodies(input, "auto.terminal", () => ({ candidate_id: null }));
      expect(projectAutoRun(elsewhere).problems.join("\n")).toMatch(STOP);
      // The stop's Guardian record dropped: no cause at all.
      const unrecorded = patchBodies(input, "auto.step", (body) =>
        (body as { phase?: string }).phase === "refused" ? { guardian: null } : {},
      );
      expect(projectAutoRun(unrecorded).terminal_reason).toBe("safety_boundary");
    });
  });
});

describe("the projection proves every Repair Run (tampered histories fail closed)", () => {
  async function verifiedHistory() {
    const agent = repairAgent(() => corrected());
    const { t } = await runWith({ reviewers: [fakeReviewer("fake-judge")], repair: { engine: agent } });
    return projectionInputOf(t.store, runIdOf(RUN));
  }

  it("AM.invariants.2 AM.states.5: a review persisted under the Repair actor's session projects the safety boundary, never Verified", async () => {
    const input = await verifiedHistory();
    const forged = patchBodies(input, "auto.review_run", (body) => {
      const reviewer = (body as { reviewer?: Record<string, unknown> | null }).reviewer;
      return reviewer === null || reviewer === undefined
        ? {}
        : { reviewer: { ...reviewer, session_id: REPAIRER.session_id } };
    });
    const p = projectAutoRun(forged);
    expect(p.user_truth).not.toBe("Verified");
    expect(p.terminal_reason).toBe("safety_boundary");
    expect(p.problems.join("\n")).toMatch(/self-review or breaks the frozen independence policy/);
  });

  it("AM.durable.5 AM.durable.1: a repaired candidate whose Repair Run is removed, or a Repair Run outside its mutation set, projects the safety boundary", async () => {
    const input = await verifiedHistory();
    expect(projectAutoRun(input).user_truth).toBe("Verified");
    const withoutRepair = {
      ...input,
      facts: input.facts.filter(
        (f) =>
          f.kind !== "auto.repair_run" &&
          !(f.kind === "auto.event" && String((f.record as { type: string }).type).startsWith("repair_")),
      ),
    };
    const a = projectAutoRun(withoutRepair);
    expect(a.terminal_reason).toBe("safety_boundary");
    expect(a.problems.join("\n")).toMatch(/no Repair Run produced it|run machine/);
    const narrowed = patchBodies(input, "auto.repair_run", () => ({ mutation_set: [] }));
    const b = projectAutoRun(narrowed);
    expect(b.terminal_reason).toBe("safety_boundary");
    expect(b.problems.join("\n")).toMatch(/mutation set/);
  });

  describe("ADR 0012: the host's checks judge a repaired plan before it becomes a candidate", () => {
    /** FAKE (fault injection): a check port answering round by round, recording what it was shown. */
    function checkPort(answers: Array<() => Promise<{ decision: string; receipt_id?: string | null }>>) {
      const seen: Array<Array<{ path: string; digest: string }>> = [];
      return {
        seen,
        check: async (request: { files: ReadonlyArray<{ path: string; digest: string }> }) => {
          seen.push(request.files.map((f) => ({ ...f })));
          const answer = answers[seen.length - 1];
          if (answer === undefined) throw new Error("no answer scripted");
          return answer();
        },
      };
    }

    it("AM.stage9.1 AM.invariants.9: a denied plan is never applied: rolled back, rejected with its receipt, the round spent; the next round's allowed plan is applied and re-reviewed", async () => {
      const port = checkPort([
        async () => ({ decision: "deny", receipt_id: "receipt-1" }),
        async () => ({ decision: "allow", receipt_id: "receipt-2" }),
      ]);
      // Round 2 proposes another plan (a plan the host denied is never checked again).
      const agent = repairAgent((round) => corrected("result.csv", round === 1 ? "x,y\n1,42\n" : "x,y\n1,42.0\n"));
      const { t, projection } = await runWith({
        reviewers: [fakeReviewer("fake-judge")],
        repair: { engine: agent, check: port.check },
      });
      expect(projection.problems).toEqual([]);
      expect(projection.user_truth).toBe("Verified");
      const digest = expect.stringMatching(/^sha256:[0-9a-f]{64}$/);
      expect(projection.repair_runs.map((r) => [r.round, r.outcome, r.check])).toEqual([
        [1, "rejected", { decision: "deny", receipt_id: "receipt-1", plan_digest: digest }],
        [2, "applied", { decision: "allow", receipt_id: "receipt-2", plan_digest: digest }],
      ]);
      expect(projection.repair_runs[0]?.check?.plan_digest).not.toBe(projection.repair_runs[1]?.check?.plan_digest);
      // The check saw the repaired candidate's whole files, by digest of the bytes the plan wrote.
      const written = await t.store.objects.readBlob(port.seen[0]?.[0]?.digest as Digest);
      expect(port.seen[0]?.map((f) => f.path)).toEqual(["result.csv"]);
      expect(new TextDecoder().decode(written)).toBe("x,y\n1,42\n");
      // The denied round made no candidate: one repaired candidate, from round 2.
      expect(projection.candidate?.candidate_id).toBe(projection.repair_runs[1]?.to_candidate_id);
      // Round 1 commits no candidate_ready: its plan never became one.
      expect((await eventTypes(t)).join(" ")).toBe(
        "auto_run_started candidate_ready auto_audit_started auto_audit_completed repair_started repair_completed " +
          "repair_started candidate_ready repair_completed auto_audit_started auto_audit_completed auto_run_terminal",
      );
    });

    it("AM.budgets.7: a check that throws, answers nonsense or is indeterminate fails closed; with every round spent the run ends completed_with_issues(budget_exhausted)", async () => {
      const port = checkPort([
        async () => {
          throw new Error("the provider crashed");
        },
        async () => ({ decision: "ALLOW!", receipt_id: "x".repeat(300) }),
      ]);
      const { projection } = await runWith({
        reviewers: [fakeReviewer("fake-judge")],
        repair: { engine: repairAgent(() => corrected()), check: port.check },
      });
      expect(projection.problems).toEqual([]);
      expect(projection.terminal).toMatchObject(ROUNDS_SPENT);
      // An indeterminate check is no verdict on the plan: the same plan is checked again.
      const digest = expect.stringMatching(/^sha256:[0-9a-f]{64}$/);
      expect(projection.repair_runs.map((r) => [r.outcome, r.check])).toEqual([
        ["rejected", { decision: "indeterminate", receipt_id: null, plan_digest: digest }],
        ["rejected", { decision: "indeterminate", receipt_id: null, plan_digest: digest }],
      ]);
      expect(port.seen).toHaveLength(2);
      // The reviewed candidate is the only one: nothing denied was ever a candidate.
      expect(projection.candidate?.parent_candidate_id).toBeNull();
    });

    it("AM.stage8.1 AM.budgets.8: with the loop circuits on, the same plan denied twice opens the no-progress circuit; the repeat is not checked again", async () => {
      const port = checkPort([async () => ({ decision: "deny", receipt_id: "receipt-1" })]);
      const { projection } = await runWith(
        {
          reviewers: [fakeReviewer("fake-judge")],
          repair: { engine: repairAgent(() => corrected()), check: port.check },
        },
        { flags: ["stage8_loop_circuits"] },
      );
      expect(projection.problems).toEqual([]);
      expect(projection.terminal).toMatchObject({ state: "completed_with_issues", stop_reason: "loop_detected" });
      // One gate evaluation: the repeat is decided by the first denial, its receipt named.
      expect(port.seen).toHaveLength(1);
      const [first, second] = projection.repair_runs;
      expect(first?.check).toEqual({
        decision: "deny",
        receipt_id: "receipt-1",
        plan_digest: expect.stringMatching(/^sha256:/),
      });
      expect(second?.check).toEqual({
        decision: "deny",
        receipt_id: "receipt-1",
        plan_digest: first?.check?.plan_digest,
        repeat_of: first?.repair_run_id,
      });
      expect(projection.candidate?.parent_candidate_id).toBeNull();
      expect(projection.ledger?.circuits.no_progress).toBe("open");
      expect(projection.ledger?.same_action_no_delta[first?.check?.plan_digest ?? ""]).toBe(2);
    });

    it("AM.budgets.8: a different plan after a denial is checked again; without the loop circuits a repeated denied plan spends the round", async () => {
      const differing = checkPort([
        async () => ({ decision: "deny", receipt_id: "receipt-1" }),
        async () => ({ decision: "deny", receipt_id: "receipt-2" }),
      ]);
      let n = 0;
      const other = await runWith(
        {
          reviewers: [fakeReviewer("fake-judge")],
          repair: {
            engine: repairAgent(() => corrected("result.csv", `x,y\n1,${42 + n++}\n`)),
            check: differing.check,
          },
        },
        { flags: ["stage8_loop_circuits"] },
      );
      expect(other.projection.problems).toEqual([]);
      expect(other.projection.terminal).toMatchObject(ROUNDS_SPENT);
      expect(differing.seen).toHaveLength(2);
      const off = checkPort([async () => ({ decision: "deny", receipt_id: "receipt-1" })]);
      const { projection } = await runWith({
        reviewers: [fakeReviewer("fake-judge")],
        repair: { engine: repairAgent(() => corrected()), check: off.check },
      });
      expect(projection.problems).toEqual([]);
      expect(projection.terminal).toMatchObject(ROUNDS_SPENT);
      expect(off.seen).toHaveLength(1);
      expect(projection.repair_runs[1]?.check?.repeat_of).toBe(projection.repair_runs[0]?.repair_run_id);
    });

    it("AM.durable.5: a repeat naming no earlier denial of the same plan projects the safety boundary", async () => {
      const port = checkPort([async () => ({ decision: "deny", receipt_id: "receipt-1" })]);
      const { t } = await runWith(
        {
          reviewers: [fakeReviewer("fake-judge")],
          repair: { engine: repairAgent(() => corrected()), check: port.check },
        },
        { flags: ["stage8_loop_circuits"] },
      );
      const input = await projectionInputOf(t.store, runIdOf(RUN));
      const forged = patchBodies(input, "auto.repair_run", (body) => {
        const check = (body as { check?: { repeat_of?: string } }).check;
        return check?.repeat_of !== undefined ? { check: { ...check, receipt_id: "receipt-forged" } } : {};
      });
      const p = projectAutoRun(forged);
      expect(p.terminal_reason).toBe("safety_boundary");
      expect(p.problems.join("\n")).toMatch(/repeats a denial no earlier round of this plan made/);
      // The other way: the repeat rewritten as if the host had judged the denied plan again.
      const rejudged = patchBodies(input, "auto.repair_run", (body) => {
        const check = (body as { check?: { repeat_of?: string } }).check;
        if (check?.repeat_of === undefined) return {};
        const { repeat_of: _, ...again } = check;
        return { check: { ...again, receipt_id: "receipt-2" } };
      });
      expect(projectAutoRun(rejudged).problems.join("\n")).toMatch(/judged again a plan .* denied/);
    });

    it("AM.stage9.1: the check judges the candidate's whole change: a file the producer removed is sent to it as deleted", async () => {
      const t = await setup();
      const time = manualTime();
      const dir = mkdtempSync(join(tmpdir(), "asp-auto-repair-del-"));
      dirs.push(dir);
      const workspace = await createScratchWorkspace({ dir });
      // Filled before the run first touches it: old.txt is part of the workspace's start.
      writeFileSync(join(dir, "old.txt"), "the producer removes me\n");
      await workspace.write("result.csv", utf8.encode("x,y\n1,41\n"));
      // Out of band, as a producer's command would: the workspace holds the removal.
      const engine = workspaceProducer(() => rmSync(join(dir, "old.txt")));
      const seen: Array<{ files: string[]; deleted: ReadonlyArray<string> }> = [];
      const runner = createAutoRunner({
        store: t.store,
        engine,
        workspace,
        permissions: allowAll,
        reviewers: [fakeReviewer("fake-judge")],
        repair: {
          engine: repairAgent(() => corrected()),
          check: async (request) => {
            seen.push({ files: request.files.map((f) => f.path), deleted: request.deleted });
            return { decision: "allow", receipt_id: "receipt-1" };
          },
        },
        flags: createStageFlags(BASE_FLAGS),
        clock: time.clock,
        timers: time.timers,
      });
      const projection = await runner.run({ run: RUN, selection: AUTO_FIX });
      expect(projection.problems).toEqual([]);
      expect(projection.user_truth).toBe("Verified");
      expect(seen).toEqual([{ files: ["result.csv"], deleted: ["old.txt"] }]);
    });

    it("AM.durable.5: a history that applied a plan its check denied, or rejected one it allowed, projects the safety boundary", async () => {
      const input = await verifiedHistory();
      const applied = projectAutoRun(
        patchBodies(input, "auto.repair_run", () => ({ check: { decision: "deny", receipt_id: "r" } })),
      );
      expect(applied.terminal_reason).toBe("safety_boundary");
      expect(applied.problems.join("\n")).toMatch(/applied a plan the host's check decided deny/);
    });
  });

  it("a checkpoint that does not verify projects the safety boundary", async () => {
    const input = await verifiedHistory();
    const fact = input.facts.find((f) => f.kind === "auto.repair_run");
    if (fact === undefined) return expect.fail("no Repair Run committed");
    const digest = (fact.record as { body: { checkpoint: { digest: string } } }).body.checkpoint.digest;
    const p = projectAutoRun({ ...input, snapshots: { ...input.snapshots, [digest]: null } });
    expect(p.terminal_reason).toBe("safety_boundary");
    expect(p.problems.join("\n")).toMatch(/checkpoint .* does not verify/);
  });

  it("every repair row of the run machine names its test, and a reload projects the same", async () => {
    const rows = RUN_MACHINE.filter((r) => r.module === "repair");
    expect(rows.map((r) => `${r.from} --${r.on}--> ${r.to}`)).toEqual([
      "candidate --repair_started--> repairing",
      "repairing --step:turn--> repairing",
      "repairing --step:admitted--> repair_acting",
      "repair_acting --step:executed--> repairing",
      "repairing --step:refused--> repairing",
      "repair_acting --step:refused--> repairing",
      "repair_acting --auto_run_terminal--> terminal",
      "repairing --candidate_ready--> repaired",
      "repaired --repair_completed--> candidate",
      "repairing --repair_completed--> candidate",
      "repairing --auto_run_terminal--> terminal",
      "repaired --auto_run_terminal--> terminal",
    ]);
    for (const r of rows) expect(r.test).toMatch(/^repair\.test\.ts: /);
    const agent = repairAgent(() => corrected());
    const { t, projection } = await runWith({ reviewers: [fakeReviewer("fake-judge")], repair: { engine: agent } });
    expect(await loadAutoRunProjection(t.store, runIdOf(RUN))).toEqual(projection);
  });
});
