import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createStageFlags, DEFAULT_BUDGETS, type StageFlags } from "@asp/rollout";
import { afterEach, describe, expect, it } from "vitest";
import {
  type AutoRunProjection,
  createAutoRunner,
  createScratchWorkspace,
  type Engine,
  type ProjectionInput,
  projectAutoRun,
  projectionInputOf,
  type ReviewerPort,
  RUN_MACHINE,
  replayRun,
  runIdOf,
} from "../src/index.js";
import { allowAll, completion, engineOf, fakeReviewer, manualTime, REVIEW_ONLY, RUN, tempStores } from "./helpers.js";

// Recorded fact histories (committed fixtures) replayed through the projection and the run machine:
// any change of what a committed history means fails here. Record again only for an intended change
// of meaning, and say why in the commit:
//   ASP_RECORD_HISTORIES=1 pnpm --filter @asp/auto-mode exec vitest run test/histories.test.ts

const DIR = fileURLToPath(new URL("./fixtures/histories/", import.meta.url));
const RECORD = process.env.ASP_RECORD_HISTORIES === "1";
const setup = tempStores();
const folders: string[] = [];
afterEach(() => {
  for (const d of folders.splice(0)) rmSync(d, { recursive: true, force: true });
});

const S2 = "stage2_auto_run_storage";
const S4 = "stage4_review_completion_gate";
const S8 = "stage8_loop_circuits";

interface Scenario {
  readonly engine: () => Engine;
  readonly reviewer?: () => ReviewerPort;
  readonly flags?: StageFlags;
  readonly wallTime?: number;
  readonly files?: Record<string, string>;
}

const time = manualTime();
const SCENARIOS: Record<string, Scenario> = {
  "verified-after-read-and-write": {
    files: { "a.txt": "draft\n" },
    engine: () =>
      engineOf(async function* () {
        yield { kind: "action", action: { tool: "read_file", arguments: { path: "a.txt" } } };
        yield { kind: "turn", usage: { input_tokens: 100, output_tokens: 10 } };
        yield { kind: "action", action: { tool: "write_file", arguments: { path: "a.txt", content: "final\n" } } };
        yield { kind: "turn", usage: { input_tokens: 50, output_tokens: 10 } };
        yield { kind: "completion", payload: "Edited a.txt", artifacts: [], evidence: [] };
      }),
  },
  "completed-with-issues": {
    engine: () =>
      engineOf(async function* () {
        yield completion();
      }),
    reviewer: () => fakeReviewer("fake-issues"),
  },
  "review-unavailable-after-two-attempts": {
    engine: () =>
      engineOf(async function* () {
        yield completion();
      }),
    reviewer: () => fakeReviewer("fake-crash"),
  },
  "budget-exhausted-wall-time": {
    wallTime: 5,
    engine: () =>
      engineOf(async function* () {
        time.advance(5_000);
        yield { kind: "prose", text: "thinking" };
      }),
  },
  "loop-detected-same-action": {
    flags: createStageFlags([S2, S4, S8]),
    files: { "a.txt": "same\n" },
    engine: () =>
      engineOf(async function* () {
        for (;;) yield { kind: "action", action: { tool: "read_file", arguments: { path: "a.txt" } } };
      }),
  },
  "policy-refused-unknown-tool": {
    engine: () =>
      engineOf(async function* () {
        yield { kind: "action", action: { tool: "http_get", arguments: { url: "https://example.com" } } };
      }),
  },
  "safety-boundary-path-escape": {
    engine: () =>
      engineOf(async function* () {
        yield { kind: "action", action: { tool: "write_file", arguments: { path: "../x", content: "x" } } };
      }),
  },
  "agent-failed-prose-only": {
    engine: () =>
      engineOf(async function* () {
        yield { kind: "prose", text: "Done! Verified." };
      }),
  },
};

