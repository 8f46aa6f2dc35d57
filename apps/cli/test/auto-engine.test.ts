import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { AutoRunProjection } from "@asp/auto-mode";
import { afterEach, describe, expect, it } from "vitest";
import { autoModeCopy } from "./example-copy.js";
import { REPO_ROOT, runBinaryAsync } from "./helpers.js";

// `asp auto run --engine openai`: the signed engine-openai plugin drives a scripted loopback
// chat-completions server; every tool call the "model" makes is a proposal the host classifies under
// the trusted policy and runs itself, in a scratch copy of the repository (issue 25, "Done when").

const ENGINE = join(REPO_ROOT, "plugins", "engine-openai", "dist", "plugin");
const HOST_CHECKS = join(REPO_ROOT, "plugins", "verifier-host-checks", "dist", "plugin");
const KEY = "sk-test-engine-0123456789";

interface Call {
  readonly id: string;
  readonly name: string;
  readonly arguments: Record<string, unknown>;
}
/** One scripted model turn: prose, tool calls, or a stream that never ends. */
type Turn = { readonly text?: string; readonly calls?: readonly Call[] } | "stream-forever";

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
  server = undefined;
});

const frame = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`;
const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  id: "chatcmpl-e2e",
  object: "chat.completion.chunk",
  created: 0,
  model: "e2e-model",
  choices: [{ index: 0, delta, finish_reason: finish }],
});

/** A loopback model: answers the n-th request with the n-th turn (the last one repeats). */
async function modelServer(turns: readonly Turn[]): Promise<{ url: string; requests: unknown[] }> {
  const requests: unknown[] = [];
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (b: Buffer) => {
      body += b.toString("utf8");
    });
    req.on("end", () => {
      requests.push(JSON.parse(body));
      const turn = turns[Math.min(requests.length - 1, turns.length - 1)] as Turn;
      res.writeHead(200, { "content-type": "text/event-stream" });
      if (turn === "stream-forever") {
        const timer = setInterval(() => res.write(frame(chunk({ content: "still thinking... " }))), 50);
        res.on("close", () => clearInterval(timer));
        return;
      }
      res.write(frame(chunk({ role: "assistant", content: turn.text ?? "" })));
      (turn.calls ?? []).forEach((c, index) => {
        res.write(
          frame(
            chunk({
              tool_calls: [
                {
                  index,
                  id: c.id,
                  type: "function",
                  function: { name: c.name, arguments: JSON.stringify(c.arguments) },
                },
              ],
            }),
          ),
        );
      });
      res.write(frame(chunk({}, (turn.calls ?? []).length > 0 ? "tool_calls" : "stop")));
      res.write(
        frame({ ...chunk({}), choices: [], usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 } }),
      );
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests };
}

const asp = (argv: string[]) => runBinaryAsync(argv, { ASP_TEST_ENGINE_KEY: KEY });

/**
 * The example host with the engine plugin, Stages 2, 4 and 8, and a copy of the example policy
 * whose permissions allow writes under src/ and deny curl (the rest stays the example's).
 */
function setup(
  baseUrl: string,
  budgets: Record<string, number> = {},
  autoMode: Record<string, unknown> = {},
): { repo: string; config: string; root: string } {
  const copy = autoModeCopy([ENGINE, HOST_CHECKS], {
    autoMode: {
      stages: { stage2_auto_run_storage: true, stage4_review_completion_gate: true, stage8_loop_circuits: true },
      result_review_mode: "review_only",
      budgets,
      ...autoMode,
    },
    pluginOptions: {
      "asp.engine-openai": { baseUrl, model: "e2e-model", apiKeyEnv: "ASP_TEST_ENGINE_KEY", requestTimeoutMs: 30_000 },
    },
  });
  const policy = JSON.parse(readFileSync(join(REPO_ROOT, "examples", "asp.policy.json"), "utf8"));
  policy.permissions = {
    ...policy.permissions,
    rules: [
      { tool: "read_file", path: "src/**", outcome: "allow" },
      { tool: "write_file", path: "src/**", outcome: "allow" },
      { tool: "run_command:curl", outcome: "deny" },
    ],
  };
  const policyPath = join(copy.root, "asp.policy.json");
  writeFileSync(policyPath, JSON.stringify(policy, null, 2));
  const config = JSON.parse(readFileSync(copy.config, "utf8"));
  writeFileSync(copy.config, JSON.stringify({ ...config, policy: policyPath }));
  return copy;
}

/** `asp auto run --engine openai --reviewer host-checks --json` on REPO. */
const runArgs = (config: string, repo: string, task: string): string[] => [
  "auto",
  "run",
  "--engine",
  "openai",
  "--task",
  task,
  "--reviewer",
  "host-checks",
  "--json",
  "--config",
  config,
  repo,
];
const run = (config: string, repo: string, task: string) => asp(runArgs(config, repo, task));

describe("asp auto run --engine openai against a scripted loopback model (issue 25)", { timeout: 180_000 }, () => {
  it("AM.invariants.6 AM.states.3: (a) the model reads a file, edits it through the host and completes: candidate, review, Verified; actions, audits and ledger in --json", async () => {
    const original = readFileSync(join(REPO_ROOT, "examples", "demo-repo", "src", "math.ts"), "utf8");
    const { url, requests } = await modelServer([
      { calls: [{ id: "c1", name: "read_file", arguments: { path: "src/math.ts" } }] },
      {
        text: "Adding a comment.",
        calls: [
          {
            id: "c2",
            name: "write_file",
            arguments: { path: "src/math.ts", content: `// Reviewed by the agent.\n${original}` },
          },
        ],
      },
      { text: "Done: src/math.ts has a comment." },
    ]);
    const { repo, config } = setup(url);
    const before = readFileSync(join(repo, "src", "math.ts"), "utf8");
    const r = await run(config, repo, "Add a comment to src/math.ts");
    expect(r.stderr).toBe("");
    const p = JSON.parse(r.stdout) as AutoRunProjection;
    expect(p.problems).toEqual([]);
    expect(p.state).toBe("verified");
    expect(r.code).toBe(0);
    expect(p.candidate?.artifact_versions.map((a) => a.artifact_id)).toEqual(["src/math.ts"]);
    // The engine reports each call's usage before proposing its tool calls.
    expect(p.steps.map((s) => `${s.phase}${s.action === null ? "" : `:${s.action.tool}`}`)).toEqual([
      "turn",
      "admitted:read_file",
      "executed:read_file",
      "turn",
      "admitted:write_file",
      "executed:write_file",
      "turn",
    ]);
    // Every call of the producing run is the initial turn (ADR 0009): 3 calls of 120 tokens.
    expect(p.ledger?.initial_turn_tokens).toBe(360);
    // The model read the file through the host: its content came back as the tool message.
    const second = requests[1] as { messages: Array<{ role: string; content: string }> };
    expect(second.messages.some((m) => m.role === "tool" && m.content.includes(before.slice(0, 20)))).toBe(true);
    // The user's worktree is untouched: the host wrote only its scratch copy.
    expect(readFileSync(join(repo, "src", "math.ts"), "utf8")).toBe(before);
    expect(r.stdout).not.toContain(KEY);
    const shown = await asp(["auto", "show", "--config", config, p.runId]);
    expect(shown.stdout).toContain("executed write_file src/math.ts");
  });

  it("AM.budgets.8 AM.terminals.6 AM.stage8.1: (b) the model repeats one action without a delta: loop_detected, Loop detected", async () => {
    const { url } = await modelServer([
      { calls: [{ id: "r", name: "read_file", arguments: { path: "src/index.ts" } }] },
    ]);
    const { repo, config } = setup(url);
    const r = await run(config, repo, "Loop");
    const p = JSON.parse(r.stdout) as AutoRunProjection;
    expect(p.terminal_reason).toBe("loop_detected");
    expect(p.user_truth).toBe("Paused/Blocked · Loop detected");
    expect(p.ledger?.circuits.no_progress).toBe("open");
    expect(p.problems).toEqual([]);
    expect(r.code).toBe(2);
  });

  it("AM.budgets.5 AM.terminals.3: (c) a model that streams prose forever under wall_time_s=5 ends budget_exhausted naming wall_time_s", async () => {
    const { url } = await modelServer(["stream-forever"]);
    const { repo, config } = setup(url, { wall_time_s: 5 });
    const started = Date.now();
    const r = await run(config, repo, "Think forever");
    const p = JSON.parse(r.stdout) as AutoRunProjection;
    expect(p.terminal_reason).toBe("budget_exhausted");
    expect(p.terminal?.exhausted_limit).toBe("wall_time_s");
    expect(p.label).toBe("Paused · Budget exhausted · wall_time_s");
    expect(p.problems).toEqual([]);
    // Reported, not asserted (a loaded machine is slower): the deadline, start-up, and the terminal.
    console.log(`wall_time_s=5: the run ended after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  });

  it.each(["SIGINT", "SIGTERM"] as const)(
    "AM.terminals.3: %s while the model streams is the user's Stop: the run commits user_cancelled and the process exits",
    async (signal) => {
      const { url, requests } = await modelServer(["stream-forever"]);
      const { repo, config } = setup(url);
      const r = await runBinaryAsync(
        runArgs(config, repo, "Think forever"),
        { ASP_TEST_ENGINE_KEY: KEY },
        async (child) => {
          // Wait for the model's request (an event, not a time), then press Stop.
          while (requests.length === 0) await new Promise((r) => setTimeout(r, 20));
          child.kill(signal);
        },
      );
      const code = r.code;
      const stdout = r.stdout;
      const p = JSON.parse(stdout) as AutoRunProjection;
      expect(p.terminal_reason).toBe("user_cancelled");
      expect(p.problems).toEqual([]);
      expect(code).toBe(2);
      // Committed: the store shows the same terminal.
      const shown = await asp(["auto", "show", p.runId, "--json", "--config", config]);
      expect((JSON.parse(shown.stdout) as AutoRunProjection).terminal_reason).toBe("user_cancelled");
    },
  );

  it.each([
    [
      "run curl",
      { id: "x", name: "run_command", arguments: { argv: ["curl", "https://example.com"] } },
      "policy_requires_explicit_setup",
    ],
    [
      "write outside the workspace",
      { id: "x", name: "write_file", arguments: { path: "../outside.txt", content: "x" } },
      "safety_boundary",
    ],
  ])("AM.terminals.2 AM.invariants.6: (d) the model asks to %s: %s, nothing executed", async (_n, call, reason) => {
    const { url } = await modelServer([{ calls: [call as Call] }, { text: "done" }]);
    const { repo, config, root } = setup(url);
    const r = await run(config, repo, "Try it");
    const p = JSON.parse(r.stdout) as AutoRunProjection;
    expect(p.terminal_reason).toBe(reason);
    expect(p.steps.map((s) => s.phase)).toEqual(["turn", "refused"]);
    expect(p.steps.some((s) => s.phase === "executed" || s.phase === "admitted")).toBe(false);
    expect(existsSync(join(root, "outside.txt"))).toBe(false);
    expect(p.problems).toEqual([]);
  });
});

// Issue 27 "Done when": `asp auto run --preset on --engine openai` with Stages 5 and 9: the host-checks
// Reviewer finds the producer's type error, the Repair Agent (the same plugin in a session of its
// own) fixes it through the host's mediated write_file, and an independent re-review passes.
describe("asp auto run --preset on --engine openai: review, repair, re-review (issue 27)", { timeout: 240_000 }, () => {
  const REPAIR_STAGES = {
    stages: {
      stage2_auto_run_storage: true,
      stage4_review_completion_gate: true,
      stage5_auto_repair: true,
      stage8_loop_circuits: true,
      stage9_safe_repair_checkpoint: true,
    },
  };
  const original = readFileSync(join(REPO_ROOT, "examples", "demo-repo", "src", "math.ts"), "utf8");
  const broken = `${original}\nexport const half: number = "one half";\n`;
  const writeMath = (id: string, content: string): Turn => ({
    calls: [{ id, name: "write_file", arguments: { path: "src/math.ts", content } }],
  });
  const presetRun = (config: string, repo: string) =>
    asp(["auto", "run", "--preset", "on", ...runArgs(config, repo, "Add a half constant to src/math.ts").slice(2)]);

  it("AM.stage5.1 AM.stage9.1 AM.states.5: a type error is reviewed, repaired through write_file by a distinct Repair actor, re-reviewed: Verified on the new candidate", async () => {
    const { url, requests } = await modelServer([
      writeMath("p1", broken),
      { text: "Added half." },
      writeMath("r1", `${original}\nexport const half: number = 0.5;\n`),
      { text: "Fixed: half is a number." },
    ]);
    const { repo, config } = setup(url, {}, REPAIR_STAGES);
    const r = await presetRun(config, repo);
    expect(r.stderr).toBe("");
    const p = JSON.parse(r.stdout) as AutoRunProjection;
    expect(p.problems).toEqual([]);
    expect(p.selection).toMatchObject({ preset: "on", result_review_mode: "auto_fix" });
    expect(p.state).toBe("verified");
    expect(r.code).toBe(0);
    expect(p.repair_runs.map((x) => x.outcome)).toEqual(["applied"]);
    const [repairRun] = p.repair_runs;
    expect(repairRun?.actor.actor_id).toBe("repair:asp.engine-openai");
    expect(repairRun?.mutation_set).toEqual(["src/math.ts"]);
    // Two candidates: the reviewed one with issues, and the repaired one (its parent) Verified.
    expect(p.review_runs.map((x) => x.verdict)).toEqual(["issues", "pass"]);
    expect(p.candidate?.parent_candidate_id).toBe(repairRun?.from_candidate_id);
    expect(p.candidate?.candidate_id).toBe(repairRun?.to_candidate_id);
    expect(p.finding_statuses.map((f) => f.status)).toEqual(expect.arrayContaining(["resolved"]));
    // The Repair Agent was asked in a conversation of its own, with the findings and the mutation set.
    const repairAsk = requests[2] as { messages: Array<{ role: string; content: string }> };
    const task = repairAsk.messages.find((m) => m.role === "user")?.content ?? "";
    expect(JSON.parse(task)).toMatchObject({ kind: "repair", round: 1, mutation_set: ["src/math.ts"] });
    // Its write was mediated like the producer's: admitted, executed, in the step list.
    expect(p.steps.filter((s) => s.phase === "executed").map((s) => s.action?.target)).toEqual([
      "src/math.ts",
      "src/math.ts",
    ]);
    const shown = await asp(["auto", "show", "--config", config, p.runId]);
    expect(shown.stdout).toContain("repair round 1");
    expect(shown.stdout).toContain("1 repair rounds");
  });

  it("AM.states.7 AM.budgets.7 (ADR 0012): a Repair that leaves the same type error is denied by the host's checks, never re-reviewed: completed_with_issues(budget_exhausted) with its counters", async () => {
    const { url } = await modelServer([
      writeMath("p1", broken),
      { text: "Added half." },
      writeMath("r1", `${broken}// still a string\n`),
      { text: "Tried." },
    ]);
    // One repair round (budgets only tighten): its denial spends it, and the round budget ends the run.
    const { repo, config } = setup(url, { repeated_finding_limit: 1, max_repair_rounds: 1 }, REPAIR_STAGES);
    const r = await presetRun(config, repo);
    const p = JSON.parse(r.stdout) as AutoRunProjection;
    expect(p.problems).toEqual([]);
    expect(p.state).toBe("completed_with_issues");
    expect(r.code).toBe(1);
    expect(p.terminal).toMatchObject({ stop_reason: "budget_exhausted", exhausted_limit: "max_repair_rounds" });
    expect(p.ledger?.consumed.repair_rounds).toBe(1);
    // The host's own type check denied the plan: it never became a candidate, nothing re-reviewed.
    expect(p.repair_runs.map((x) => [x.outcome, x.check?.decision])).toEqual([["rejected", "deny"]]);
    expect(p.review_runs).toHaveLength(1);
    expect(r.stdout).not.toContain(KEY);
  });

  it("refuses --repair-engine when the run's Auto Repair is off, and a scripted run under auto_fix without --repair-script, each with its next step", async () => {
    const { url } = await modelServer([{ text: "unused" }]);
    const error = (stdout: string) => (JSON.parse(stdout) as { error: { code: string; message: string } }).error;
    // review_only under Stages 5 and 9: the step is --preset on, and with it the refusal is gone.
    const repairable = setup(url, {}, REPAIR_STAGES);
    const off = await asp([...runArgs(repairable.config, repairable.repo, "x"), "--repair-engine", "openai"]);
    expect(off.code).toBe(64);
    expect(error(off.stdout).code).toBe("ASP_CLI_USAGE");
    expect(error(off.stdout).message).toMatch(/Auto Repair is off: pass --preset on/);
    // Stages 5 and 9 off: the step names the stages, not the preset.
    const plain = setup(url);
    const noStages = await asp([
      ...runArgs(plain.config, plain.repo, "x"),
      "--preset",
      "on",
      "--repair-engine",
      "openai",
    ]);
    expect(noStages.code).toBe(64);
    expect(error(noStages.stdout).message).toMatch(
      /turn stage5_auto_repair and stage9_safe_repair_checkpoint on in the trusted host configuration/,
    );
    const noAgent = await asp([
      "auto",
      "run",
      "--preset",
      "on",
      "--reviewer",
      "host-checks",
      "--config",
      repairable.config,
      repairable.repo,
    ]);
    expect(noAgent.code).toBe(64);
    expect(noAgent.stderr).toMatch(/^asp: ASP_CLI_USAGE: auto_fix under stage5_auto_repair .* --repair-script FILE/);
    const badPreset = await asp([...runArgs(plain.config, plain.repo, "x"), "--preset", "sometimes"]);
    expect(badPreset.code).toBe(64);
    expect(error(badPreset.stdout).code).toMatch(/^ASP_ROLLOUT_/);
  });
});

