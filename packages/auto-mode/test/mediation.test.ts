import { existsSync, linkSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ActionResult } from "@asp/contracts";
import { type Digest, digestBytes, type FactInput, type FactLog, readSnapshot } from "@asp/evidence";
import { type BudgetSet, createStageFlags, DEFAULT_BUDGETS, type StageFlags } from "@asp/rollout";
import { afterEach, describe, expect, it } from "vitest";
import {
  type ActionWorkspace,
  AUTO_STEP_KIND,
  type AutoRunnerOptions,
  canonicalizeAction,
  createAutoRunner,
  createScratchWorkspace,
  type Engine,
  type EngineStep,
  loadAutoRunProjection,
  modelFingerprint,
  type PermissionClassifier,
  projectAutoRun,
  type ReviewerPort,
  readRunFacts,
  runIdOf,
  runStateKey,
} from "../src/index.js";
import {
  allowAll,
  completion,
  engineOf,
  fakeReviewer,
  manualTime,
  PRODUCER,
  REVIEW_ONLY,
  RUN,
  tempStores,
} from "./helpers.js";

const setup = tempStores();
const S2 = "stage2_auto_run_storage";
const S4 = "stage4_review_completion_gate";
const S8 = "stage8_loop_circuits";
const folders: string[] = [];
afterEach(() => {
  for (const d of folders.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  folders.push(d);
  return d;
}

async function runWith(
  engine: Engine,
  opts: Partial<AutoRunnerOptions> & { flags?: StageFlags; budgets?: Partial<BudgetSet> } = {},
) {
  const t = await setup();
  const runner = createAutoRunner({
    store: t.store,
    engine,
    reviewers: [fakeReviewer("fake-pass")],
    flags: opts.flags ?? createStageFlags([S2, S4]),
    ...opts,
  });
  const projection = await runner.run({
    run: RUN,
    selection: REVIEW_ONLY,
    budgets: { ...DEFAULT_BUDGETS, ...(opts.budgets ?? {}) },
  });
  const facts = await readRunFacts(t.store.log, runIdOf(RUN));
  return { t, projection, facts };
}

/** Each committed step as `phase:refusal code`. */
function stepCodes(facts: ReadonlyArray<{ kind: string; record: unknown }>): string[] {
  return facts
    .filter((f) => f.kind === AUTO_STEP_KIND)
    .map((f) => (f.record as { body: { phase: string; refusal: { code: string } | null } }).body)
    .map((s) => `${s.phase}:${s.refusal?.code ?? ""}`);
}

async function workspaceWith(files: Record<string, string>): Promise<{ dir: string; workspace: ActionWorkspace }> {
  const dir = tempDir("asp-auto-ws-");
  const workspace = await createScratchWorkspace({ dir });
  for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, path), text);
  return { dir, workspace };
}

