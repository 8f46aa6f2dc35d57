import { type AutoEventType, validate } from "@asp/contracts";
import type { FactLog } from "@asp/evidence";
import { createStageFlags } from "@asp/rollout";
import { describe, expect, it } from "vitest";
import {
  AUTO_FACT_KINDS,
  type AutoEvent,
  createAutoRunner,
  createScriptedEngine,
  type EngineStep,
  loadAutoRunProjection,
  type ReviewerPort,
  RUN_ID_INDEX,
  readRunFacts,
  runIdOf,
  runStateKey,
} from "../src/index.js";
import {
  completion,
  countingReviewer,
  FLAGS,
  fakeReviewer,
  PRODUCER,
  REVIEW_ONLY,
  RUN,
  tempStores,
} from "./helpers.js";

const setup = tempStores();

async function runWith(
  steps: EngineStep[],
  reviewers: ReviewerPort[],
  extra: {
    log?: FactLog;
    events?: AutoEvent[];
    flags?: ReturnType<typeof createStageFlags>;
    budgets?: Record<string, number>;
    deliver?: (c: unknown, p: Uint8Array) => Promise<Uint8Array>;
    /** Per-attempt Reviewer timeout: generous (a loaded CI machine must not turn a pass into a retry); short only where a test waits for it to fire. */
    timeoutMs?: number;
  } = {},
) {
  const t = await setup();
  const events = extra.events ?? [];
  const store = extra.log === undefined ? t.store : { log: extra.log, objects: t.store.objects };
  const runner = createAutoRunner({
    store,
    engine: createScriptedEngine({ actor: PRODUCER, steps }),
    reviewers,
    flags: extra.flags ?? FLAGS,
    attemptTimeoutMs: extra.timeoutMs ?? 60_000,
    onEvent: (e) => events.push(e),
    ...(extra.deliver === undefined ? {} : { deliver: extra.deliver as never }),
  });
  const projection = await runner.run({
    run: RUN,
    selection: REVIEW_ONLY,
    ...(extra.budgets === undefined
      ? {}
      : { budgets: { ...(await import("@asp/rollout")).DEFAULT_BUDGETS, ...extra.budgets } }),
  });
  const facts = await readRunFacts(t.store.log, runIdOf(RUN));
  return { projection, facts, events, store: t.store, t };
}

const eventTypes = (facts: Awaited<ReturnType<typeof readRunFacts>>): AutoEventType[] =>
  facts.filter((f) => f.kind === AUTO_FACT_KINDS.event).map((f) => (f.record as { type: AutoEventType }).type);