/** What a history means: everything a user or a recovery would act on. */
function meaning(p: AutoRunProjection, input: ProjectionInput) {
  return {
    state: p.state,
    terminal_reason: p.terminal_reason,
    stop_reason: p.terminal?.stop_reason ?? null,
    unavailable_reason: p.terminal?.unavailable_reason ?? null,
    exhausted_limit: p.terminal?.exhausted_limit ?? null,
    user_truth: p.user_truth,
    label: p.label,
    phase: p.phase,
    candidate:
      p.candidate === null
        ? null
        : {
            review_status: p.candidate.review_status,
            artifacts: p.candidate.artifact_versions.map((a) => a.artifact_id),
          },
    steps: p.steps.map(
      (s) =>
        `${s.phase}${s.action === null ? "" : `:${s.action.tool}`}${s.refusal === null ? "" : `:${s.refusal.code}`}`,
    ),
    findings: p.findings.map((f) => `${f.severity}:${f.status}`),
    problems: p.problems,
    trace: replayRun(
      input.facts.map((f) => ({
        seq: f.seq,
        input:
          f.kind === "auto.event"
            ? (f.record as { type: never }).type
            : f.kind === "auto.step"
              ? (`step:${(f.record as { body: { phase: string } }).body.phase}` as never)
              : null,
      })),
    ).trace.map((m) => `${m.from} -${m.on}-> ${m.to}`),
  };
}

async function record(name: string, s: Scenario): Promise<void> {
  const t = await setup();
  const dir = mkdtempSync(join(tmpdir(), "asp-history-ws-"));
  folders.push(dir);
  const workspace = await createScratchWorkspace({ dir });
  for (const [path, text] of Object.entries(s.files ?? {})) await workspace.write(path, new TextEncoder().encode(text));
  await createAutoRunner({
    store: t.store,
    engine: s.engine(),
    reviewers: [(s.reviewer ?? (() => fakeReviewer("fake-pass")))()],
    flags: s.flags ?? createStageFlags([S2, S4]),
    workspace,
    permissions: allowAll,
    clock: time.clock,
    timers: time.timers,
  }).run({ run: RUN, selection: REVIEW_ONLY, budgets: { ...DEFAULT_BUDGETS, wall_time_s: s.wallTime ?? 900 } });
  const input = await projectionInputOf(t.store, runIdOf(RUN));
  const facts = input.facts.map((f) => ({ seq: f.seq, kind: f.kind, record: f.record }));
  const history = { ...input, facts };
  mkdirSync(DIR, { recursive: true });
  writeFileSync(
    join(DIR, `${name}.json`),
    `${JSON.stringify({ input: history, meaning: meaning(projectAutoRun(history), history) }, null, 1)}\n`,
  );
}

describe("recorded Auto Run histories replay to the same meaning (issue 25 item 1)", () => {
  if (RECORD) {
    it.each(Object.entries(SCENARIOS))("records %s", async (name, s) => {
      await record(name, s);
    });
    return;
  }

  it("every scenario has its committed history, and nothing else is committed", () => {
    const committed = existsSync(DIR)
      ? readdirSync(DIR)
          .filter((f) => f.endsWith(".json"))
          .sort()
      : [];
    expect(committed).toEqual(
      Object.keys(SCENARIOS)
        .map((n) => `${n}.json`)
        .sort(),
    );
  });

  it.each(Object.keys(SCENARIOS))("AM.durable.2 AM.api.6: %s projects exactly its recorded meaning", (name) => {
    const { input, meaning: expected } = JSON.parse(readFileSync(join(DIR, `${name}.json`), "utf8")) as {
      input: ProjectionInput;
      meaning: ReturnType<typeof meaning>;
    };
    expect(meaning(projectAutoRun(input), input)).toEqual(expected);
  });

  it("AM.durable.3: a recorded history with one fact dropped never projects more than it proves", () => {
    for (const name of Object.keys(SCENARIOS)) {
      const { input } = JSON.parse(readFileSync(join(DIR, `${name}.json`), "utf8")) as { input: ProjectionInput };
      for (let i = 1; i < input.facts.length; i++) {
        const facts = input.facts.filter((_, k) => k !== i);
        const p = projectAutoRun({ ...input, facts });
        // Dropping any committed fact never makes a run Verified that was not, and an incomplete
        // transition batch is never read as a clean terminal.
        if (p.state === "verified") expect(name).toBe("verified-after-read-and-write");
        if (p.problems.length === 0 && p.terminal !== null) {
          const full = projectAutoRun(input);
          expect(p.terminal).toEqual(full.terminal);
        }
      }
    }
  });

  it("the run machine: every row is reachable from absent, and only terminal has no way out", () => {
    const reachable = new Set(["absent"]);
    for (let i = 0; i < RUN_MACHINE.length; i++) {
      for (const t of RUN_MACHINE) if (reachable.has(t.from)) reachable.add(t.to);
    }
    expect([...reachable].sort()).toEqual(
      [
        "absent",
        "acting",
        "candidate",
        "refused",
        "repair_acting",
        "repaired",
        "repairing",
        "reviewing",
        "started",
        "terminal",
      ].sort(),
    );
    const exits = new Set(RUN_MACHINE.map((t) => t.from));
    expect([...reachable].filter((p) => !exits.has(p as never))).toEqual(["terminal"]);
    // One row per (phase, input): the machine is deterministic.
    const keys = RUN_MACHINE.map((t) => `${t.from}|${t.on}`);
    expect(new Set(keys).size).toBe(keys.length);
  });
});