describe("Auto Mode I: budgets bound a run (wall time, tokens, engine turns)", () => {
  it("AM.budgets.5 AM.terminals.3 AM.invariants.8: an Engine that streams prose forever and ignores its signal ends budget_exhausted(wall_time_s) when the deadline passes", async () => {
    const time = manualTime();
    let yielded = 0;
    const engine = engineOf(async function* () {
      for (;;) {
        yielded += 1;
        if (yielded === 3) time.advance(5_000); // the deadline passes while it streams
        yield { kind: "prose", text: "still thinking " };
        await new Promise((r) => setImmediate(r));
      }
    });
    const { projection, facts } = await runWith(engine, { ...time, budgets: { wall_time_s: 5 } });
    expect(projection.terminal_reason).toBe("budget_exhausted");
    expect(projection.terminal?.exhausted_limit).toBe("wall_time_s");
    expect(projection.label).toBe("Paused · Budget exhausted · wall_time_s");
    expect(projection.problems).toEqual([]);
    expect(yielded).toBeLessThan(10);
    expect(facts.some((f) => f.kind === "auto.candidate")).toBe(false);
    expect(time.armed()).toBe(0);
  });

  it("AM.budgets.5 AM.invariants.8: an Engine that hangs without a step is aborted by the wall-time timer; its signal aborts", async () => {
    const time = manualTime();
    let aborted = false;
    const engine: Engine = {
      actor: PRODUCER,
      run(params) {
        params.signal.addEventListener("abort", () => {
          aborted = true;
        });
        return {
          next: () => {
            // The deadline passes while the Engine holds its first step (and never answers).
            setImmediate(() => time.advance(6_000));
            return new Promise<IteratorResult<EngineStep>>(() => {});
          },
        };
      },
    };
    const { projection } = await runWith(engine, { ...time, budgets: { wall_time_s: 5 } });
    expect(aborted).toBe(true);
    expect(projection.terminal?.exhausted_limit).toBe("wall_time_s");
    expect(projection.problems).toEqual([]);
  });

  it("AM.budgets.5 AM.budgets.6: the producing run is the initial turn: its turns' tokens are the base of the 1.5x budget, recorded in the ledger", async () => {
    const engine = engineOf(async function* () {
      yield { kind: "turn", usage: { input_tokens: 80, output_tokens: 20 } };
      yield { kind: "turn", usage: { input_tokens: 90, output_tokens: 10 } };
      yield { kind: "turn", usage: { input_tokens: 40, output_tokens: 10 } };
      yield completion();
    });
    const { projection } = await runWith(engine);
    expect(projection.state).toBe("verified");
    expect(projection.ledger?.initial_turn_tokens).toBe(250);
    expect(projection.ledger?.consumed.extra_tokens).toBe(0);
    expect(projection.steps.map((s) => s.phase)).toEqual(["turn", "turn", "turn"]);
    expect(projection.problems).toEqual([]);
  });

  it("AM.budgets.5 AM.budgets.6: a Reviewer's answer spends its reported tokens from the extra budget; spent, no retry is admitted: budget_exhausted(extra_token_multiplier)", async () => {
    const engine = () =>
      engineOf(async function* () {
        yield { kind: "turn", usage: { input_tokens: 90, output_tokens: 10 } };
        yield completion();
      });
    let calls = 0;
    const reviewer = (answer: (call: number) => unknown): ReviewerPort => ({
      identity: { actor_id: "reviewer-tokens", session_id: "rs-tokens", fingerprint: "model-b;cfg-1" },
      verifier: {
        verify: async () => {
          calls += 1;
          return answer(calls) as never;
        },
      },
    });
    // A pass that cost 40 tokens: Verified, the 40 in the committed ledger.
    const paid = await runWith(engine(), {
      reviewers: [
        reviewer(() => ({
          kind: "review",
          verdict: "pass",
          findings: [],
          usage: { input_tokens: 30, output_tokens: 10 },
        })),
      ],
    });
    expect(paid.projection.state).toBe("verified");
    expect(paid.projection.ledger?.consumed.extra_tokens).toBe(40);
    // An inadmissible answer that cost 160 tokens (over 1.5 x 100): the retry is never admitted.
    calls = 0;
    const spent = await runWith(engine(), {
      reviewers: [
        reviewer(() => ({
          kind: "review",
          verdict: "maybe",
          findings: [],
          usage: { input_tokens: 150, output_tokens: 10 },
        })),
      ],
    });
    expect(calls).toBe(1);
    expect(spent.projection.terminal_reason).toBe("budget_exhausted");
    expect(spent.projection.terminal?.exhausted_limit).toBe("extra_token_multiplier");
    expect(spent.projection.label).toBe("Paused · Budget exhausted · extra_token_multiplier");
    expect(spent.projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual(["unparseable"]);
    expect(spent.projection.problems).toEqual([]);
    // The same answer reporting no usage is retried (nothing says the budget is spent).
    calls = 0;
    const silent = await runWith(engine(), {
      reviewers: [reviewer(() => ({ kind: "review", verdict: "maybe", findings: [] }))],
    });
    expect(calls).toBe(2);
    expect(silent.projection.state).toBe("review_unavailable");
  });

  it("AM.terminals.3: a budget_exhausted terminal the committed ledger does not prove projects the safety boundary", async () => {
    const time = manualTime();
    const engine = engineOf(async function* () {
      time.advance(5_000);
      yield { kind: "prose", text: "x" };
    });
    const { t, facts } = await runWith(engine, { ...time, budgets: { wall_time_s: 5 } });
    // Forge: the ledger committed with the terminal says the run started later than it did.
    const forged = facts.map((f) => {
      if (f.kind !== "auto.budget_ledger") return f;
      const r = f.record as { event_id: string; body: { started_at: string } };
      return { ...f, record: { ...r, body: { ...r.body, started_at: "2026-12-02T00:00:04.000Z" } } };
    });
    const real = await loadAutoRunProjection(t.store, runIdOf(RUN));
    expect(real.terminal_reason).toBe("budget_exhausted");
    const p = projectAutoRun({ runId: runIdOf(RUN), facts: forged, snapshots: {}, payloadsVerified: {} });
    expect(p.terminal_reason).toBe("safety_boundary");
    expect(p.problems.join("\n")).toMatch(/budget_exhausted\(wall_time_s\) is not what the committed ledger proves/);
  });
});

describe("Auto Mode I: the agent's actions are mediated by the host", () => {
  it("AM.invariants.6 AM.select.6: a read and a write run through the host's adapters; the written file is the candidate's Artifact, reviewed and Verified", async () => {
    const { dir, workspace } = await workspaceWith({ "notes.txt": "draft\n" });
    const engine = engineOf(async function* (results) {
      yield { kind: "action", action: { tool: "read_file", arguments: { path: "notes.txt" }, call_id: "c1" } };
      yield { kind: "turn", usage: { input_tokens: 10, output_tokens: 5 } };
      const read = results[0];
      yield {
        kind: "action",
        action: {
          tool: "write_file",
          arguments: { path: "out/answer.txt", content: `${read?.status === "executed" ? read.output : "?"}final\n` },
        },
      };
      yield { kind: "turn", usage: { input_tokens: 10, output_tokens: 5 } };
      yield { kind: "completion", payload: "Wrote out/answer.txt", artifacts: [], evidence: [] };
    });
    const { projection } = await runWith(engine, { workspace, permissions: allowAll });
    expect(projection.problems).toEqual([]);
    expect(projection.state).toBe("verified");
    expect(readFileSync(join(dir, "out/answer.txt"), "utf8")).toBe("draft\nfinal\n");
    expect(projection.candidate?.artifact_versions.map((a) => a.artifact_id)).toEqual(["out/answer.txt"]);
    expect(projection.steps.map((s) => `${s.phase}:${s.action?.tool ?? ""}`)).toEqual([
      "admitted:read_file",
      "executed:read_file",
      "turn:",
      "admitted:write_file",
      "executed:write_file",
      "turn:",
    ]);
    expect(projection.steps[4]?.result?.delta).toBe(true);
  });

  it.each([
    [
      "an unknown tool",
      { tool: "http_get", arguments: { url: "https://example.com" } },
      "policy_requires_explicit_setup",
      "unknown_tool",
    ],
    [
      "a target that cannot be canonicalized",
      { tool: "read_file", arguments: { path: "" } },
      "policy_requires_explicit_setup",
      "not_canonical",
    ],
    [
      "curl, which policy leaves at ask with no channel",
      { tool: "run_command", arguments: { argv: ["curl", "https://example.com"] } },
      "policy_requires_explicit_setup",
      "ask_without_channel",
    ],
    [
      "a write outside the workspace",
      { tool: "write_file", arguments: { path: "../escaped.txt", content: "x" } },
      "safety_boundary",
      "ASP_AUTO_MODE_PATH_ESCAPE",
    ],
    [
      "an absolute path",
      { tool: "read_file", arguments: { path: "/etc/passwd" } },
      "safety_boundary",
      "ASP_AUTO_MODE_PATH_ESCAPE",
    ],
  ])(
    "AM.terminals.2 AM.invariants.6: %s is refused, its audit committed, nothing executed",
    async (_n, action, reason, code) => {
      const { dir, workspace } = await workspaceWith({});
      const engine = engineOf(async function* () {
        yield { kind: "action", action };
        yield completion();
      });
      const { projection } = await runWith(engine, { workspace, permissions: allowAll });
      expect(projection.terminal_reason).toBe(reason);
      expect(projection.steps.map((s) => s.phase)).toEqual(["refused"]);
      expect(projection.steps[0]?.refusal?.code).toBe(code);
      expect(projection.steps[0]?.refusal?.terminal).toBe(reason);
      if (reason !== "safety_boundary")
        expect(projection.label).toMatch(/^Blocked · Policy requires explicit setup · /);
      expect(existsSync(join(dir, "..", "escaped.txt"))).toBe(false);
      expect(projection.candidate).toBeNull();
    },
  );

  it("AM.states.9: a link planted in the workspace is never followed: writing through it is the safety boundary, the outside file untouched", async () => {
    const outside = tempDir("asp-auto-outside-");
    writeFileSync(join(outside, "target.txt"), "outside\n");
    const { dir, workspace } = await workspaceWith({});
    symlinkSync(outside, join(dir, "link"));
    const engine = engineOf(async function* () {
      yield {
        kind: "action",
        action: { tool: "write_file", arguments: { path: "link/target.txt", content: "pwned" } },
      };
      yield completion();
    });
    const { projection, facts } = await runWith(engine, { workspace, permissions: allowAll });
    expect(projection.terminal_reason).toBe("safety_boundary");
    expect(readFileSync(join(outside, "target.txt"), "utf8")).toBe("outside\n");
    expect(stepCodes(facts)).toEqual(["admitted:", "refused:ASP_AUTO_MODE_PATH_ESCAPE"]);
  });

  it("AM.states.9: a hard link to an outside file is neither read nor written through: the safety boundary, the outside file untouched", async () => {
    const outside = tempDir("asp-auto-outside-");
    const victim = join(outside, "victim.txt");
    writeFileSync(victim, "outside secret\n");
    const { dir, workspace } = await workspaceWith({});
    linkSync(victim, join(dir, "shared.txt"));
    for (const action of [
      { tool: "read_file", arguments: { path: "shared.txt" } },
      { tool: "write_file", arguments: { path: "shared.txt", content: "pwned" } },
    ]) {
      let seen: ActionResult | undefined;
      const engine = engineOf(async function* () {
        seen = yield { kind: "action", action };
        yield completion();
      });
      const { projection, facts } = await runWith(engine, { workspace, permissions: allowAll });
      expect(projection.terminal_reason).toBe("safety_boundary");
      expect(seen).toBeUndefined();
      expect(stepCodes(facts)).toEqual(["admitted:", "refused:ASP_AUTO_MODE_PATH_ESCAPE"]);
    }
    expect(readFileSync(victim, "utf8")).toBe("outside secret\n");
  });

  it("AM.terminals.2: without a permission policy every action is ask, refused headless; without a workspace no tools are offered", async () => {
    let offered = -1;
    const engine: Engine = {
      actor: PRODUCER,
      async *run(params): AsyncGenerator<EngineStep, void, ActionResult | undefined> {
        offered = params.tools.length;
        yield { kind: "action", action: { tool: "read_file", arguments: { path: "a.txt" } } };
      },
    };
    const { projection } = await runWith(engine);
    expect(offered).toBe(0);
    expect(projection.terminal_reason).toBe("policy_requires_explicit_setup");
    expect(projection.steps[0]?.refusal?.code).toBe("ask_without_channel");
  });

  it("AM.states.9: a refusal audit that cannot commit ends at the safety boundary, never the refusal's own reason", async () => {
    const t = await setup();
    const log: FactLog = new Proxy(t.store.log, {
      get(target, prop, receiver) {
        if (prop === "append") {
          return async (entries: readonly FactInput[]) => {
            if (entries.some((e) => e.kind === AUTO_STEP_KIND)) throw new Error("fault injection: disk full");
            return target.append(entries);
          };
        }
        return Reflect.get(target, prop, receiver);
      },
    });
    const engine = engineOf(async function* () {
      yield { kind: "action", action: { tool: "http_get", arguments: {} } };
    });
    const p = await createAutoRunner({
      store: { log, objects: t.store.objects },
      engine,
      reviewers: [],
      flags: createStageFlags([S2, S4]),
    }).run({ run: RUN, selection: REVIEW_ONLY });
    expect(p.terminal_reason).toBe("safety_boundary");
    expect(p.problems).toEqual([]);
  });

  it("a command runs under bubblewrap with no network, in the workspace", async () => {
    if (!existsSync("/usr/bin/bwrap")) return expect.fail("bubblewrap is required: apt-get install bubblewrap");
    const { workspace } = await workspaceWith({ "data.txt": "hello from the workspace\n" });
    const engine = engineOf(async function* (results) {
      yield { kind: "action", action: { tool: "run_command", arguments: { argv: ["cat", "data.txt"] } } };
      yield {
        kind: "completion",
        payload: results[0]?.status === "executed" ? results[0].output : "no output",
        artifacts: [],
        evidence: [],
      };
    });
    const { projection } = await runWith(engine, { workspace, permissions: allowAll });
    expect(projection.problems).toEqual([]);
    expect(projection.steps.map((s) => s.phase)).toEqual(["admitted", "executed"]);
    expect(projection.steps[1]?.result?.exit_code).toBe(0);
    expect(projection.state).toBe("verified");
  });

  it("canonical digests: a path spelled two ways and arguments in another order are one action", () => {
    const a = canonicalizeAction({ tool: "write_file", arguments: { path: "./src/../b.txt", content: "x" } });
    const b = canonicalizeAction({ tool: "write_file", arguments: { content: "x", path: "b.txt" } });
    const c = canonicalizeAction({ tool: "write_file", arguments: { content: "y", path: "b.txt" } });
    if (!a.ok || !b.ok || !c.ok) throw new Error("not canonical");
    expect(a.action.digest).toBe(b.action.digest);
    expect(c.action.digest).not.toBe(a.action.digest);
    expect(a.action.target).toBe("b.txt");
  });
});

describe("Auto Mode I: loop circuits (Stage 8)", () => {
  const repeat = () =>
    engineOf(async function* () {
      for (let i = 0; i < 10; i++) {
        yield { kind: "action", action: { tool: "read_file", arguments: { path: i % 2 === 0 ? "a.txt" : "./a.txt" } } };
      }
      yield completion();
    });

  it("AM.budgets.8 AM.stage8.1 AM.terminals.6: the same action without a durable delta, renamed, stops loop_detected at the limit, the circuit in the ledger", async () => {
    const { workspace } = await workspaceWith({ "a.txt": "same\n" });
    const { projection } = await runWith(repeat(), {
      workspace,
      permissions: allowAll,
      flags: createStageFlags([S2, S4, S8]),
    });
    expect(projection.terminal_reason).toBe("loop_detected");
    expect(projection.user_truth).toBe("Paused/Blocked · Loop detected");
    expect(projection.ledger?.circuits.no_progress).toBe("open");
    expect(projection.steps.filter((s) => s.phase === "executed")).toHaveLength(3);
    expect(projection.problems).toEqual([]);
  });

  it("AM.budgets.4: with Stage 8 off the same repeats are not counted", async () => {
    const { workspace } = await workspaceWith({ "a.txt": "same\n" });
    const { projection } = await runWith(repeat(), { workspace, permissions: allowAll });
    expect(projection.steps.filter((s) => s.phase === "executed")).toHaveLength(10);
    expect(projection.state).toBe("verified");
  });

  it("AM.budgets.8: turns without Artifact progress open the no-progress circuit", async () => {
    const engine = engineOf(async function* () {
      yield { kind: "turn", usage: { input_tokens: 1000, output_tokens: 0 } };
      for (let i = 0; i < 10; i++) yield { kind: "turn", usage: { input_tokens: 1, output_tokens: 0 } };
      yield completion();
    });
    const { projection } = await runWith(engine, { flags: createStageFlags([S2, S4, S8]) });
    expect(projection.terminal_reason).toBe("loop_detected");
    expect(projection.steps).toHaveLength(DEFAULT_BUDGETS.no_progress_turn_limit);
  });
});

describe("Auto Mode I: identity and truth fixes", () => {
  it("AM.invariants.2 AM.states.6: excluded actors are frozen with the run: an excluded Reviewer is never selected", async () => {
    const reviewer = fakeReviewer("fake-pass");
    const { projection, facts } = await runWith(
      engineOf(async function* () {
        yield completion();
      }),
      {
        reviewers: [reviewer],
        excludedActors: [{ actor_id: reviewer.identity.actor_id, session_id: "repair-session" }],
      },
    );
    expect(projection.terminal?.unavailable_reason).toBe("reviewer_independence_unavailable");
    const run = facts.find((f) => f.kind === "auto.run")?.record as {
      body: { independence: { excluded_actors: unknown[] } };
    };
    expect(run.body.independence.excluded_actors).toEqual([
      { actor_id: reviewer.identity.actor_id, session_id: "repair-session" },
    ]);
  });

  it("AM.states.6: a producer and a Reviewer on the same model have the same canonical fingerprint, so the default policy refuses the pair", async () => {
    const fp = modelFingerprint({ endpoint: "https://api.example.com/v1", model: "gpt-x" });
    expect(modelFingerprint({ endpoint: "https://API.example.com/other", model: " GPT-X " })).toBe(fp);
    const engine: Engine = {
      actor: { ...PRODUCER, fingerprint: fp },
      async *run() {
        yield completion();
      },
    };
    const { projection } = await runWith(engine, { reviewers: [fakeReviewer("fake-pass", { fingerprint: fp })] });
    expect(projection.terminal?.unavailable_reason).toBe("reviewer_independence_unavailable");
  });

  it("AM.terminals.1: an unbuilt stage turned on is refused before anything commits; auto_fix without Stage 5 too", async () => {
    const t = await setup();
    const on = (list: string[]) => ({ isEnabled: (f: string) => list.includes(f) }) as unknown as StageFlags;
    const engine = engineOf(async function* () {
      yield completion();
    });
    const make = (flags: StageFlags) => createAutoRunner({ store: t.store, engine, reviewers: [], flags });
    await expect(
      make(on([S2, S4, "stage10_effect_reconciliation"])).run({ run: RUN, selection: REVIEW_ONLY }),
    ).rejects.toMatchObject({
      code: "ASP_AUTO_MODE_STAGE_NOT_BUILT",
      data: { stages: ["stage10_effect_reconciliation"] },
    });
    await expect(
      make(on([S2, S4])).run({ run: RUN, selection: { ...REVIEW_ONLY, result_review_mode: "auto_fix" } }),
    ).rejects.toMatchObject({ code: "ASP_AUTO_MODE_STAGE_DISABLED", data: { stage: "stage5_auto_repair" } });
    expect(await readRunFacts(t.store.log, runIdOf(RUN))).toEqual([]);
  });
});

describe("Auto Mode I: the user's Stop/Cancel comes through the host", () => {
  it("AM.terminals.3: the host's cancel aborts an Engine that never stops and ends the run user_cancelled; nothing more is admitted", async () => {
    const cancel = new AbortController();
    let yielded = 0;
    let sawAbort = false;
    const engine: Engine = {
      actor: PRODUCER,
      run(params) {
        params.signal.addEventListener("abort", () => {
          sawAbort = true;
        });
        return (async function* (): AsyncGenerator<EngineStep, void, ActionResult | undefined> {
          for (;;) {
            yielded += 1;
            if (yielded === 3) cancel.abort(); // the user presses Stop while it streams
            yield { kind: "prose", text: "still going " };
            await new Promise((r) => setImmediate(r));
          }
        })();
      },
    };
    const t = await setup();
    const projection = await createAutoRunner({
      store: t.store,
      engine,
      reviewers: [fakeReviewer("fake-pass")],
      flags: createStageFlags([S2, S4]),
    }).run({ run: RUN, selection: REVIEW_ONLY, cancel: cancel.signal });
    expect(projection.terminal_reason).toBe("user_cancelled");
    expect(projection.problems).toEqual([]);
    expect(sawAbort).toBe(true);
    expect(yielded).toBeLessThanOrEqual(4);
  });

  it("AM.terminals.3: a cancel while the Reviewer answers ends user_cancelled, never Verified", async () => {
    const cancel = new AbortController();
    const reviewer: ReviewerPort = {
      identity: { actor_id: "reviewer-slow", session_id: "rs-slow", fingerprint: "model-b;cfg-1" },
      verifier: {
        verify: () => {
          cancel.abort();
          return new Promise(() => undefined); // never answers
        },
      },
    };
    const t = await setup();
    const projection = await createAutoRunner({
      store: t.store,
      engine: engineOf(async function* () {
        yield completion();
      }),
      reviewers: [reviewer],
      flags: createStageFlags([S2, S4]),
    }).run({ run: RUN, selection: REVIEW_ONLY, cancel: cancel.signal });
    expect(projection.terminal_reason).toBe("user_cancelled");
    expect(projection.state).toBeNull();
    expect(projection.candidate?.review_status).toBe("unverified");
    expect(projection.problems).toEqual([]);
  });
});

describe("Auto Mode I: compare-and-swap on the run's head (conditional append)", () => {
  it("AM.states.3: a newer candidate committed by another writer between the promotion check and the append is never superseded by Verified", async () => {
    const t = await setup();
    const key = `auto.run:${runIdOf(RUN)}`;
    let raced = false;
    const log: FactLog = new Proxy(t.store.log, {
      get(target, prop, receiver) {
        if (prop === "latest") {
          return async (k: string) => {
            const latest = await target.latest(k);
            if (k === key && !raced && latest !== undefined) {
              raced = true;
              // Another writer moves the run to a newer generation right after the check.
              const r = latest.record as { event_id: string; body: { generation: number } };
              await target.append([
                {
                  kind: "auto.run",
                  record: { event_id: "event:other-writer", body: { ...r.body, generation: r.body.generation + 1 } },
                  index: [{ name: "auto.run_id", value: runIdOf(RUN) }],
                  state: [key],
                },
              ]);
            }
            return latest;
          };
        }
        return Reflect.get(target, prop, receiver);
      },
    });
    const engine = engineOf(async function* () {
      yield completion();
    });
    await createAutoRunner({
      store: { log, objects: t.store.objects },
      engine,
      reviewers: [fakeReviewer("fake-pass")],
      flags: createStageFlags([S2, S4]),
    }).run({ run: RUN, selection: REVIEW_ONLY });
    expect(raced).toBe(true);
    const facts = await readRunFacts(t.store.log, runIdOf(RUN));
    const terminals = facts
      .filter((f) => f.kind === "auto.terminal")
      .map((f) => (f.record as { body: { state: string | null; terminal_reason: string | null } }).body);
    expect(terminals.map((x) => x.state ?? x.terminal_reason)).toEqual(["safety_boundary"]);
    expect(
      facts.some(
        (f) =>
          f.kind === "auto.candidate" &&
          (f.record as { body: { review_status: string } }).body.review_status === "verified",
      ),
    ).toBe(false);
  });

  it("AM.states.3: a newer run record another writer commits while the Reviewer answers is never written over, and the reviewed candidate is not Verified", async () => {
    const t = await setup();
    const key = runStateKey(runIdOf(RUN));
    // Before, only the Verified terminal was a compare-and-swap: the attempt's completion landed on
    // top of the other writer's record and became the head the promotion then checked.
    const reviewer: ReviewerPort = {
      identity: { actor_id: "reviewer-race", session_id: "rs-race", fingerprint: "model-b;cfg-1" },
      verifier: {
        verify: async () => {
          const head = await t.store.log.latest(key);
          const r = head?.record as { event_id: string; body: { generation: number } };
          await t.store.log.append([
            {
              kind: "auto.run",
              record: { event_id: "event:other-writer", body: { ...r.body, generation: r.body.generation + 1 } },
              index: [{ name: "auto.run_id", value: runIdOf(RUN) }],
              state: [key],
            },
          ]);
          return { kind: "review", verdict: "pass", findings: [] };
        },
      },
    };
    const engine = engineOf(async function* () {
      yield completion();
    });
    const projection = await createAutoRunner({
      store: t.store,
      engine,
      reviewers: [reviewer],
      flags: createStageFlags([S2, S4]),
    }).run({ run: RUN, selection: REVIEW_ONLY });
    expect(projection.terminal_reason).toBe("safety_boundary");
    const facts = await readRunFacts(t.store.log, runIdOf(RUN));
    // The other writer's record is still there, after it only the unconditional safety boundary.
    const runs = facts.filter((f) => f.kind === "auto.run").map((f) => (f.record as { event_id: string }).event_id);
    expect(runs.indexOf("event:other-writer")).toBe(runs.length - 2);
    expect(
      facts.some((f) => f.kind === "auto.event" && (f.record as { type: string }).type === "auto_audit_completed"),
    ).toBe(false);
  });

  it("AM.states.1: two writers starting one run identity at once: one run, the other ASP_AUTO_MODE_RUN_EXISTS", async () => {
    const t = await setup();
    const make = () =>
      createAutoRunner({
        store: t.store,
        engine: engineOf(async function* () {
          yield completion();
        }),
        reviewers: [fakeReviewer("fake-pass")],
        flags: createStageFlags([S2, S4]),
      }).run({ run: RUN, selection: REVIEW_ONLY });
    const results = await Promise.allSettled([make(), make()]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const rejected = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(rejected.reason).toMatchObject({ code: "ASP_AUTO_MODE_RUN_EXISTS" });
    const started = (await readRunFacts(t.store.log, runIdOf(RUN))).filter(
      (f) => f.kind === "auto.event" && (f.record as { type: string }).type === "auto_run_started",
    );
    expect(started).toHaveLength(1);
  });
});

describe("Auto Mode I: what the review of the change found (issue 25)", () => {
  it("AM.invariants.8: an Engine with tools is refused without a stage that owns the wall-time budget", async () => {
    const { workspace } = await workspaceWith({});
    const t = await setup();
    const engine = engineOf(async function* () {
      yield completion();
    });
    await expect(
      createAutoRunner({
        store: t.store,
        engine,
        reviewers: [],
        flags: createStageFlags([S2, "stage3_scientific_review_shadow"]),
        workspace,
        permissions: allowAll,
      }).run({ run: RUN, selection: REVIEW_ONLY }),
    ).rejects.toMatchObject({ code: "ASP_AUTO_MODE_STAGE_DISABLED", data: { stage: S4 } });
    expect(await readRunFacts(t.store.log, runIdOf(RUN))).toEqual([]);
  });

  it("AM.invariants.8: a command that never ends is killed at its time limit; the run goes on", async () => {
    const dir = tempDir("asp-auto-ws-");
    const workspace = await createScratchWorkspace({ dir, commandTimeoutMs: 300 });
    const permissions: PermissionClassifier = {
      classify: () => ({ outcome: "allow", reason: "test policy allows", fenced: false }),
    };
    const engine = engineOf(async function* (results) {
      yield { kind: "action", action: { tool: "run_command", arguments: { argv: ["sleep", "100000"] } } };
      yield {
        kind: "completion",
        payload: results[0]?.status === "executed" ? (results[0].output.split("\n")[0] ?? "") : "none",
        artifacts: [],
        evidence: [],
      };
    });
    const { projection } = await runWith(engine, { workspace, permissions });
    expect(projection.steps.map((s) => s.phase)).toEqual(["admitted", "executed"]);
    expect(projection.steps[1]?.result?.exit_code).toBeNull();
    expect(projection.problems).toEqual([]);
  });

  it("AM.invariants.6: a file a command changes is a write under policy: one policy does not allow ends the run; one it allows is an Artifact", async () => {
    const onlySrc: PermissionClassifier = {
      classify: (action) =>
        action.tool === "write_file" && !(action.path ?? "").startsWith("src/")
          ? { outcome: "ask", reason: "permissions.default is ask", fenced: false }
          : { outcome: "allow", reason: "permissions.rules[0] says allow", fenced: false },
    };
    const command = (path: string) =>
      engineOf(async function* () {
        yield {
          kind: "action",
          action: { tool: "run_command", arguments: { argv: ["sh", "-c", `mkdir -p src && echo made > ${path}`] } },
        };
        yield { kind: "completion", payload: "done", artifacts: [], evidence: [] };
      });
    const outside = await workspaceWith({});
    const refused = await runWith(command("notes.txt"), { workspace: outside.workspace, permissions: onlySrc });
    expect(refused.projection.terminal_reason).toBe("policy_requires_explicit_setup");
    expect(refused.projection.steps.at(-1)?.refusal?.code).toBe("command_write_refused");
    const inside = await workspaceWith({});
    const allowed = await runWith(command("src/made.txt"), { workspace: inside.workspace, permissions: onlySrc });
    expect(allowed.projection.state).toBe("verified");
    expect(allowed.projection.candidate?.artifact_versions.map((a) => a.artifact_id)).toEqual(["src/made.txt"]);
    expect(allowed.projection.steps[1]?.result?.delta).toBe(true);
  });

  it("AM.invariants.6: a file a command removes is in the candidate's change manifest, so the Reviewer sees the deletion", async () => {
    const { workspace } = await workspaceWith({ "keep.txt": "keep\n", "gone.txt": "gone\n" });
    const engine = engineOf(async function* () {
      yield { kind: "action", action: { tool: "run_command", arguments: { argv: ["rm", "gone.txt"] } } };
      yield { kind: "action", action: { tool: "write_file", arguments: { path: "new.txt", content: "new\n" } } };
      yield { kind: "completion", payload: "removed gone.txt", artifacts: [], evidence: [] };
    });
    const allowRm: PermissionClassifier = {
      classify: () => ({ outcome: "allow", reason: "permissions.rules[0] says allow", fenced: false }),
    };
    const { t, projection } = await runWith(engine, { workspace, permissions: allowRm });
    expect(projection.state).toBe("verified");
    // A removal is no Artifact (there are no bytes), but the manifest names it.
    expect(projection.candidate?.artifact_versions.map((a) => a.artifact_id)).toEqual(["new.txt"]);
    const snap = await readSnapshot(t.store, projection.candidate?.snapshot_digest as Digest);
    const ref = snap.refs.find((r) => r.name === "changes");
    expect(ref).toBeDefined();
    const manifest = JSON.parse(new TextDecoder().decode(await t.store.objects.readBlob(ref?.digest as Digest)));
    expect(manifest).toEqual([
      { path: "gone.txt", digest: null },
      { path: "new.txt", digest: digestBytes(new TextEncoder().encode("new\n")) },
    ]);
    expect(
      projection.steps.find((st) => st.phase === "executed" && st.action?.tool === "run_command")?.result?.delta,
    ).toBe(true);
  });

  it("AM.invariants.6: an Engine's claimed Artifacts are not the candidate's when the host holds a workspace", async () => {
    const { workspace } = await workspaceWith({});
    const engine = engineOf(async function* () {
      yield completion();
    });
    const { projection } = await runWith(engine, { workspace, permissions: allowAll });
    expect(projection.candidate?.artifact_versions).toEqual([]);
  });

  it("credential-shaped starting files are left out of the workspace: the agent never reads them", async () => {
    const t = await setup();
    const src = tempDir("asp-auto-src-");
    writeFileSync(join(src, ".env"), "SECRET=1\n");
    writeFileSync(join(src, "app.txt"), "app\n");
    const { snapshotWorktree } = await import("@asp/evidence");
    const snap = await snapshotWorktree(src, { store: { id: t.store.id, objects: t.store.objects } });
    const dir = tempDir("asp-auto-ws-");
    const workspace = await createScratchWorkspace({
      dir,
      from: { objects: t.store.objects, tree: snap.tree },
      omit: (path) => path.endsWith(".env"),
    });
    expect(await workspace.read("app.txt")).not.toBeNull();
    expect(await workspace.read(".env")).toBeNull();
    expect(existsSync(join(dir, ".env"))).toBe(false);
  });
});

describe("Auto Mode I: the command sandbox's limits", () => {
  it("AM.invariants.8: a command runs with bounded file size and descriptors, and without network interfaces beyond loopback", async () => {
    const { workspace } = await workspaceWith({});
    const ran = await workspace.run(
      ["sh", "-c", "ulimit -f; ulimit -n; ls /sys/class/net 2>/dev/null || cat /proc/net/dev"],
      new AbortController().signal,
    );
    expect(ran.exitCode).toBe(0);
    const lines = ran.stdout.trim().split("\n");
    expect(lines[0]).toBe(String(67108864 / 512)); // ulimit -f counts 512-byte blocks
    expect(lines[1]).toBe("1024");
    expect(ran.stdout).not.toMatch(/eth0|ens|wlan/);
    expect(ran.changedPaths).toEqual([]);
  });
});

describe("Auto Mode I: the deadline during review, and the host's own ref names", () => {
  it("AM.budgets.5 AM.invariants.8: a Reviewer attempt still running at the deadline is recorded as timed out and the run ends budget_exhausted(wall_time_s)", async () => {
    const time = manualTime();
    const hanging: ReviewerPort = {
      identity: { actor_id: "reviewer-hangs", session_id: "rs-hang", fingerprint: "model-b;cfg-1" },
      verifier: {
        verify: () => {
          setImmediate(() => time.advance(10_000));
          return new Promise(() => {});
        },
      },
    };
    const engine = engineOf(async function* () {
      yield completion();
    });
    const { projection } = await runWith(engine, {
      ...time,
      reviewers: [hanging],
      attemptTimeoutMs: 3_600_000,
      budgets: { wall_time_s: 5 },
    });
    expect(projection.terminal_reason).toBe("budget_exhausted");
    expect(projection.terminal?.exhausted_limit).toBe("wall_time_s");
    expect(projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual(["timeout"]);
    expect(projection.problems).toEqual([]);
  });

  it("AM.states.9: an Engine's evidence named like the host's own refs is an Agent failure, never a collision at freeze", async () => {
    const engine = engineOf(async function* () {
      yield {
        kind: "completion",
        payload: "p",
        artifacts: [],
        evidence: [{ name: "payload", bytes: new TextEncoder().encode("forged") }],
      };
    });
    const { projection } = await runWith(engine);
    expect(projection.terminal_reason).toBe("agent_failed");
    expect(projection.candidate).toBeNull();
    // The change manifest's name too: an Engine cannot pass off its own list of changes.
    const { workspace } = await workspaceWith({});
    const forged = engineOf(async function* () {
      yield {
        kind: "completion",
        payload: "p",
        artifacts: [],
        evidence: [{ name: "changes", bytes: new TextEncoder().encode("[]") }],
      };
    });
    const second = await runWith(forged, { workspace, permissions: allowAll });
    expect(second.projection.terminal_reason).toBe("agent_failed");
  });
});
