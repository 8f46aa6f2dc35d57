import type { AutoEventType, StageFlag } from "@asp/contracts";
import { openStore } from "@asp/evidence";
import { type AutoModeSelection, createStageFlags } from "@asp/rollout";
import { describe, expect, it } from "vitest";
import type { Assessment } from "../src/index.js";
import {
  AUTO_FACT_KINDS,
  type AutoEvent,
  createAutoRunner,
  createScriptedEngine,
  type EngineStep,
  loadAutoRunProjection,
  type ProvisionalChunk,
  type ReviewerPort,
  readRunFacts,
  resultReviewStage,
  runIdOf,
} from "../src/index.js";
import { completion, countingReviewer, fakeReviewer, PRODUCER, REVIEW_ONLY, RUN, tempStores } from "./helpers.js";

// Issue 14 item 7: Stages 2, 3 and 4 at runtime, each consuming only its own flag.

const setup = tempStores();

const S2 = "stage2_auto_run_storage";
const S3 = "stage3_scientific_review_shadow";
const S4 = "stage4_review_completion_gate";
const PROVISIONAL = "Candidate · provisional / not verified";

async function drive(
  flags: StageFlag[],
  opts: {
    selection?: AutoModeSelection;
    reviewer?: ReviewerPort;
    steps?: EngineStep[];
    onProvisional?: (c: ProvisionalChunk) => void;
    onEvent?: (e: AutoEvent) => void;
  } = {},
) {
  const t = await setup();
  const counted = countingReviewer(opts.reviewer ?? fakeReviewer("fake-pass"));
  const runner = createAutoRunner({
    store: t.store,
    engine: createScriptedEngine({ actor: PRODUCER, steps: opts.steps ?? [completion()] }),
    reviewers: [counted.port],
    flags: createStageFlags(flags),
    // Generous: no Reviewer here hangs, and a loaded machine must not turn a pass into a timeout.
    attemptTimeoutMs: 60_000,
    ...(opts.onProvisional === undefined ? {} : { onProvisional: opts.onProvisional }),
    ...(opts.onEvent === undefined ? {} : { onEvent: opts.onEvent }),
  });
  const projection = await runner
    .run({ run: RUN, selection: opts.selection ?? REVIEW_ONLY })
    .catch((error: unknown) => error as Error);
  const facts = await readRunFacts(t.store.log, runIdOf(RUN));
  return { projection, facts, calls: counted.calls(), t };
}

const eventsOf = (facts: Awaited<ReturnType<typeof readRunFacts>>) =>
  facts.filter((f) => f.kind === AUTO_FACT_KINDS.event).map((f) => f.record as AutoEvent & { type: AutoEventType });
const bodies = <T>(facts: Awaited<ReturnType<typeof readRunFacts>>, kind: string): T[] =>
  facts.filter((f) => f.kind === kind).map((f) => (f.record as { body: T }).body);

/** Every subset of stages 2, 3 and 4, as flag lists. */
const SUBSETS: StageFlag[][] = [0, 1, 2, 3, 4, 5, 6, 7].map((m) =>
  [S2, S3, S4].filter((_, i) => (m >> i) & 1),
) as StageFlag[][];
const name = (flags: StageFlag[]) => (flags.length === 0 ? "none" : flags.map((f) => f.slice(0, 6)).join("+"));