describe("docs/auto-mode.md shows the run machine", () => {
  const DOC = fileURLToPath(new URL("../../../docs/auto-mode.md", import.meta.url));
  it("the transition table is RUN_MACHINE row for row, and every row's test names a real test", () => {
    const text = readFileSync(DOC, "utf8");
    const rows = text
      .split("\n")
      .filter((l) =>
        /^\| (absent|started|acting|refused|candidate|reviewing|repairing|repair_acting|repaired|terminal) \| `/.test(
          l,
        ),
      );
    expect(rows).toEqual(
      RUN_MACHINE.map(
        (t) => `| ${t.from} | \`${t.on}\` | ${t.to} | ${t.module} (${t.stage}) | ${t.entry} | ${t.test} |`,
      ),
    );
    for (const t of RUN_MACHINE) {
      const [file, fragment] = t.test.split(": ") as [string, string];
      const source = readFileSync(fileURLToPath(new URL(`./${file}`, import.meta.url)), "utf8");
      expect(source, `${t.from} -${t.on}-> ${t.to}: ${t.test}`).toContain(fragment);
    }
  });
});

describe("a recorded history whose ledger moves backwards", () => {
  it("AM.budgets.6 AM.durable.3: a step's ledger with a later start, or a circuit that closes again, projects the safety boundary", () => {
    const load = (name: string) =>
      (JSON.parse(readFileSync(join(DIR, `${name}.json`), "utf8")) as { input: ProjectionInput }).input;
    const edit = (input: ProjectionInput, at: number, change: (ledger: Record<string, unknown>) => void) => ({
      ...input,
      facts: input.facts.map((f, i) => {
        if (i !== at) return f;
        const copy = JSON.parse(JSON.stringify(f)) as { record: { body: { ledger: Record<string, unknown> } } };
        change(copy.record.body.ledger);
        return copy as unknown as (typeof input.facts)[number];
      }),
    });
    const verified = load("verified-after-read-and-write");
    const step = verified.facts.findIndex((f) => f.kind === "auto.step");
    const p = projectAutoRun(edit(verified, step, (l) => (l.started_at = "2030-01-01T00:00:00.000Z")));
    expect(p.problems.join("\n")).toMatch(/ledger/);
    const loop = load("loop-detected-same-action");
    // The terminal's ledger closes the circuit the last executed step opened.
    const ledgers = loop.facts.map((f, i) => [f, i] as const).filter(([f]) => f.kind === "auto.budget_ledger");
    const last = ledgers[ledgers.length - 1]?.[1] as number;
    const q = projectAutoRun({
      ...loop,
      facts: loop.facts.map((f, i) => {
        if (i !== last) return f;
        const copy = JSON.parse(JSON.stringify(f)) as { record: { body: { circuits: Record<string, string> } } };
        copy.record.body.circuits.no_progress = "closed";
        return copy as unknown as (typeof loop.facts)[number];
      }),
    });
    expect(q.terminal_reason).toBe("safety_boundary");
    expect(q.problems.join("\n")).toMatch(/the budget ledger moved backwards/);
  });
});