describe("createAutoRunner", () => {
  describe("when a run is stored (item 1)", () => {
    it("AM.states.1: the run id is root_frame_id + branch_id + turn_id + execution_id; each part changes it", () => {
      const base = runIdOf(RUN);
      for (const k of Object.keys(RUN) as Array<keyof typeof RUN>) {
        expect(runIdOf({ ...RUN, [k]: `${RUN[k]}x` })).not.toBe(base);
      }
      expect(() => runIdOf({ ...RUN, execution_id: "" })).toThrowWithCode("ASP_AUTO_MODE_INVALID_OPTION");
    });

    it("AM.api.6 AM.durable.1: every transition and its one event commit in one append, records carrying that event id", async () => {
      const { facts, projection } = await runWith([completion()], [fakeReviewer("fake-pass")]);
      expect(projection.state).toBe("verified");
      // Group the facts by event id: each group is contiguous (one batch) and holds exactly one event.
      const groups = new Map<string, number[]>();
      for (const f of facts) {
        const id =
          f.kind === AUTO_FACT_KINDS.event
            ? (f.record as { event_id: string }).event_id
            : (f.record as { event_id: string }).event_id;
        groups.set(id, [...(groups.get(id) ?? []), f.seq]);
      }
      for (const [id, seqs] of groups) {
        expect(
          seqs.every((s, i) => i === 0 || s === (seqs[i - 1] as number) + 1),
          id,
        ).toBe(true);
        const evs = facts.filter((f) => seqs.includes(f.seq) && f.kind === AUTO_FACT_KINDS.event);
        expect(evs).toHaveLength(1);
      }
      expect(eventTypes(facts)).toEqual([
        "auto_run_started",
        "candidate_ready",
        "auto_audit_started",
        "auto_audit_completed",
        "auto_run_terminal",
      ]);
      expect(facts.every((f) => f.index.some((i) => i.name === RUN_ID_INDEX && i.value === runIdOf(RUN)))).toBe(true);
    });

    it("AM.api.6 AM.durable.2 AM.terminals.7: notifications go out only after the commit; a failed append notifies nothing", async () => {
      const t = await setup();
      let appends = 0;
      // Event ids whose append resolved (is durable) so far.
      const durable = new Set<string>();
      const failing: FactLog = {
        ...t.store.log,
        append: async (entries) => {
          appends += 1;
          // The candidate transition (2nd) fails, like a full disk.
          if (appends === 2) throw new Error("disk full");
          const committed = await t.store.log.append(entries);
          for (const f of committed)
            if (f.kind === AUTO_FACT_KINDS.event) durable.add((f.record as { event_id: string }).event_id);
          return committed;
        },
        list: (q) => t.store.log.list(q),
        latest: (k) => t.store.log.latest(k),
      };
      const events: AutoEvent[] = [];
      const seen: boolean[] = [];
      const runner = createAutoRunner({
        store: { log: failing, objects: t.store.objects },
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [fakeReviewer("fake-pass")],
        flags: FLAGS,
        onEvent: (e) => {
          events.push(e);
          seen.push(durable.has(e.event_id)); // already durable when heard
        },
      });
      const projection = await runner.run({ run: RUN, selection: REVIEW_ONLY });
      expect(events.map((e) => e.type)).toEqual(["auto_run_started", "auto_run_terminal"]);
      expect(seen).toEqual([true, true]);
      // The audit persistence failure is the safety boundary, never a candidate.
      expect(projection.terminal_reason).toBe("safety_boundary");
      expect(projection.candidate).toBeNull();
    });

    it("AM.states.1: a second run with the same identity is refused", async () => {
      const t = await setup();
      const runner = createAutoRunner({
        store: t.store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [fakeReviewer("fake-pass")],
        flags: FLAGS,
      });
      await runner.run({ run: RUN, selection: REVIEW_ONLY });
      await expect(runner.run({ run: RUN, selection: REVIEW_ONLY })).rejects.toThrowWithCode(
        "ASP_AUTO_MODE_RUN_EXISTS",
      );
    });

    it("AM.modes.4: without stage2_auto_run_storage nothing is stored", async () => {
      const t = await setup();
      const runner = createAutoRunner({
        store: t.store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [],
        flags: createStageFlags(["stage4_review_completion_gate"]),
      });
      await expect(runner.run({ run: RUN, selection: REVIEW_ONLY })).rejects.toThrowWithCode(
        "ASP_AUTO_MODE_STAGE_DISABLED",
      );
      expect(await t.store.log.head()).toBeNull();
    });
  });

  describe("when the engine yields (item 2)", () => {
    it("AM.states.2: a valid completion enters candidate with its snapshot, payload, artifact versions and candidate_ready in one transition", async () => {
      const { facts, projection } = await runWith(
        [{ kind: "prose", text: "thinking" }, completion()],
        [fakeReviewer("fake-pass")],
      );
      const ready = facts.find(
        (f) => f.kind === AUTO_FACT_KINDS.event && (f.record as { type: string }).type === "candidate_ready",
      );
      const readyId = (ready?.record as { event_id?: string } | undefined)?.event_id;
      expect(readyId).toBeDefined();
      const batch = facts.filter((f) => (f.record as { event_id: string }).event_id === readyId);
      expect(batch.map((f) => f.kind).sort()).toEqual(
        [
          AUTO_FACT_KINDS.snapshot,
          AUTO_FACT_KINDS.candidate,
          AUTO_FACT_KINDS.run,
          AUTO_FACT_KINDS.ledger,
          AUTO_FACT_KINDS.event,
        ].sort(),
      );
      expect(projection.candidate?.artifact_versions).toHaveLength(1);
      expect(projection.candidate?.artifact_versions[0]?.artifact_id).toBe("result.csv");
    });

    it.each<[string, EngineStep[], string]>([
      ["prose only", [{ kind: "prose", text: "Done! Verified." }], "agent_failed"],
      // A tool that already ran outside the host is an unmediated action (ADR 0009).
      ["a tool result", [{ kind: "tool_result", tool: "r", output: "ok" } as unknown as EngineStep], "safety_boundary"],
      // Only the user cancels, through the host: an Engine's own "cancelled" is its stop (ADR 0009 §9).
      [
        "an Engine's claimed cancellation",
        [{ kind: "prose", text: "x" }, { kind: "cancelled" }, completion()],
        "agent_failed",
      ],
      // The Engine's own turn limit is a turn budget: budget_exhausted naming engine_turns (ADR 0009).
      ["max-turn exhaustion", [{ kind: "max_turns", turns: 12 }, completion()], "budget_exhausted"],
      ["an empty completion", [{ kind: "completion", payload: "", artifacts: [], evidence: [] }], "agent_failed"],
      [
        "a partial snapshot (a ref that does not resolve)",
        [
          {
            kind: "completion",
            payload: "p",
            artifacts: [],
            evidence: [{ name: "ghost", ref: { name: "ghost", kind: "blob", digest: `sha256:${"0".repeat(64)}` } }],
          },
        ],
        "safety_boundary",
      ],
    ])("AM.states.2 AM.budgets.10: %s never enters candidate", async (_name, steps, reason) => {
      const { facts, projection } = await runWith(steps, [fakeReviewer("fake-pass")]);
      expect(eventTypes(facts)).toEqual(["auto_run_started", "auto_run_terminal"]);
      expect(facts.some((f) => f.kind === AUTO_FACT_KINDS.candidate)).toBe(false);
      expect(projection.candidate).toBeNull();
      expect(projection.terminal_reason).toBe(reason);
      expect(projection.problems).toEqual([]);
    });
    it("AM.states.2: an Engine that throws never enters candidate (agent_failed)", async () => {
      const t = await setup();
      const p = await createAutoRunner({
        store: t.store,
        engine: {
          actor: PRODUCER,
          // biome-ignore lint/correctness/useYield: the engine fails before its first step
          async *run() {
            throw new Error("model endpoint down");
          },
        },
        reviewers: [fakeReviewer("fake-pass")],
        flags: FLAGS,
      }).run({ run: RUN, selection: REVIEW_ONLY });
      expect(p.terminal_reason).toBe("agent_failed");
      expect(p.candidate).toBeNull();
    });
  });

  describe("when a Reviewer is selected (item 3)", () => {
    it.each<[string, Partial<typeof PRODUCER>]>([
      ["the producer actor", { actor_id: PRODUCER.actor_id }],
      ["the producer session", { session_id: PRODUCER.session_id }],
      ["the producer's fingerprint (default policy)", { fingerprint: PRODUCER.fingerprint }],
    ])(
      "AM.states.5 AM.states.6: only %s available -> review_unavailable(reviewer_independence_unavailable) before any call",
      async (_n, identity) => {
        const counted = countingReviewer(fakeReviewer("fake-pass", identity));
        const { projection, facts } = await runWith([completion()], [counted.port]);
        expect(counted.calls()).toBe(0);
        expect(projection.state).toBe("review_unavailable");
        expect(projection.terminal?.unavailable_reason).toBe("reviewer_independence_unavailable");
        expect(eventTypes(facts)).not.toContain("auto_audit_started");
        expect(projection.review_runs[0]?.selection).toBe("reviewer_independence_unavailable");
      },
    );

    it("AM.states.5: actor independence holds even when the policy allows the same fingerprint", async () => {
      const t = await setup();
      const runner = createAutoRunner({
        store: t.store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [
          fakeReviewer("fake-pass", { actor_id: PRODUCER.actor_id, fingerprint: PRODUCER.fingerprint }),
          fakeReviewer("fake-pass", { fingerprint: PRODUCER.fingerprint }),
        ],
        flags: FLAGS,
      });
      const p = await runner.run({ run: RUN, selection: REVIEW_ONLY, independencePolicy: "same_fingerprint_allowed" });
      expect(p.state).toBe("verified");
      expect(p.review_runs[0]?.reviewer?.actor_id).not.toBe(PRODUCER.actor_id);
    });

    it("AM.states.5: a Repair or promotion actor is never eligible", async () => {
      const t = await setup();
      const promoter = fakeReviewer("fake-pass", { actor_id: "promoter" });
      const runner = createAutoRunner({
        store: t.store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [promoter],
        flags: FLAGS,
        excludedActors: [{ actor_id: "promoter", session_id: "none" }],
      });
      const p = await runner.run({ run: RUN, selection: REVIEW_ONLY });
      expect(p.terminal?.unavailable_reason).toBe("reviewer_independence_unavailable");
    });

    it("AM.states.6 AM.states.9: identity drift: a Reviewer whose identity changes mid-review ends at the safety boundary", async () => {
      const base = fakeReviewer("fake-pass");
      let fingerprint = base.identity.fingerprint;
      const drifting: ReviewerPort = {
        get identity() {
          return { ...base.identity, fingerprint };
        },
        verifier: {
          verify: async (r) => {
            fingerprint = "model-c;swapped";
            return base.verifier.verify(r);
          },
        },
      };
      const { projection } = await runWith([completion()], [drifting]);
      expect(projection.terminal_reason).toBe("safety_boundary");
      expect(projection.state).not.toBe("verified");
    });
  });

  describe("when review attempts fail (item 4)", () => {
    it.each([
      ["fake-hang", "timeout"],
      ["fake-crash", "provider_failed"],
      ["fake-garbage", "unparseable"],
      ["fake-schema-invalid", "unparseable"],
      ["fake-unknown-ref", "unparseable"],
    ])(
      "AM.states.8: %s is recorded per attempt (one retry) and ends review_unavailable, never a pass",
      async (mode, outcome) => {
        const { projection, facts } = await runWith([completion()], [fakeReviewer(mode)], {
          // Only the hanging Reviewer waits for the deadline; the others must not race it.
          ...(mode === "fake-hang" ? { timeoutMs: 2_000 } : {}),
        });
        expect(projection.state).toBe("review_unavailable");
        expect(projection.terminal?.unavailable_reason).toBe("no_admissible_verdict");
        expect(projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual([outcome, outcome]);
        expect(eventTypes(facts).filter((t) => t === "auto_audit_completed")).toHaveLength(2);
        expect(projection.terminal?.counters.review_attempts).toBe(2);
      },
      20_000,
    );

    it("AM.states.8: an evidence adapter that hangs is a timeout under the same deadline, never a pass", async () => {
      const counted = countingReviewer(fakeReviewer("fake-pass", {}, () => new Promise<string[]>(() => {})));
      const { projection } = await runWith([completion()], [counted.port], { timeoutMs: 2_000 });
      expect(counted.calls()).toBe(0);
      expect(projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual(["timeout", "timeout"]);
      expect(projection.terminal?.unavailable_reason).toBe("no_admissible_verdict");
    }, 20_000);

    it("AM.states.8: a tightened budget of one attempt permits no retry", async () => {
      const { projection } = await runWith([completion()], [fakeReviewer("fake-crash")], {
        budgets: { max_review_rounds: 1 },
      });
      expect(projection.review_runs[0]?.attempts).toHaveLength(1);
      expect(projection.state).toBe("review_unavailable");
    });

    it("AM.states.8: a transient failure then a pass is verified on the retry", async () => {
      const good = fakeReviewer("fake-pass");
      let n = 0;
      const flaky: ReviewerPort = {
        ...good,
        verifier: { verify: (r) => (++n === 1 ? Promise.reject(new Error("503")) : good.verifier.verify(r)) },
      };
      const { projection } = await runWith([completion()], [flaky]);
      expect(projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual(["provider_failed", "verdict"]);
      expect(projection.state).toBe("verified");
    });

    it.each([
      ["an answer the plugin host refused against its schema", { code: "ASP_PLUGIN_BAD_OUTPUT" }, "unparseable"],
      ["a Reviewer naming its timeout", { code: "X", data: { attempt_outcome: "timeout" } }, "timeout"],
      [
        "a Reviewer naming an unparseable reply",
        { code: "X", data: { attempt_outcome: "unparseable" } },
        "unparseable",
      ],
      ["a Reviewer claiming a verdict outcome", { code: "X", data: { attempt_outcome: "verdict" } }, "provider_failed"],
      ["a plain error", new Error("boom"), "provider_failed"],
    ])(
      "AM.states.8: a Reviewer call that throws %s is recorded as %s, never a pass",
      async (_what, thrown, outcome) => {
        const base = fakeReviewer("fake-pass");
        const throwing: ReviewerPort = { ...base, verifier: { verify: () => Promise.reject(thrown) } };
        const { projection } = await runWith([completion()], [throwing]);
        expect(projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual([outcome, outcome]);
        expect(projection.state).toBe("review_unavailable");
        expect(projection.terminal?.unavailable_reason).toBe("no_admissible_verdict");
      },
    );

    it("AM.states.8 AM.states.10: missing adapter coverage is recorded exactly on every attempt and ends review_unavailable(evidence_incomplete)", async () => {
      const counted = countingReviewer(fakeReviewer("fake-pass", {}, () => ["artifact:result.csv (csv adapter)"]));
      const { projection } = await runWith([completion()], [counted.port]);
      expect(counted.calls()).toBe(0);
      expect(projection.terminal?.unavailable_reason).toBe("evidence_incomplete");
      expect(projection.review_runs[0]?.attempts.map((a) => a.missing_coverage)).toEqual([
        ["artifact:result.csv (csv adapter)"],
        ["artifact:result.csv (csv adapter)"],
      ]);
    });
  });

  describe("when findings are recorded (item 5)", () => {
    it("AM.findings.2: two runs reaching the same conclusion record two findings with one fingerprint, no key collision", async () => {
      const t = await setup();
      const mk = (run: typeof RUN) =>
        createAutoRunner({
          store: t.store,
          engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
          reviewers: [fakeReviewer("fake-issues")],
          flags: FLAGS,
        }).run({ run, selection: REVIEW_ONLY });
      const a = await mk(RUN);
      const b = await mk({ ...RUN, root_frame_id: "frame-2" });
      expect(a.state).toBe("completed_with_issues");
      expect(b.state).toBe("completed_with_issues");
      expect(a.findings[0]?.fingerprint).toBe(b.findings[0]?.fingerprint);
      expect(a.findings[0]?.finding_id).not.toBe(b.findings[0]?.finding_id);
    });
  });

  describe("when the run terminates (item 6)", () => {
    it("AM.states.3 AM.states.12: a pass bound to the exact candidate and snapshot, promoted by compare-and-swap", async () => {
      const { projection } = await runWith([completion()], [fakeReviewer("fake-pass-minor")]);
      expect(projection.state).toBe("verified");
      expect(projection.user_truth).toBe("Verified");
      expect(projection.candidate?.review_status).toBe("verified");
      expect(projection.review_runs[0]?.candidate_payload_digest).toBe(projection.candidate?.payload_digest);
      expect(projection.review_runs[0]?.snapshot_digest).toBe(projection.candidate?.snapshot_digest);
      expect(validate("terminal-record", projection.terminal).ok).toBe(true);
    });

    it.each<[string, () => Promise<Uint8Array>, string]>([
      [
        "delivered bytes that differ from the reviewed candidate",
        async () => new TextEncoder().encode("The answer is 43."),
        "safety_boundary",
      ],
      // The bytes may have been delivered before the failure: outcome_unknown, the truthful row (ADR 0009).
      [
        "a delivery that fails after the review",
        async () => Promise.reject(new Error("connection reset")),
        "outcome_unknown",
      ],
    ])("AM.states.4: %s are never Verified", async (_n, deliver, reason) => {
      const { projection } = await runWith([completion()], [fakeReviewer("fake-pass")], { deliver });
      expect(projection.state).not.toBe("verified");
      expect(projection.terminal_reason).toBe(reason);
      expect(projection.problems).toEqual([]);
    });

    it("AM.states.3: compare-and-swap: a run whose candidate pointer moved after the review is never Verified", async () => {
      const t = await setup();
      const runId = runIdOf(RUN);
      const runner = createAutoRunner({
        store: t.store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [fakeReviewer("fake-pass")],
        flags: FLAGS,
        // Another writer moves the run to a newer candidate while the reviewed one is delivered.
        deliver: async (_c, payload) => {
          const latest = await t.store.log.latest(runStateKey(runId));
          const rec = latest?.record as { event_id: string; body: Record<string, unknown> };
          await t.store.log.append([
            {
              kind: AUTO_FACT_KINDS.run,
              record: { ...rec, body: { ...rec.body, candidate_id: "candidate:newer", generation: 2 } },
              index: [{ name: RUN_ID_INDEX, value: runId }],
              state: [runStateKey(runId)],
            },
          ]);
          return payload;
        },
      });
      const p = await runner.run({ run: RUN, selection: REVIEW_ONLY });
      expect(p.state).not.toBe("verified");
      expect(p.terminal_reason).toBe("safety_boundary");
      const facts = await readRunFacts(t.store.log, runId);
      const promoted = facts.filter(
        (f) =>
          f.kind === AUTO_FACT_KINDS.candidate &&
          (f.record as { body: { review_status: string } }).body.review_status === "verified",
      );
      expect(promoted).toEqual([]);
    });

    it("AM.states.7 AM.states.12: an issues verdict under review_only stops with its reason, preserved candidate and N issues", async () => {
      const { projection } = await runWith([completion()], [fakeReviewer("fake-issues")]);
      expect(projection.state).toBe("completed_with_issues");
      expect(projection.terminal?.stop_reason).toBe("review_only");
      expect(projection.terminal?.candidate_id).toBe(projection.candidate?.candidate_id);
      expect(projection.user_truth).toBe("Completed · unverified · 1 unresolved issues");
      expect(projection.candidate?.review_status).toBe("unverified");
    });

    it("AM.states.9 AM.durable.4: a pass with an open material finding is the safety boundary, never issues or Verified", async () => {
      const { projection } = await runWith([completion()], [fakeReviewer("fake-pass-material")]);
      expect(projection.terminal_reason).toBe("safety_boundary");
      expect(projection.user_truth).toBe("Failed · Safety boundary");
    });

    it("AM.modes.4: review_only selected but no review stage on: no review runs, the run stays a provisional candidate", async () => {
      const { projection, facts } = await runWith([completion()], [fakeReviewer("fake-pass")], {
        flags: createStageFlags(["stage2_auto_run_storage"]),
      });
      expect(projection.state).toBe("candidate");
      expect(eventTypes(facts)).toEqual(["auto_run_started", "candidate_ready"]);
    });

    it("AM.states.2: with result review off the run stays a provisional candidate", async () => {
      const t = await setup();
      const p = await createAutoRunner({
        store: t.store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [],
        flags: FLAGS,
      }).run({ run: RUN, selection: { ...REVIEW_ONLY, result_review_mode: "off" } });
      expect(p.state).toBe("candidate");
      expect(p.user_truth).toBe("Candidate · provisional / not verified");
      expect(await loadAutoRunProjection(t.store, runIdOf(RUN))).toEqual(p);
    });
  });
  describe("when the Reviewer runs behind a sandbox boundary (issue 27 item 4)", () => {
    it("AM.invariants.1: what the boundary refused during an attempt is frozen into that attempt, bounded, and reloads", async () => {
      // FAKE (fault injection): a boundary record like @asp/ths LaunchedVerifier's, filled while
      // the Reviewer answers: a refusal from its start (not this attempt's) and 11 during it.
      const kept: { kind: string; detail: string; at: string }[] = [
        { kind: "port_denied", detail: "at start", at: "2026-12-02T00:00:00.000Z" },
      ];
      const inner = fakeReviewer("fake-pass");
      const reviewer: ReviewerPort = {
        ...inner,
        verifier: {
          verify: async (r) => {
            for (let i = 0; i < 11; i++)
              kept.push({
                kind: i === 0 ? "network_denied" : "port_denied",
                detail: `try ${i}`,
                at: "2026-12-02T00:00:01.000Z",
              });
            kept.push({ kind: "not-a-kind", detail: "dropped", at: "2026-12-02T00:00:01.000Z" });
            return inner.verifier.verify(r);
          },
        },
        boundary: { attempts: () => kept, attemptCount: () => kept.length },
      };
      const { projection, t } = await runWith([completion()], [reviewer]);
      const [attempt] = projection.review_runs[0]?.attempts ?? [];
      expect(attempt?.outcome).toBe("verdict");
      expect(attempt?.boundary?.count).toBe(12);
      expect(attempt?.boundary?.first).toHaveLength(8);
      expect(attempt?.boundary?.first[0]).toEqual({
        kind: "network_denied",
        detail: "try 0",
        at: "2026-12-02T00:00:01.000Z",
      });
      expect(validate("review-run", projection.review_runs[0]).ok).toBe(true);
      expect(await loadAutoRunProjection(t.store, runIdOf(RUN))).toEqual(projection);

      // A Reviewer whose boundary saw nothing has no boundary entry.
      const quiet = await runWith(
        [completion()],
        [{ ...fakeReviewer("fake-pass"), boundary: { attempts: () => [], attemptCount: () => 0 } }],
      );
      expect(quiet.projection.review_runs[0]?.attempts[0]).not.toHaveProperty("boundary");
    });
  });
});