describe("stages at runtime (issue 14 item 7)", () => {
  describe("every combination of stages 2, 3 and 4, with result review on and off", () => {
    const cases = SUBSETS.flatMap((flags) =>
      (["review_only", "off"] as const).map(
        (mode) => [`${name(flags)}, result_review_mode=${mode}`, flags, mode] as const,
      ),
    );
    it.each(cases)("AM.rollout.2 AM.modes.4 AM.stage2.1 AM.stage3.1 AM.stage4.1: %s", async (_n, flags, mode) => {
      const { projection, facts, calls } = await drive(flags, {
        selection: { ...REVIEW_ONLY, result_review_mode: mode },
      });
      const types = eventsOf(facts).map((e) => e.type);
      if (!flags.includes(S2)) {
        // No Auto Run storage: no run at all, whatever else is on (a later stage never implies Stage 2).
        expect(projection).toBeInstanceOf(Error);
        expect((projection as { code?: string }).code).toBe("ASP_AUTO_MODE_STAGE_DISABLED");
        expect(facts).toEqual([]);
        expect(calls).toBe(0);
        return;
      }
      if (projection instanceof Error) throw projection;
      const review = mode === "off" ? "off" : flags.includes(S4) ? "gate" : flags.includes(S3) ? "shadow" : "off";
      expect(projection.result_review).toBe(review);
      expect(projection.problems).toEqual([]);
      // The selection is persisted with the run whatever the review stages (Stage 2).
      expect(projection.selection).toEqual({ ...REVIEW_ONLY, result_review_mode: mode });
      if (review === "off") {
        // A selection alone enables nothing; a stage alone reviews nothing while result review is off.
        expect(calls).toBe(0);
        expect(types).toEqual(["auto_run_started", "candidate_ready"]);
        expect(projection.state).toBe("candidate");
        expect(projection.user_truth).toBe(PROVISIONAL);
        expect(projection.review_runs).toEqual([]);
        expect(projection.shadow).toBeNull();
      } else if (review === "shadow") {
        // Recorded, not gating: one review, its events marked shadow, no terminal.
        expect(calls).toBe(1);
        expect(types).toEqual(["auto_run_started", "candidate_ready", "auto_audit_started", "auto_audit_completed"]);
        expect(projection.state).toBe("candidate");
        expect(projection.terminal).toBeNull();
        expect(projection.user_truth).toBe(PROVISIONAL);
        expect(projection.candidate?.review_status).toBe("candidate");
        expect(projection.shadow).toMatchObject({ verdict: "pass", outcome: "verdict", final: true });
        const completed = eventsOf(facts).find((e) => e.type === "auto_audit_completed");
        expect((completed?.assessment as Assessment | undefined)?.bookkeeping.gating).toBe(false);
      } else {
        // Gating: exactly one review even with Stage 3 also on; Verified after the promotion.
        expect(calls).toBe(1);
        expect(projection.review_runs).toHaveLength(1);
        expect(types).toEqual([
          "auto_run_started",
          "candidate_ready",
          "auto_audit_started",
          "auto_audit_completed",
          "auto_run_terminal",
        ]);
        expect(projection.state).toBe("verified");
        expect(projection.shadow).toBeNull();
        const completed = eventsOf(facts).find((e) => e.type === "auto_audit_completed");
        expect((completed?.assessment as Assessment | undefined)?.bookkeeping.gating).toBe(true);
      }
    });
  });

  it("resultReviewStage: off unless result review is on and Stage 3 or 4 is; Stage 4 wins over Stage 3", () => {
    const f = (s3: boolean, s4: boolean) => ({ [S2]: true, [S3]: s3, [S4]: s4 }) as never;
    expect(resultReviewStage({ result_review_mode: "off" }, f(true, true))).toBe("off");
    expect(resultReviewStage({ result_review_mode: "review_only" }, f(false, false))).toBe("off");
    expect(resultReviewStage({ result_review_mode: "review_only" }, f(true, false))).toBe("shadow");
    expect(resultReviewStage({ result_review_mode: "auto_fix" }, f(false, true))).toBe("gate");
    expect(resultReviewStage({ result_review_mode: "review_only" }, f(true, true))).toBe("gate");
  });

  describe("Stage 2: the resolved selection is persisted with the run", () => {
    it("AM.stage2.1 AM.portable.1: reopened in a new store handle, the projection shows the persisted selection, never a re-resolved one", async () => {
      const t = await setup();
      // A project's selection, stored as resolved (auto_fix is refused without Stage 5, ADR 0009).
      const selection: AutoModeSelection = {
        preset: "off",
        result_review_mode: "review_only",
        approvals_reviewer: "auto_review",
        source: "project",
        normalized: false,
      };
      const first = await createAutoRunner({
        store: t.store,
        engine: createScriptedEngine({ actor: PRODUCER, steps: [completion()] }),
        reviewers: [fakeReviewer("fake-issues")],
        flags: createStageFlags([S2, S4]),
      }).run({ run: RUN, selection });
      await t.store.close();
      const reopened = await openStore(t.dir);
      try {
        const p = await loadAutoRunProjection(reopened, runIdOf(RUN));
        expect(p.problems).toEqual([]);
        expect(p.selection).toEqual(selection);
        expect(p).toEqual(first);
        const facts = await readRunFacts(reopened.log, runIdOf(RUN));
        const started = eventsOf(facts).find((e) => e.type === "auto_run_started");
        expect(started?.selection).toEqual(selection);
        // Every run record of the run carries the same selection.
        for (const r of bodies<{ selection: unknown }>(facts, AUTO_FACT_KINDS.run))
          expect(r.selection).toEqual(selection);
      } finally {
        await reopened.close();
      }
    });
  });

  describe("Stage 3 only: a shadow judgment that gates nothing", () => {
    it("AM.stage3.1: an issues verdict is recorded (review run, open findings, audit events) but the run never enters completed_with_issues", async () => {
      const { projection, facts } = await drive([S2, S3], { reviewer: fakeReviewer("fake-issues") });
      if (projection instanceof Error) throw projection;
      expect(projection.state).toBe("candidate");
      expect(projection.terminal).toBeNull();
      expect(projection.user_truth).toBe(PROVISIONAL);
      expect(projection.shadow).toMatchObject({ verdict: "issues", final: true });
      expect(projection.shadow?.finding_ids).toHaveLength(1);
      expect(projection.findings.map((f) => f.status)).toEqual(["open"]);
      expect(eventsOf(facts).map((e) => e.type)).not.toContain("auto_run_terminal");
      // Nothing can look Verified: no candidate record other than review_status=candidate.
      expect(bodies<{ review_status: string }>(facts, AUTO_FACT_KINDS.candidate).map((c) => c.review_status)).toEqual([
        "candidate",
      ]);
    });

    it("AM.stage3.1 AM.states.8: a Reviewer that never answers is recorded per attempt and the run stays a provisional candidate, never review_unavailable", async () => {
      const { projection } = await drive([S2, S3], { reviewer: fakeReviewer("fake-crash") });
      if (projection instanceof Error) throw projection;
      expect(projection.state).toBe("candidate");
      expect(projection.terminal).toBeNull();
      expect(projection.shadow).toMatchObject({ verdict: null, outcome: "provider_failed", final: true });
      expect(projection.review_runs[0]?.attempts.map((a) => a.outcome)).toEqual(["provider_failed", "provider_failed"]);
    });

    it("AM.stage3.1 AM.states.6: no independent Reviewer: no inference, nothing recorded, the run stays a provisional candidate", async () => {
      const { projection, facts, calls } = await drive([S2, S3], {
        reviewer: fakeReviewer("fake-pass", { fingerprint: PRODUCER.fingerprint }),
      });
      if (projection instanceof Error) throw projection;
      expect(calls).toBe(0);
      expect(projection.state).toBe("candidate");
      expect(projection.shadow).toBeNull();
      expect(eventsOf(facts).map((e) => e.type)).toEqual(["auto_run_started", "candidate_ready"]);
    });

    it("AM.stage3.1 AM.states.9 AM.durable.4: integrity still holds in shadow: a pass beside a material finding ends at the safety boundary", async () => {
      const { projection } = await drive([S2, S3], { reviewer: fakeReviewer("fake-pass-material") });
      if (projection instanceof Error) throw projection;
      expect(projection.terminal_reason).toBe("safety_boundary");
      expect(projection.state).toBeNull();
    });
  });

  describe("Stage 4: provisional streaming, the candidate before the verdict, Verified only after the CAS promotion", () => {
    const steps: EngineStep[] = [
      { kind: "prose", text: "Reading the data. " },
      { kind: "turn", usage: { input_tokens: 40, output_tokens: 10 } },
      { kind: "prose", text: "The answer is 42." },
      completion(),
    ];

    it("AM.stage4.1 AM.states.3: prose streams labelled provisional, then the committed candidate, then the verdict; the durable order agrees", async () => {
      const seq: string[] = [];
      const chunks: ProvisionalChunk[] = [];
      const { projection, facts } = await drive([S2, S4], {
        steps,
        onProvisional: (c) => {
          chunks.push(c);
          seq.push(`provisional:${c.kind}`);
        },
        onEvent: (e) => seq.push(`event:${e.type}`),
      });
      if (projection instanceof Error) throw projection;
      expect(seq).toEqual([
        "event:auto_run_started",
        "provisional:prose",
        "provisional:prose",
        "event:candidate_ready",
        "provisional:candidate",
        "event:auto_audit_started",
        "event:auto_audit_completed",
        "event:auto_run_terminal",
      ]);
      for (const c of chunks) {
        expect(c.label).toBe("provisional");
        expect(c.user_truth).toBe(PROVISIONAL);
        expect(c.run).toEqual(RUN);
      }
      expect(chunks.map((c) => c.text)).toEqual(["Reading the data. ", "The answer is 42.", "The answer is 42."]);
      expect(chunks[2]?.candidate_id).toBe(projection.candidate?.candidate_id);
      // Durable order: the candidate (review_status=candidate) commits before the verdict, the
      // promoted (verified) candidate only with the terminal.
      const seqOf = (pred: (f: (typeof facts)[number]) => boolean) => facts.find(pred)?.seq ?? -1;
      const isCand = (status: string) => (f: (typeof facts)[number]) =>
        f.kind === AUTO_FACT_KINDS.candidate &&
        (f.record as { body: { review_status: string } }).body.review_status === status;
      const isEvent = (type: string) => (f: (typeof facts)[number]) =>
        f.kind === AUTO_FACT_KINDS.event && (f.record as { type: string }).type === type;
      expect(seqOf(isCand("candidate"))).toBeGreaterThan(-1);
      expect(seqOf(isCand("candidate"))).toBeLessThan(seqOf(isEvent("auto_audit_started")));
      expect(seqOf(isEvent("auto_audit_completed"))).toBeLessThan(seqOf(isCand("verified")));
      const terminal = facts.find(isEvent("auto_run_terminal"));
      const promoted = facts.find(isCand("verified"));
      expect((promoted?.record as { event_id?: string } | undefined)?.event_id).toBe(
        (terminal?.record as { event_id?: string } | undefined)?.event_id,
      );
      expect(promoted).toBeDefined();
      expect(projection.state).toBe("verified");
    });

    it("AM.stage4.1: an issues verdict after streaming: the streamed candidate never becomes Verified", async () => {
      const chunks: ProvisionalChunk[] = [];
      const { projection, facts } = await drive([S2, S4], {
        steps,
        reviewer: fakeReviewer("fake-issues"),
        onProvisional: (c) => chunks.push(c),
      });
      if (projection instanceof Error) throw projection;
      expect(chunks.every((c) => c.user_truth === PROVISIONAL)).toBe(true);
      expect(projection.state).toBe("completed_with_issues");
      expect(projection.blocking_finding_ids).toHaveLength(1);
      expect(bodies<{ review_status: string }>(facts, AUTO_FACT_KINDS.candidate).map((c) => c.review_status)).toEqual([
        "candidate",
      ]);
    });

    it("AM.stage4.1 AM.rollout.2: without Stage 4 nothing streams (Stage 3 shadow and review off)", async () => {
      for (const [flags, mode] of [
        [[S2, S3], "review_only"],
        [[S2], "review_only"],
        [[S2, S3, S4], "off"],
      ] as const) {
        const chunks: ProvisionalChunk[] = [];
        const { projection } = await drive([...flags], {
          steps,
          selection: { ...REVIEW_ONLY, result_review_mode: mode },
          onProvisional: (c) => chunks.push(c),
        });
        if (projection instanceof Error) throw projection;
        expect(chunks, `${flags.join("+")} ${mode}`).toEqual([]);
      }
    });

    it("AM.stage4.1: a provisional listener that throws decides nothing", async () => {
      const { projection } = await drive([S2, S4], {
        steps,
        onProvisional: () => {
          throw new Error("listener failed");
        },
      });
      if (projection instanceof Error) throw projection;
      expect(projection.state).toBe("verified");
      expect(projection.problems).toEqual([]);
    });
  });
});