describe("asp auto run with Stage 7: the rules Guardian resolves the model's asks (issue 27)", {
  timeout: 180_000,
}, () => {
  it("AM.stage7.1 AM.states.11 AM.api.2: a recoverable deny returns its rationale to the model, the safer write is allowed once with its audit, review ends Verified; asp auto show prints the Guardian's decisions", async () => {
    const original = readFileSync(join(REPO_ROOT, "examples", "demo-repo", "src", "math.ts"), "utf8");
    const { url, requests } = await modelServer([
      {
        calls: [{ id: "c1", name: "write_file", arguments: { path: "src/index.ts", content: "export {};\n" } }],
      },
      {
        text: "Editing math.ts instead.",
        calls: [
          {
            id: "c2",
            name: "write_file",
            arguments: { path: "src/math.ts", content: `// Reviewed by the agent.\n${original}` },
          },
        ],
      },
      { text: "Done." },
    ]);
    const { root, repo, config } = setup(
      url,
      {},
      {
        stages: {
          stage2_auto_run_storage: true,
          stage4_review_completion_gate: true,
          stage8_loop_circuits: true,
          stage7_guardian_enforcement: true,
        },
        approvals_reviewer: "auto_review",
      },
    );
    // The trusted policy leaves writes under src/ at ask: only the Guardian can resolve them.
    const policyPath = join(root, "asp.policy.json");
    const policy = JSON.parse(readFileSync(policyPath, "utf8"));
    policy.permissions.rules = [
      { tool: "read_file", path: "src/**", outcome: "allow" },
      { tool: "write_file", path: "src/**", outcome: "ask" },
    ];
    writeFileSync(policyPath, JSON.stringify(policy, null, 2));
    const rules = join(root, "guardian-rules.json");
    writeFileSync(
      rules,
      JSON.stringify({
        version: "e2e-1",
        rules: [
          {
            actionClass: "write_file",
            targets: ["src/index.ts"],
            decision: "deny",
            risk: "high",
            rationale: "src/index.ts is the public entry point: change src/math.ts instead",
          },
          { actionClass: "write_file", targets: ["src/"], decision: "allow", risk: "low", rationale: "source edits" },
        ],
      }),
    );
    const r = await asp([...runArgs(config, repo, "Add a comment"), "--guardian", "rules", "--guardian-rules", rules]);
    expect(r.stderr).toBe("");
    const p = JSON.parse(r.stdout) as AutoRunProjection;
    expect(p.problems).toEqual([]);
    expect(p.guardian).toBe("enforce");
    expect(p.state).toBe("verified");
    expect(r.code).toBe(0);
    expect(p.steps.filter((s) => s.phase !== "turn").map((s) => `${s.phase}:${s.action?.target}`)).toEqual([
      "denied:src/index.ts",
      "admitted:src/math.ts",
      "executed:src/math.ts",
    ]);
    expect(p.guardian_decisions.map((g) => [g.decision, g.resolution, g.resolution_actor])).toEqual([
      ["deny", "denied", "guardian"],
      ["allow", "admitted", "guardian"],
    ]);
    expect(p.guardian_decisions[1]?.audit_id).toMatch(/^audit:step:/);
    expect(p.guardian_decisions[1]?.policy_version).toMatch(/^sha256:/);
    expect(p.candidate?.artifact_versions.map((a) => a.artifact_id)).toEqual(["src/math.ts"]);
    // The model got the Guardian's rationale as the refused tool call's result.
    const second = requests[1] as { messages: Array<{ role: string; content: string }> };
    expect(second.messages.some((m) => m.role === "tool" && m.content.includes("change src/math.ts instead"))).toBe(
      true,
    );
    const shown = await asp(["auto", "show", "--config", config, p.runId]);
    expect(shown.stdout).toMatch(
      /guardian step \d+ write_file src\/index\.ts: deny \(risk high\), denied by guardian, audit audit:step:/,
    );
    expect(shown.stdout).toMatch(
      /guardian step \d+ write_file src\/math\.ts: allow \(risk low\), admitted by guardian, audit .*capability [0-9a-f]{32} used once/,
    );
    expect(shown.stdout).toMatch(/consecutive Guardian denials, denial circuit closed/);
  });

  it("AM.stage7.1: Stage 7 with auto_review and no --guardian is refused before anything runs, with the step that fixes it (exit 64)", async () => {
    const { url } = await modelServer([{ text: "Done." }]);
    const { repo, config } = setup(
      url,
      {},
      {
        stages: {
          stage2_auto_run_storage: true,
          stage4_review_completion_gate: true,
          stage7_guardian_enforcement: true,
        },
        approvals_reviewer: "auto_review",
      },
    );
    const r = await asp(runArgs(config, repo, "x"));
    expect(r.code).toBe(64);
    expect((JSON.parse(r.stdout) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "ASP_CLI_USAGE",
      message: expect.stringMatching(/needs a Guardian: pass --guardian rules --guardian-rules FILE/),
    });
  });
});
